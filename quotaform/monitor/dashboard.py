"""The Grafana dashboard of ``quotaform monitor dashboard``, over the series
the rules record (:mod:`quotaform.monitor.rules`).

A dashboard JSON model of the current schema (``schemaVersion`` 41, Grafana
11-12; classic JSON, what file provisioning and "Import dashboard" take),
with a Prometheus data-source variable and query variables for the cluster,
the user and the client id (``label_values`` of the recorded usage). Panels:

* overview: the top quota groups by utilisation (their busiest broker), the
  throttled groups, every group's utilisation per broker;
* one row per quota key: usage against the effective limit per broker (the
  limit is a limit per broker), and summed across brokers against the
  ceiling (the limit on each broker reporting the group; the limit itself
  for ``controller_mutation_rate``, held by the one active controller).

Every query is PromQL over ``quotaform:client_quota_*`` only, so the
dashboard does not depend on the exporter convention.
:func:`dashboard_queries` lists them (variables included) for the tests that
run each one against a real Prometheus.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from quotaform.kafka.entity import IP
from quotaform.kafka.keys import QUOTA_KEYS, KeySpec
from quotaform.monitor.promql import Matcher, selector
from quotaform.monitor.rules import LIMIT, RATIO, THROTTLE, USAGE

__all__ = [
    "DASHBOARD_TITLE",
    "DASHBOARD_UID",
    "GRAFANA_UNITS",
    "SCHEMA_VERSION",
    "DashboardOptions",
    "DashboardQuery",
    "build_dashboard",
    "dashboard_queries",
    "render_dashboard",
]

#: The dashboard JSON model's schema version (Grafana 11.3+; 39 or later is current).
SCHEMA_VERSION = 41
#: The dashboard's title unless given.
DASHBOARD_TITLE = "Kafka client quotas (quotaform)"
#: The dashboard's uid unless given: stable, so provisioning updates it in place.
DASHBOARD_UID = "quotaform-client-quotas"
#: Grafana's unit of each quota key's unit (KeySpec.unit).
GRAFANA_UNITS: Mapping[str, str] = MappingProxyType(
    {"bytes/s": "binBps", "%": "percent", "mutations/s": "ops", "connections/s": "cps"}
)
_DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
_GROUP_LABELS = ("quota_key", "user", "client_id", "ip")
_TOP = 20


@dataclass(frozen=True, slots=True)
class DashboardOptions:
    """How the dashboard is written.

    Attributes:
        title: the dashboard's title.
        uid: its uid (provisioning and links find it by this).
        cluster_label: the Prometheus label naming the cluster (the
            ``cluster`` variable's label; series without it match "All").
        broker_label: the label naming the broker (legends, per-broker views).
        refresh: the auto-refresh interval (``30s``).
    """

    title: str = DASHBOARD_TITLE
    uid: str = DASHBOARD_UID
    cluster_label: str = "cluster"
    broker_label: str = "instance"
    refresh: str = "30s"


@dataclass(frozen=True, slots=True)
class DashboardQuery:
    """One query of the dashboard.

    Attributes:
        where: ``panel title/refId`` or ``variable NAME``.
        expr: PromQL (for a variable: its ``label_values(...)`` definition).
        variable: the query defines a template variable.
    """

    where: str
    expr: str
    variable: bool = False


def _matchers(options: DashboardOptions, *, client: bool = True) -> tuple[Matcher, ...]:
    found: tuple[Matcher, ...] = ((options.cluster_label, "=~", "$cluster"),)
    if client:
        found += (("user", "=~", "$user"), ("client_id", "=~", "$client_id"))
    return found


def _variables(options: DashboardOptions) -> list[dict[str, Any]]:
    cluster = options.cluster_label
    datasource = {
        "type": "datasource",
        "name": "datasource",
        "label": "Prometheus",
        "query": "prometheus",
        "current": {},
        "hide": 0,
        "includeAll": False,
        "multi": False,
        "options": [],
        "refresh": 1,
        "regex": "",
    }
    found = [datasource]
    for name, label, matchers in (
        ("cluster", "Cluster", ()),
        ("user", "User", ((cluster, "=~", "$cluster"),)),
        ("client_id", "Client id", ((cluster, "=~", "$cluster"), ("user", "=~", "$user"))),
    ):
        target = cluster if name == "cluster" else name
        definition = f"label_values({selector(USAGE, matchers)}, {target})"
        found.append(
            {
                "type": "query",
                "name": name,
                "label": label,
                "datasource": _DATASOURCE,
                "definition": definition,
                "query": {
                    "qryType": 1,
                    "query": definition,
                    "refId": "PrometheusVariableQueryEditor-VariableQuery",
                },
                "refresh": 2,
                "includeAll": True,
                "allValue": ".*",
                "multi": True,
                "sort": 1,
                "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
                "hide": 0,
                "options": [],
                "regex": "",
            }
        )
    return found


def _target(ref: str, expr: str, legend: str, *, instant: bool = False) -> dict[str, Any]:
    target: dict[str, Any] = {
        "refId": ref,
        "datasource": _DATASOURCE,
        "expr": expr,
        "legendFormat": legend,
        "range": not instant,
        "instant": instant,
    }
    if instant:
        target["format"] = "table"
    return target


def _legend(options: DashboardOptions, *, broker: bool = True) -> str:
    text = "{{quota_key}} {{user}} {{client_id}}{{ip}}"
    return text + (f" on {{{{{options.broker_label}}}}}" if broker else "")


def _timeseries(
    title: str, description: str, targets: list[dict[str, Any]], unit: str, **extra: Any
) -> dict[str, Any]:
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": _DATASOURCE,
        "targets": targets,
        "fieldConfig": {
            "defaults": {
                "unit": unit,
                "min": 0,
                "custom": {
                    "drawStyle": "line",
                    "lineWidth": 1,
                    "fillOpacity": 0,
                    "spanNulls": False,
                },
                **extra.pop("defaults", {}),
            },
            "overrides": extra.pop("overrides", []),
        },
        "options": {
            "legend": {
                "displayMode": "table",
                "placement": "bottom",
                "showLegend": True,
                "calcs": ["lastNotNull", "max"],
            },
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
    }


def _table(
    title: str, description: str, target: dict[str, Any], unit: str, **extra: Any
) -> dict[str, Any]:
    return {
        "type": "table",
        "title": title,
        "description": description,
        "datasource": _DATASOURCE,
        "targets": [target],
        "fieldConfig": {"defaults": {"unit": unit, **extra.pop("defaults", {})}, "overrides": []},
        "options": {"showHeader": True, "sortBy": [{"displayName": "Value", "desc": True}]},
        "transformations": [{"id": "organize", "options": {"excludeByName": {"Time": True}}}],
    }


_THRESHOLDS = {
    "mode": "absolute",
    "steps": [
        {"color": "green", "value": None},
        {"color": "orange", "value": 0.9},
        {"color": "red", "value": 1},
    ],
}


def _limit_overrides() -> list[dict[str, Any]]:
    """The limit series drawn dashed, so usage and limit read apart."""
    return [
        {
            "matcher": {"id": "byFrameRefID", "options": "B"},
            "properties": [
                {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
                {"id": "custom.lineWidth", "value": 2},
            ],
        }
    ]


def _overview(options: DashboardOptions) -> list[dict[str, Any]]:
    where = _matchers(options)
    by = ", ".join((options.cluster_label, *_GROUP_LABELS, "level", "entity"))
    top = _table(
        "Top quota groups by utilisation (busiest broker)",
        "Usage / effective limit of each quota group on the broker where it runs hottest "
        "(quotas are limits per broker). source=kip-1373: the broker's own ratio.",
        _target("A", f"topk({_TOP}, max by ({by}) ({selector(RATIO, where)}))", "", instant=True),
        "percentunit",
        defaults={
            "thresholds": _THRESHOLDS,
            "custom": {"cellOptions": {"type": "color-background"}},
        },
    )
    throttled_by = ", ".join((options.cluster_label, *_GROUP_LABELS, options.broker_label))
    throttled = _table(
        "Throttled quota groups",
        "Groups the brokers throttle now: mean throttle time per throttled response (ms), per "
        "broker.",
        _target(
            "A", f"max by ({throttled_by}) ({selector(THROTTLE, where)} > 0)", "", instant=True
        ),
        "ms",
    )
    ratio = _timeseries(
        "Utilisation per broker",
        "Every quota group's usage / effective limit on each broker.",
        [_target("A", selector(RATIO, where), _legend(options))],
        "percentunit",
        defaults={
            "thresholds": _THRESHOLDS,
            "custom": {
                "thresholdsStyle": {"mode": "line"},
                "drawStyle": "line",
                "lineWidth": 1,
                "fillOpacity": 0,
                "spanNulls": False,
            },
        },
    )
    return [_row("Overview: every quota key"), top, throttled, ratio]


def _row(title: str) -> dict[str, Any]:
    return {"type": "row", "title": title, "collapsed": False, "panels": []}


def _key_panels(key: str, spec: KeySpec, options: DashboardOptions) -> list[dict[str, Any]]:
    where = _matchers(options, client=IP not in spec.entity_types)
    key_matcher: tuple[Matcher, ...] = (("quota_key", "=", key), *where)
    unit = GRAFANA_UNITS.get(spec.unit, "short")
    usage, limit = selector(USAGE, key_matcher), selector(LIMIT, key_matcher)
    per_broker = _timeseries(
        f"{key}: usage against the effective limit, per broker",
        f"Each quota group's usage ({spec.unit}) on each broker, and the quota it really gets "
        "there (dashed: the governing entry of Kafka's resolution; a limit per broker).",
        [
            _target("A", usage, _legend(options)),
            _target("B", limit, "limit " + _legend(options) + " ({{entity}})"),
        ],
        unit,
        overrides=_limit_overrides(),
    )
    group_by = ", ".join((options.cluster_label, *_GROUP_LABELS))
    # a limit per broker: summed over the brokers that report the group, except
    # controller mutations, held by the one active controller (KIP-599)
    ceiling = "max" if spec.enforced_on == "controller" else "sum"
    held = "the active controller alone" if ceiling == "max" else "limit x brokers"
    summed = _timeseries(
        f"{key}: summed across brokers",
        "Each quota group's usage summed across brokers, against its ceiling: the limit on "
        f"each broker reporting it ({held}).",
        [
            _target("A", f"sum by ({group_by}) ({usage})", _legend(options, broker=False)),
            _target(
                "B",
                f"{ceiling} by ({group_by}, level, entity) ({limit})",
                "ceiling " + _legend(options, broker=False) + " ({{entity}})",
            ),
        ],
        unit,
        overrides=_limit_overrides(),
    )
    return [_row(f"{key} ({spec.unit})"), per_broker, summed]


def _layout(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ids and grid positions: a row takes the full width; the panels after
    it go two to a line, tables and the wide overview graph 12 x 9."""
    y = x = 0
    for number, panel in enumerate(panels, start=1):
        panel["id"] = number
        if panel["type"] == "row":
            if x:
                y, x = y + 9, 0
            panel["gridPos"] = {"h": 1, "w": 24, "x": 0, "y": y}
            y += 1
            continue
        panel["gridPos"] = {"h": 9, "w": 12, "x": x, "y": y}
        x = 12 if x == 0 else 0
        if x == 0:
            y += 9
    return panels


def build_dashboard(options: DashboardOptions) -> dict[str, Any]:
    """The dashboard JSON model (a plain, JSON-ready dict; deterministic)."""
    panels = _overview(options)
    for key, spec in QUOTA_KEYS.items():
        panels += _key_panels(key, spec, options)
    return {
        "uid": options.uid,
        "title": options.title,
        "description": (
            "Every Kafka client quota group's usage against the quota it really gets (the "
            "governing entry of Kafka's resolution, recorded by `quotaform monitor rules`), per "
            "broker and summed across brokers."
        ),
        "tags": ["kafka", "quotas", "quotaform"],
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "timezone": "browser",
        "refresh": options.refresh,
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "links": [],
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "templating": {"list": _variables(options)},
        "panels": _layout(panels),
    }


def render_dashboard(dashboard: Mapping[str, Any]) -> str:
    """The dashboard as JSON text (two-space indent, a final newline): the
    same model gives the same bytes."""
    return json.dumps(dashboard, indent=2, ensure_ascii=False) + "\n"


def dashboard_queries(dashboard: Mapping[str, Any]) -> Iterator[DashboardQuery]:
    """Every query of ``dashboard``: each variable's ``label_values``
    definition, then each panel target's ``expr``, in order."""
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            yield DashboardQuery(f"variable {variable['name']}", variable["definition"], True)
    for panel in dashboard.get("panels", []):
        for target in panel.get("targets", []):
            yield DashboardQuery(f"{panel['title']}/{target['refId']}", target["expr"])
