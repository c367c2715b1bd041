"""How the Prometheus exporters name Kafka's quota metrics, decoded.

One Prometheus series (its labels, ``__name__`` included) becomes one
:class:`SeriesMeaning`: the usage metric it holds and its quota group's tags,
or why it is not a quota group's series. The conventions known (see
``../shared/notes/kafka-quota-metrics.md`` 3.2 and ``examples/prometheus/``):

* ``labels``: Confluent jmx-monitoring-stacks, quotaform's own rules in
  ``examples/prometheus/``, the exporter's default naming, the Strimzi
  Metrics Reporter: ``kafka_server_produce_byte_rate{user, client_id}``,
  ``kafka_server_request_request_time``, ...,
  ``kafka_server_socket_server_metrics_connection_accept_rate{ip}``;
* ``quota``: jmx_exporter's ``examples/kafka-2_0_0.yml``:
  ``kafka_server_quota_byte_rate{resource="Produce", user, clientId}``;
* ``quota-folded``: its pre-2023 ``example_configs/kafka-2_0_0.yml``:
  ``kafka_server_quota_byte_rate{resource="Produce, user=alice", clientId}``,
  decoded (those rules export no user-only group: said in a note);
* ``name-folded``: jmx_exporter's ``examples/kafka-kraft-3_0_0.yml``
  catch-all: ``kafka_server_produce_user_alice_client_id_ingest_byte_rate``
  without labels. The tags are lower-cased into the name and cannot be
  recovered: refused, naming the rules to use instead.

Per-listener and broker-wide connection rates (``listener`` label, no
``ip``) are the broker's own sensors, not quota groups: skipped with that
reason. Series whose ``__name__`` a PromQL function or aggregation dropped
(``avg_over_time``, ``sum by``) are read as ``--metric``'s metric when given.
Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from quotaform.kafka.keys import METRICS, QUOTA_KEYS
from quotaform.kafka.metrics import jmx_unquote

__all__ = [
    "CONVENTIONS",
    "FOLDED_REASON",
    "KRAFT_RULES",
    "LABELS",
    "LIVE_SELECTOR",
    "NAME_FOLDED",
    "OLD_RULES_NOTE",
    "QUOTA",
    "QUOTA_FOLDED",
    "STRIMZI_RULES",
    "SeriesMeaning",
    "decode_series",
    "labels_name",
    "metric_of_name",
    "quota_name",
]

#: The naming conventions :func:`decode_series` recognises (module docstring).
LABELS, QUOTA, QUOTA_FOLDED, NAME_FOLDED = "labels", "quota", "quota-folded", "name-folded"
#: The readable ones, in the order quotaform tries them.
CONVENTIONS = (LABELS, QUOTA, QUOTA_FOLDED)

#: The rules to add to Strimzi's ``kafka-metrics.yaml`` (shipped with quotaform).
STRIMZI_RULES = "examples/prometheus/strimzi-kafka-metrics-quota-rules.yaml"
#: The rules to put before the catch-all of jmx_exporter's ``kafka-kraft-3_0_0.yml``.
KRAFT_RULES = "examples/prometheus/jmx-exporter-quota-rules.yml"
#: Said of series in the pre-2023 ``example_configs/kafka-2_0_0.yml`` form.
OLD_RULES_NOTE = (
    'read series of the pre-2023 jmx_exporter rules (resource="Produce, user=..."), '
    "which export no user-only quota group (levels 3 and 6): use "
    f"{KRAFT_RULES} to see them"
)

_ATTRIBUTES = {
    spec.sensor: {
        attr: metric
        for attr, metric in (
            (spec.metric, spec.usage_metric),
            ("throttle-time", spec.throttle_metric),
        )
        if metric is not None
    }
    for spec in QUOTA_KEYS.values()
}


def _snake(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def labels_name(sensor: str, attribute: str) -> str:
    """The ``labels`` convention's name of an MBean attribute: the type and
    the attribute lower-cased, snake-cased, after ``kafka_server_``
    (``("Produce", "byte-rate")`` -> ``kafka_server_produce_byte_rate``;
    ``("socket-server-metrics", "connection-accept-rate")`` ->
    ``kafka_server_socket_server_metrics_connection_accept_rate``)."""
    return f"kafka_server_{_snake(sensor)}_{_snake(attribute)}"


def quota_name(attribute: str) -> str:
    """The ``quota`` (and ``quota-folded``) convention's name of an MBean
    attribute, the MBean type going into the ``resource`` label
    (``byte-rate`` -> ``kafka_server_quota_byte_rate``)."""
    return f"kafka_server_quota_{_snake(attribute)}"


#: ``labels`` convention: exporter name -> usage metric.
_BY_NAME = {
    labels_name(sensor, attr): metric
    for sensor, attrs in _ATTRIBUTES.items()
    for attr, metric in attrs.items()
}
#: ``quota`` convention: (attribute name, MBean type) -> usage metric.
_BY_QUOTA_NAME = {
    (quota_name(attr), sensor): metric
    for sensor, attrs in _ATTRIBUTES.items()
    for attr, metric in attrs.items()
}
_CLIENT_SENSORS = "|".join(_snake(s.sensor) for s in QUOTA_KEYS.values() if s.throttle_metric)
_ATTRS = "|".join(sorted({_snake(a) for attrs in _ATTRIBUTES.values() for a in attrs} | {"tokens"}))
#: ``name-folded`` convention: the tags lower-cased into the name.
_FOLDED_NAME = re.compile(rf"^kafka_server_({_CLIENT_SENSORS})_((user|client_id)_.+)_({_ATTRS})$")
_CONNECTION = f"kafka_server_{_snake('socket-server-metrics')}_"
_FOLDED_IP = re.compile(rf"^{_CONNECTION}ip_.+_connection_accept_rate$")
#: Why series with the tags folded into the name cannot be read.
FOLDED_REASON = (
    "the exporter rules folded the quota groups' tags into the metric names, lower-cased "
    "(jmx_exporter's kafka-kraft-3_0_0.yml catch-all), so users, client ids and ips cannot "
    f"be recovered: add {KRAFT_RULES} before that rule"
)

#: The PromQL selector ``--prometheus`` queries: every name of every
#: convention above (the folded ones too, so they can be named).
LIVE_SELECTOR = (
    '{__name__=~"'
    + "|".join(
        [
            f"kafka_server_({_CLIENT_SENSORS})_.*({_ATTRS})",
            f"kafka_server_quota_({_ATTRS})",
            f"{_CONNECTION}(ip_.+_)?connection_accept_rate",
        ]
    )
    + '"}'
)


@dataclass(frozen=True, slots=True)
class SeriesMeaning:
    """What one Prometheus series holds.

    Attributes:
        metric: the usage metric (``produce-byte-rate``, ...; ``None``: not
            a quota group's series, ``reason`` says why).
        user, client_id, ip: the group's tags as the broker sets them (the
            user URL-encoded, JMX quoting undone; ``""`` for an empty tag;
            ``ip`` ``None`` except for connection metrics).
        convention: the naming convention recognised (``labels``, ``quota``,
            ``quota-folded``, ``name-folded``, ``--metric``).
        reason: why the series is not used (with ``metric`` ``None``).
        unusable: the series is a quota metric whose tags cannot be read
            (``name-folded``): an error, never a silent skip.
    """

    metric: str | None
    user: str = ""
    client_id: str = ""
    ip: str | None = None
    convention: str = ""
    reason: str = ""
    unusable: bool = False


def metric_of_name(name: str) -> str | None:
    """The usage metric ``--metric NAME`` means: a usage metric name
    (``produce-byte-rate``) or an exporter name of the ``labels`` convention
    (``kafka_server_produce_byte_rate``); ``None`` for anything else."""
    if name in METRICS:
        return name
    return _BY_NAME.get(name.lower())


def _folded_resource(resource: str) -> tuple[str, str] | None:
    """``"Produce, user=alice"`` -> ``("Produce", "alice")``; ``None`` for
    any other shape. A user tag is URL-encoded by the broker: it holds no
    ``,`` or space, so the split is unambiguous."""
    sensor, sep, rest = resource.partition(",")
    key, eq, user = rest.strip().partition("=")
    if not sep or not eq or key != "user" or not user:
        return None
    return sensor.strip(), user


def decode_series(labels: Mapping[str, str], *, metric: str | None = None) -> SeriesMeaning:
    """The meaning of the series with ``labels`` (``__name__`` included,
    when the series has one).

    Args:
        labels: the series' labels, as Prometheus returns them.
        metric: ``--metric``: the usage metric of series without ``__name__``
            (:func:`metric_of_name` of the user's text).
    """
    name = str(labels.get("__name__", ""))
    user = str(labels.get("user", ""))
    client = jmx_unquote(str(labels.get("client_id", labels.get("clientId", ""))))
    lowered = name.lower()
    if not name:
        if metric is None:
            return SeriesMeaning(
                None,
                reason="no __name__ (a PromQL function or aggregation dropped it): give "
                "--metric NAME for such files",
                unusable=True,
            )
        found, convention = metric, "--metric"
    elif lowered in _BY_NAME:
        found, convention = _BY_NAME[lowered], LABELS
    elif lowered.startswith("kafka_server_quota_"):
        resource = str(labels.get("resource", ""))
        if (lowered, resource) in _BY_QUOTA_NAME:
            found, convention = _BY_QUOTA_NAME[(lowered, resource)], QUOTA
        elif (folded := _folded_resource(resource)) and (lowered, folded[0]) in _BY_QUOTA_NAME:
            found, convention = _BY_QUOTA_NAME[(lowered, folded[0])], QUOTA_FOLDED
            user = folded[1]
        else:
            known = any(known_name == lowered for known_name, _ in _BY_QUOTA_NAME)
            shown = f"{name}{{resource={resource!r}}}" if known else name
            return SeriesMeaning(None, reason=f"not a quota usage metric: {shown}")
    elif _FOLDED_NAME.match(lowered) or _FOLDED_IP.match(lowered):
        return SeriesMeaning(None, convention=NAME_FOLDED, reason=FOLDED_REASON, unusable=True)
    else:
        return SeriesMeaning(None, reason=f"not a quota usage metric: {name}")
    is_ip = "ip" in QUOTA_KEYS[METRICS[found][0]].entity_types
    ip = labels.get("ip")
    if is_ip and not ip:
        where = f"listener {labels['listener']}" if labels.get("listener") else "the broker"
        return SeriesMeaning(
            None,
            convention=convention,
            reason=f"connection rate of {where}, not of an ip: not a quota group",
        )
    return SeriesMeaning(
        found,
        user="" if is_ip else user,
        client_id="" if is_ip else client,
        ip=jmx_unquote(str(ip)) if is_ip and ip else None,
        convention=convention,
    )
