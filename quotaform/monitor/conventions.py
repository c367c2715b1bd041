"""The exporter naming conventions the rules read, as PromQL.

Each convention (:mod:`quotaform.analytics.exporters`, where the same names
are decoded for ``analyze --prometheus``) names the broker's quota MBeans
(``kafka.server:type=Produce,user=U,client-id=C`` and friends; notes 3.1-3.2)
its own way. :data:`CONVENTIONS` turns each into one PromQL expression per
(quota key, MBean attribute) whose series carry the quota group's tags as the
labels ``user``, ``client_id`` (``ip`` for connection rates), absent where the
broker leaves the tag empty, exactly as the labels convention writes them:

* ``labels``: ``kafka_server_produce_byte_rate{user, client_id}``, the
  reference: read as it is;
* ``quota`` (jmx_exporter ``examples/kafka-2_0_0.yml``):
  ``kafka_server_quota_byte_rate{resource="Produce", user, clientId}``:
  ``clientId`` copied to ``client_id``;
* ``quota-folded`` (its pre-2023 ``example_configs``):
  ``kafka_server_quota_byte_rate{resource="Produce, user=alice", clientId}``:
  the user cut out of ``resource``, ``clientId`` copied to ``client_id``.

The ``labels`` convention is Confluent's jmx-monitoring-stacks, the rules
quotaform ships in ``examples/prometheus/`` and the Strimzi Metrics
Reporter; only it exports the per-ip connection rate (``ip`` label). The
``quota`` forms have no ip series and no empty group. ``name-folded``
(jmx_exporter's ``kafka-kraft-3_0_0.yml`` catch-all) cannot be read: the tags
are lower-cased into the metric name.

:func:`detect` says which conventions a saved Prometheus answer shows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from quotaform.analytics.exporters import (
    FOLDED_REASON,
    LABELS,
    NAME_FOLDED,
    QUOTA,
    QUOTA_FOLDED,
    decode_series,
    labels_name,
    quota_name,
)
from quotaform.errors import MonitorError
from quotaform.kafka.entity import IP
from quotaform.kafka.keys import KeySpec
from quotaform.kafka.metrics import UTILIZATION_ATTRIBUTE
from quotaform.monitor.promql import Matcher, label_replace, selector

__all__ = [
    "CONVENTIONS",
    "Convention",
    "Detected",
    "detect",
    "series_labels",
]

Select = Callable[[KeySpec, str, tuple[Matcher, ...]], str]


def _labels(spec: KeySpec, attribute: str, matchers: tuple[Matcher, ...]) -> str:
    if IP in spec.entity_types:
        # the per-listener and broker-wide rates share the name, without ip
        matchers = (("ip", "!=", ""), *matchers)
    return selector(labels_name(spec.sensor, attribute), matchers)


def _client_id(expr: str) -> str:
    return label_replace(expr, "client_id", "$1", "clientId", "(.+)")


def _quota(spec: KeySpec, attribute: str, matchers: tuple[Matcher, ...]) -> str:
    return _client_id(selector(quota_name(attribute), (("resource", "=", spec.sensor), *matchers)))


def _quota_folded(spec: KeySpec, attribute: str, matchers: tuple[Matcher, ...]) -> str:
    # "Produce, user=alice": the type regex of the old rule swallowed the user
    # tag (a URL-encoded user holds no "," or space, so the cut is exact)
    folded = f"{spec.sensor}, user=(.+)"
    found = selector(quota_name(attribute), (("resource", "=~", folded), *matchers))
    return _client_id(label_replace(found, "user", "$1", "resource", folded))


@dataclass(frozen=True, slots=True)
class Convention:
    """One exporter naming convention.

    Attributes:
        name: ``labels``, ``quota`` or ``quota-folded``.
        exporters: who writes it, for messages and the docs.
        ip: whether it exports the per-ip connection rate (``ip`` groups).
    """

    name: str
    exporters: str
    ip: bool
    _select: Select = field(repr=False, compare=False)

    def series(self, spec: KeySpec, attribute: str, matchers: Sequence[Matcher] = ()) -> str | None:
        """PromQL for the series of ``attribute`` (``byte-rate``,
        ``throttle-time``, ``quota-utilization``) of ``spec``'s MBean, with
        the group's tags as ``user`` / ``client_id`` / ``ip`` labels and
        ``matchers`` added to the selector; ``None`` when the convention
        exports no such series (ip groups outside ``labels``)."""
        if IP in spec.entity_types and not self.ip:
            return None
        return self._select(spec, attribute, tuple(matchers))


#: Every convention the rules read, by name, in the order quotaform tries them.
CONVENTIONS: Mapping[str, Convention] = MappingProxyType(
    {
        c.name: c
        for c in (
            Convention(
                LABELS,
                "Confluent jmx-monitoring-stacks, quotaform's examples/prometheus/ rules, the "
                "Strimzi Metrics Reporter",
                True,
                _labels,
            ),
            Convention(QUOTA, "jmx_exporter examples/kafka-2_0_0.yml", False, _quota),
            Convention(
                QUOTA_FOLDED,
                "jmx_exporter's pre-2023 example_configs/kafka-2_0_0.yml",
                False,
                _quota_folded,
            ),
        )
    }
)


def series_labels(document: object) -> list[dict[str, str]]:
    """The label sets of every series of a Prometheus HTTP API answer:
    ``/api/v1/query`` and ``/api/v1/query_range`` (``data.result[].metric``)
    or ``/api/v1/series`` (``data[]``).

    Raises:
        MonitorError: not such an answer.
    """
    data = document.get("data") if isinstance(document, dict) else None
    items: object
    if isinstance(data, dict) and isinstance(data.get("result"), list):
        items = [r.get("metric") if isinstance(r, dict) else None for r in data["result"]]
    elif isinstance(data, list):
        items = data
    else:
        raise MonitorError(
            'not a Prometheus API answer: expected {"data": {"result": [...]}} (query, '
            'query_range) or {"data": [...]} (series)'
        )
    found = []
    for item in items:
        if not isinstance(item, dict):
            raise MonitorError("not a Prometheus API answer: a series without its labels")
        found.append({str(k): str(v) for k, v in item.items()})
    return found


@dataclass(frozen=True, slots=True)
class Detected:
    """What a Prometheus answer shows.

    Attributes:
        conventions: the readable conventions of its quota series, in
            :data:`CONVENTIONS` order.
        series: quota usage and throttle series per convention.
        utilisation: series of KIP-1373's ``quota-utilization`` attribute seen.
    """

    conventions: tuple[str, ...]
    series: Mapping[str, int]
    utilisation: int = 0


_UTILIZATION_NAMES = frozenset(
    {
        quota_name(UTILIZATION_ATTRIBUTE),
        *(labels_name(s, UTILIZATION_ATTRIBUTE) for s in ("Produce", "Fetch", "Request")),
    }
)


def detect(labels: Iterable[Mapping[str, str]]) -> Detected:
    """The conventions of a Prometheus answer's series (:func:`series_labels`),
    decoded as ``analyze --prometheus`` decodes them
    (:func:`~quotaform.analytics.exporters.decode_series`).

    Raises:
        MonitorError: the quota metrics' tags are folded into their names
            (unreadable, with the rules to use instead), or no quota series.
    """
    counts: Counter[str] = Counter()
    utilisation = 0
    for one in labels:
        if str(one.get("__name__", "")).lower() in _UTILIZATION_NAMES:
            utilisation += 1
            continue
        meaning = decode_series(one)
        if meaning.convention == NAME_FOLDED:
            raise MonitorError(f"the answer's quota series cannot be read: {FOLDED_REASON}")
        if meaning.metric is not None and meaning.convention in CONVENTIONS:
            counts[meaning.convention] += 1
    if not counts:
        raise MonitorError(
            "the answer holds no quota series of a convention quotaform reads "
            f"({', '.join(CONVENTIONS)}): query the brokers' quota metrics, e.g. "
            '/api/v1/series?match[]={__name__=~"kafka_server_.*"}'
        )
    return Detected(tuple(c for c in CONVENTIONS if c in counts), dict(counts), utilisation)
