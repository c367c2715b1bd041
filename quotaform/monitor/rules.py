"""The Prometheus rule file of ``quotaform monitor rules``: every quota
group's effective quota, its utilisation, and alerts.

The brokers export each quota group's usage and throttle time (one series per
group per broker, labelled with the group's tags) but not its limit (KIP-786
proposed it; KIP-1373's ``quota-utilization`` is a draft). These rules add it,
from the same quota configuration the manifests apply, reproducing Kafka's
resolution in PromQL from the metric labels.

Why from the labels: the broker resolves in two steps
(``DefaultQuotaCallback``; :mod:`quotaform.kafka.resolution`): step 1
(``quotaMetricTags``) picks the group's tags from the shapes that set the key,
step 2 (``quotaLimit`` -> ``findQuota``) looks the quota up *from the tags*.
A series' labels are the result of step 1 (an entry with its own quota has
already taken its clients out of the default's group), so step 2 alone,
applied to the labels, gives the limit each sensor is held to: for a group
with tags ``(u, c)`` the first of ``{u, c}``, ``{u, <default>}``,
``{<default>, c}``, ``{<default>, <default>}``; ``(u, "")``: ``{u}``,
``{<default>}``; ``("", c)``: ``{c}``, ``{<default>}``; neither tag:
unlimited; an ip: ``{ip=a}``, ``{ip=<default>}``
(:data:`~quotaform.kafka.resolution.LOOKUP_BY_TAGS`,
:data:`~quotaform.kafka.resolution.IP_LEVELS`: the order is read from there,
never written here).

The rule file has three groups (``NAME`` = the cluster's name):

``quotaform-entries-NAME``
    the *entry table*: one recording rule per (entity, quota key),
    ``quotaform:client_quota_entry{quota_key, level, entity, user?,
    client_id?, ip?} = value``, the named parts as the broker writes the tags
    (:func:`~quotaform.kafka.metrics.metric_tag`). Static, bounded by the
    configuration (10,000 entities: 10,000 rules of ``vector(V)``).
``quotaform-groups-NAME``
    * ``quotaform:client_quota_usage{quota_key, <the series' labels>}``: the
      usage series of every convention read (``byte-rate``,
      ``request-time``, ``mutation-rate``, ``connection-accept-rate``),
      their tags as ``user`` / ``client_id`` / ``ip`` labels;
    * ``quotaform:client_quota_throttle_time_ms``: the groups' mean throttle
      time (ms per throttled response; ``NaN`` when none, note 2.4);
    * ``quotaform:client_quota_reported_utilisation:ratio``: KIP-1373's
      ``quota-utilization`` / 100 where a broker exports it;
    * ``quotaform:client_quota_limit{<the usage series' labels>, quota_key,
      level, entity}``: per key, step 2 as one expression, the levels most
      specific first joined with ``or ignoring(level, entity)`` (the first
      that has an entry for the group wins; a group no level gives has no
      limit series, never a fake 0 or +Inf)::

          (quotaform:client_quota_entry{quota_key="k", level="1"}
             * on(user, client_id) group_right(level, entity)
             group without () (quotaform:client_quota_usage{quota_key="k", user!="",
                                                            client_id!=""}))
          or ignoring(level, entity)
          (... level="2" ... on(user) ...)

    * ``quotaform:client_quota_utilisation:ratio``: usage / limit
      (``source="quotaform"``), or KIP-1373's own ratio where a broker
      exports it (``source="kip-1373"``, preferred).
``quotaform-alerts-NAME``
    near the limit (utilisation above ``near_limit`` for ``near_limit_for``),
    throttled (throttle time above 0 for ``throttled_for``), and a custom
    quota callback on the brokers (KIP-257: the resolution does not apply,
    so no limit series for the user / client-id keys; the alert says why).

Every limit is per broker (each broker keeps its own sensor, KIP-13): the
limit series sit beside each broker's usage series.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from io import StringIO
from types import MappingProxyType
from typing import Any

from ruamel.yaml import YAML

from quotaform.analytics.exporters import CONVENTIONS as READABLE
from quotaform.errors import MonitorError
from quotaform.kafka.entity import CLIENT_ID, IP, USER, Entity
from quotaform.kafka.keys import QUOTA_KEYS, KeySpec
from quotaform.kafka.metrics import UTILIZATION_ATTRIBUTE, UTILIZATION_KEYS, metric_tag
from quotaform.kafka.resolution import IP_LEVELS, LOOKUP_BY_TAGS, Level, QuotaIndex, level_of
from quotaform.monitor.conventions import CONVENTIONS
from quotaform.monitor.promql import Matcher, selector, string
from quotaform.plan.enforcement import QUOTA_CALLBACK_CONFIG, QuotaEnforcement

__all__ = [
    "ALERT_CALLBACK",
    "ALERT_NEAR_LIMIT",
    "ALERT_THROTTLED",
    "ENTRY",
    "LIMIT",
    "RATIO",
    "REPORTED",
    "SOURCE_KIP",
    "SOURCE_RULES",
    "TAG_LABELS",
    "THROTTLE",
    "USAGE",
    "AlertOptions",
    "RuleFile",
    "RuleOptions",
    "build_rules",
    "prometheus_duration",
    "render_rules",
]

#: The entry table: one series per (entity, quota key), the value in the key's unit.
ENTRY = "quotaform:client_quota_entry"
#: Every quota group's usage, per broker, in the key's unit.
USAGE = "quotaform:client_quota_usage"
#: Every quota group's mean throttle time, ms per throttled response (NaN: none).
THROTTLE = "quotaform:client_quota_throttle_time_ms"
#: KIP-1373's ``quota-utilization`` as a ratio, where a broker exports it.
REPORTED = "quotaform:client_quota_reported_utilisation:ratio"
#: The effective quota of every quota group, per broker, in the key's unit.
LIMIT = "quotaform:client_quota_limit"
#: Usage / limit of every quota group, per broker.
RATIO = "quotaform:client_quota_utilisation:ratio"
#: The alerts.
ALERT_NEAR_LIMIT = "KafkaClientQuotaNearLimit"
ALERT_THROTTLED = "KafkaClientQuotaThrottled"
ALERT_CALLBACK = "KafkaClientQuotaCustomCallback"
#: ``source`` of a ratio: computed by these rules, or reported by the broker (KIP-1373).
SOURCE_RULES, SOURCE_KIP = "quotaform", "kip-1373"

#: The label holding each tag of a quota group (the labels convention's names).
TAG_LABELS: Mapping[str, str] = MappingProxyType({USER: "user", CLIENT_ID: "client_id", IP: "ip"})
_KEY, _LEVEL, _ENTITY, _SOURCE = "quota_key", "level", "entity", "source"
#: The MBean attribute of a group's throttle time.
_THROTTLE_ATTRIBUTE = "throttle-time"


@dataclass(frozen=True, slots=True)
class AlertOptions:
    """The alerting rules and their thresholds.

    Attributes:
        enabled: write the alert group at all.
        near_limit: the utilisation (a ratio: 0.9 is 90 %) above which a
            group is near its limit.
        near_limit_for_s: how long, seconds, before that fires.
        throttled_for_s: how long, seconds, a group must be throttled before
            that fires.
        labels: labels every alert gets (``severity``, ``team``), over the
            defaults (``severity: warning``; ``info`` for the callback alert).
    """

    enabled: bool = True
    near_limit: float = 0.9
    near_limit_for_s: float = 600.0
    throttled_for_s: float = 300.0
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RuleOptions:
    """How the rules are written.

    Attributes:
        cluster: the cluster's name (the quota configuration's), in the
            group names and, with ``cluster_label``, in the series.
        source: where the quotas come from, in words, for the file's header.
        conventions: the exporter conventions read
            (:data:`~quotaform.monitor.conventions.CONVENTIONS` names).
        cluster_label: the Prometheus label naming the cluster: every
            selector then takes ``LABEL="cluster"`` and the entry table
            carries it, so rule files of several clusters can share one
            Prometheus; ``None``: the Prometheus holds one cluster.
        broker_label: the label naming the broker (alert texts).
        interval_s: the rule groups' evaluation interval, seconds; ``None``:
            Prometheus' ``evaluation_interval``.
        alerts: the alerting rules.
        enforcement: how the live brokers enforce quotas (a custom quota
            callback drops the limits of the keys it decides); ``None``:
            not known (manifests, snapshots).
    """

    cluster: str
    source: str
    conventions: tuple[str, ...] = READABLE
    cluster_label: str | None = None
    broker_label: str = "instance"
    interval_s: float | None = None
    alerts: AlertOptions = field(default_factory=AlertOptions)
    enforcement: QuotaEnforcement | None = None


@dataclass(frozen=True, slots=True)
class RuleFile:
    """A built rule file.

    Attributes:
        groups: the rule groups as plain data (``name``, ``interval``,
            ``rules``), in file order.
        header: the comment lines the file starts with.
        entries: the entry table's size (one series per entity and key).
        resolved: the quota keys given a limit rule.
        callback_keys: the keys left without limits because the brokers use
            a custom quota callback (empty: none).
    """

    groups: tuple[Mapping[str, Any], ...]
    header: tuple[str, ...]
    entries: int
    resolved: tuple[str, ...]
    callback_keys: tuple[str, ...] = ()

    @property
    def rules(self) -> int:
        """How many rules the file holds."""
        return sum(len(g["rules"]) for g in self.groups)


def prometheus_duration(seconds: float) -> str:
    """``seconds`` in Prometheus' duration syntax, in the largest unit that
    divides it: 600 -> ``10m``, 90 -> ``90s``, 1.5 -> ``1500ms``.

    Raises:
        ValueError: not a positive whole number of milliseconds.
    """
    ms = round(seconds * 1000)
    if ms <= 0 or abs(ms - seconds * 1000) > 1e-6:
        raise ValueError(f"{seconds:g} s is not a positive whole number of milliseconds")
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _number(value: float) -> str:
    """A PromQL number literal: whole values without a fraction."""
    value = float(value)
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def _where(options: RuleOptions) -> tuple[Matcher, ...]:
    if options.cluster_label is None:
        return ()
    return ((options.cluster_label, "=", options.cluster),)


def _entry_rules(
    index: QuotaIndex, keys: Sequence[str], options: RuleOptions
) -> list[dict[str, Any]]:
    """The entry table: one rule per (entity, key), by key, level, entity."""
    rules = []
    for key in keys:
        entities = sorted(
            index.entities(key).items(),
            key=lambda item: (level_of(item[0]).number, item[0].sort_key()),
        )
        for entity, value in entities:
            labels: dict[str, str] = {}
            if options.cluster_label is not None:
                labels[options.cluster_label] = options.cluster
            labels.update(
                {
                    _KEY: key,
                    _LEVEL: str(level_of(entity).number),
                    _ENTITY: entity.label(),
                }
            )
            labels.update(_tags(entity))
            rules.append({"record": ENTRY, "expr": f"vector({_number(value)})", "labels": labels})
    return rules


def _tags(entity: Entity) -> dict[str, str]:
    """The named parts of ``entity`` as the labels of the groups it governs."""
    return {TAG_LABELS[t]: metric_tag(t, n) for t, n in entity.parts if n is not None}


def _normalised(
    key: str, spec: KeySpec, attribute: str, record: str, options: RuleOptions
) -> dict[str, Any] | None:
    """The rule recording ``attribute``'s series of every convention read as
    ``record`` (one rule, the conventions joined with ``or``: their series
    never share a label set); ``None`` when no convention exports it."""
    found = [
        expr
        for name in options.conventions
        if (expr := CONVENTIONS[name].series(spec, attribute, _where(options))) is not None
    ]
    if not found:
        return None
    return {
        "record": record,
        "expr": "\nor\n".join(found) + ("\n" if len(found) > 1 else ""),
        "labels": {_KEY: key},
    }


def _tag_matchers(user: bool, client: bool) -> tuple[Matcher, ...]:
    return (
        ("user", "!=" if user else "=", ""),
        ("client_id", "!=" if client else "=", ""),
    )


def _ladders(key: str) -> list[tuple[tuple[Matcher, ...], tuple[Level, ...]]]:
    """Per group shape of ``key``: the matchers selecting its groups and the
    levels step 2 looks up for them, most specific first (shapes no level
    can give, the group with neither tag, left out)."""
    if IP in QUOTA_KEYS[key].entity_types:
        return [((("ip", "!=", ""),), IP_LEVELS)]
    return [
        (_tag_matchers(user, client), levels)
        for (user, client), levels in LOOKUP_BY_TAGS.items()
        if levels
    ]


def _limit_expr(index: QuotaIndex, key: str, options: RuleOptions) -> str | None:
    """Step 2 of Kafka's resolution for every group of ``key``, in PromQL
    (module docstring); ``None`` when no entity sets the key."""
    where = _where(options)
    terms = []
    for matchers, levels in _ladders(key):
        usage = selector(USAGE, ((_KEY, "=", key), *matchers, *where))
        for level in levels:
            if not index.at_level(key, level.number):
                continue
            on = ", ".join(TAG_LABELS[t] for t, named in level.template if named)
            table = selector(ENTRY, ((_KEY, "=", key), (_LEVEL, "=", str(level.number)), *where))
            terms.append(
                f"(\n  {table}\n    * on({on}) group_right({_LEVEL}, {_ENTITY})\n"
                f"  group without () ({usage})\n)"
            )
    if not terms:
        return None
    return f"\nor ignoring({_LEVEL}, {_ENTITY})\n".join(terms) + "\n"


def _with_source(expr: str, source: str) -> str:
    return f'label_replace(\n  {expr},\n  "{_SOURCE}", {string(source)}, "", ""\n)'


def _ratio_expr(options: RuleOptions, *, kip: bool) -> str:
    """usage / limit, or KIP-1373's own ratio where a broker reports one."""
    where = _where(options)
    usage, limit = selector(USAGE, where), selector(LIMIT, where)
    computed = _with_source(
        f"{usage}\n    / ignoring({_LEVEL}, {_ENTITY}) group_left({_LEVEL}, {_ENTITY})\n  {limit}",
        SOURCE_RULES,
    )
    if not kip:
        return computed + "\n"
    reported = selector(REPORTED, where)
    joined = _with_source(
        f"{reported}\n    * ignoring({_LEVEL}, {_ENTITY}) group_left({_LEVEL}, {_ENTITY})\n"
        f"  group without () ({limit})",
        SOURCE_KIP,
    )
    alone = _with_source(reported, SOURCE_KIP)
    either = f"\nor ignoring({_LEVEL}, {_ENTITY}, {_SOURCE})\n"
    return either.join((joined, alone, computed)) + "\n"


_GROUP = (
    "{{ with $labels.user }}user={{ . }} {{ end }}"
    "{{ with $labels.client_id }}client-id={{ . }} {{ end }}"
    "{{ with $labels.ip }}ip={{ . }} {{ end }}"
)


def _alert_rules(options: RuleOptions, callback_keys: Sequence[str]) -> list[dict[str, Any]]:
    alerts = options.alerts
    where = _where(options)
    broker = f"{{{{ index $labels {string(options.broker_label)} }}}}"
    source = "{{ with $labels.entity }}, quota from {{ . }} (level {{ $labels.level }}){{ end }}"
    near_for = prometheus_duration(alerts.near_limit_for_s)
    throttled_for = prometheus_duration(alerts.throttled_for_s)
    throttle, limit = selector(THROTTLE, where), selector(LIMIT, where)
    rules: list[dict[str, Any]] = [
        {
            "alert": ALERT_NEAR_LIMIT,
            "expr": f"{selector(RATIO, where)} > {_number(alerts.near_limit)}",
            "for": near_for,
            "labels": {"severity": "warning", **alerts.labels},
            "annotations": {
                "summary": "A Kafka quota group runs near its {{ $labels.quota_key }} quota",
                "description": (
                    f"The quota group {_GROUP}on {broker} has used {{{{ $value | "
                    f"humanizePercentage }}}} of its {{{{ $labels.quota_key }}}} quota for "
                    f"{near_for}{source}. The quota is a limit per broker; `quotaform "
                    "explain` names every client that shares it."
                ),
            },
        },
        {
            "alert": ALERT_THROTTLED,
            "expr": (
                f"(\n  ({throttle} > 0)\n"
                f"    * ignoring({_LEVEL}, {_ENTITY}) group_left({_LEVEL}, {_ENTITY})\n"
                f"  group without () ({limit})\n)\n"
                f"or ignoring({_LEVEL}, {_ENTITY})\n({throttle} > 0)\n"
            ),
            "for": throttled_for,
            "labels": {"severity": "warning", **alerts.labels},
            "annotations": {
                "summary": "A Kafka quota group is throttled ({{ $labels.quota_key }})",
                "description": (
                    f"The broker {broker} has throttled the quota group {_GROUP}for "
                    f"{throttled_for}: {{{{ $value | humanize }}}} ms per throttled response on "
                    f"average, for its {{{{ $labels.quota_key }}}} quota{source}."
                ),
            },
        },
    ]
    enforcement = options.enforcement
    if callback_keys and enforcement is not None:
        for name in enforcement.classes:
            brokers = ", ".join(enforcement.brokers_using(name))
            rules.append(
                {
                    "alert": ALERT_CALLBACK,
                    "expr": "vector(1)",
                    "labels": {
                        "severity": "info",
                        **alerts.labels,
                        "quota_callback": name,
                        "brokers": brokers,
                    },
                    "annotations": {
                        "summary": (
                            f"Kafka brokers {brokers} use a custom quota callback: quotaform's "
                            "limits do not apply there"
                        ),
                        "description": (
                            f"Brokers {brokers} set {QUOTA_CALLBACK_CONFIG}={name} (KIP-257): "
                            "that class decides the quota groups and limits of "
                            f"{', '.join(callback_keys)}, not Kafka's default resolution of "
                            "the stored quotas, so these rules record no "
                            f"{LIMIT} and no utilisation for them (usage and throttling are "
                            "still recorded, and ip quotas are resolved: the callback never "
                            "decides them). Ask the callback's configuration what a client "
                            "really gets."
                        ),
                    },
                }
            )
    return rules


def _group(name: str, rules: list[dict[str, Any]], options: RuleOptions) -> dict[str, Any]:
    group: dict[str, Any] = {"name": name}
    if options.interval_s is not None:
        group["interval"] = prometheus_duration(options.interval_s)
    group["rules"] = rules
    return group


def build_rules(index: QuotaIndex, options: RuleOptions) -> RuleFile:
    """The rule file for the quota configuration ``index``.

    Deterministic: the same configuration and options give the same groups
    in the same order (keys in :data:`~quotaform.kafka.keys.QUOTA_KEYS`
    order, entities by level then name), so a pull request shows what
    changed.

    Raises:
        MonitorError: an unknown convention, no convention, or a threshold
            that is not a positive ratio.
    """
    unknown = [c for c in options.conventions if c not in CONVENTIONS]
    if unknown or not options.conventions:
        raise MonitorError(
            f"unknown exporter convention {', '.join(unknown) or '(none)'}: one or more of "
            f"{', '.join(CONVENTIONS)}"
        )
    if not options.alerts.near_limit > 0:
        raise MonitorError(f"--near-limit {options.alerts.near_limit:g}: give a positive ratio")
    enforcement = options.enforcement
    decided = bool(enforcement is not None and enforcement.classes)
    callback_keys = tuple(k for k, s in QUOTA_KEYS.items() if decided and s.callback_type)
    keys = tuple(k for k in QUOTA_KEYS if k not in callback_keys)
    groups_rules: list[dict[str, Any] | None] = []
    for key, spec in QUOTA_KEYS.items():
        groups_rules.append(_normalised(key, spec, spec.metric, USAGE, options))
    for key, spec in QUOTA_KEYS.items():
        if spec.throttle_metric is not None:
            groups_rules.append(_normalised(key, spec, _THROTTLE_ATTRIBUTE, THROTTLE, options))
    for key in UTILIZATION_KEYS:
        rule = _normalised(key, QUOTA_KEYS[key], UTILIZATION_ATTRIBUTE, REPORTED, options)
        if rule is not None:
            # a percentage, NaN without a quota (KIP-1373): a ratio, NaN dropped
            rule["expr"] = f"(\n{rule['expr']}) / 100 >= 0\n"
        groups_rules.append(rule)
    resolved = []
    for key in keys:
        expr = _limit_expr(index, key, options)
        if expr is not None:
            resolved.append(key)
            groups_rules.append({"record": LIMIT, "expr": expr, "labels": {_KEY: key}})
    groups_rules.append({"record": RATIO, "expr": _ratio_expr(options, kip=True)})
    written = [rule for rule in groups_rules if rule is not None]
    entries = _entry_rules(index, keys, options)
    suffix = options.cluster
    groups = [
        _group(f"quotaform-entries-{suffix}", entries, options),
        _group(f"quotaform-groups-{suffix}", written, options),
    ]
    if options.alerts.enabled:
        groups.append(
            _group(f"quotaform-alerts-{suffix}", _alert_rules(options, callback_keys), options)
        )
    header = _header(options, len(entries), callback_keys)
    return RuleFile(tuple(groups), header, len(entries), tuple(resolved), callback_keys)


def _header(options: RuleOptions, entries: int, callback_keys: Iterable[str]) -> tuple[str, ...]:
    said = (
        f"Written by `quotaform monitor rules` from {options.source} (cluster "
        f"{options.cluster!r}, {entries} quota entries; exporter conventions: "
        f"{', '.join(options.conventions)}). Regenerate it with the manifests; do not edit it."
    )
    keys = list(callback_keys)
    if keys:
        said += (
            f" The brokers use a custom quota callback: no limits for {', '.join(keys)} "
            f"(alert {ALERT_CALLBACK})."
        )
    return (
        *textwrap.wrap(said, width=_HEADER_WIDTH, break_on_hyphens=False, break_long_words=False),
        f"  {LIMIT:<42} the quota each quota group really gets, per broker",
        f'  {RATIO:<42} usage / limit (source="{SOURCE_KIP}": the broker\'s own)',
    )


#: Width of the header's text.
_HEADER_WIDTH = 90


class _Block(str):
    """A multi-line string, written as a YAML literal block."""

    __slots__ = ()


def _blocks(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _blocks(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_blocks(v) for v in value]
    if isinstance(value, str) and "\n" in value:
        return _Block(value)
    return value


def render_rules(rule_file: RuleFile) -> str:
    """The rule file as YAML (what Prometheus' ``rule_files`` and ``promtool
    check rules`` read): the header as comments, then the groups written by
    ruamel.yaml's C emitter (libyaml; 10,000 entities in a few seconds, where
    the pure-Python one takes four times as long), keys in the order
    Prometheus' documentation shows them, multi-line expressions as literal
    blocks."""
    yaml = YAML(typ="safe", pure=False)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]
    yaml.width = 4096  # never fold a label value or an expression line
    yaml.representer.add_representer(
        _Block, lambda r, d: r.represent_scalar("tag:yaml.org,2002:str", str(d), style="|")
    )
    out = StringIO()
    out.write("".join(f"# {line}\n" if line else "#\n" for line in rule_file.header))
    yaml.dump({"groups": _blocks(list(rule_file.groups))}, out)
    return out.getvalue()
