"""``quotaform monitor rules`` and ``quotaform monitor dashboard``:
monitoring as code, from the same quota configuration the manifests apply.

:func:`run_monitor_rules` takes one :class:`MonitorRulesRequest`: it reads
the quotas (manifests offline, a ``quotaform snapshot`` file, or the live
cluster with how its brokers enforce quotas), picks the exporter
conventions (given, detected from a saved Prometheus answer, or all),
builds the Prometheus rule file (:mod:`quotaform.monitor.rules`) and writes
it. :func:`run_monitor_dashboard` writes the Grafana dashboard
(:mod:`quotaform.monitor.dashboard`). Neither prints.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quotaform.analytics.configs import read_snapshot
from quotaform.analytics.exporters import CONVENTIONS as READABLE
from quotaform.app.common import ConnectionOptions, View, target
from quotaform.app.facts import gather_facts
from quotaform.cluster.connect import connect
from quotaform.errors import MonitorError
from quotaform.inputs.jsondoc import load_json
from quotaform.inputs.limits import LIMITS
from quotaform.kafka.entity import Entity
from quotaform.kafka.resolution import QuotaIndex
from quotaform.manifest import load_manifests
from quotaform.monitor.conventions import Detected, detect, series_labels
from quotaform.monitor.dashboard import (
    DashboardOptions,
    build_dashboard,
    dashboard_queries,
    render_dashboard,
)
from quotaform.monitor.rules import (
    ALERT_CALLBACK,
    LIMIT,
    AlertOptions,
    RuleFile,
    RuleOptions,
    build_rules,
    render_rules,
)
from quotaform.plan.enforcement import QuotaEnforcement
from quotaform.words import monitor_enforcement_text, offline_note

__all__ = [
    "MonitorDashboardRequest",
    "MonitorDashboardRun",
    "MonitorRulesRequest",
    "MonitorRulesRun",
    "run_monitor_dashboard",
    "run_monitor_rules",
]


@dataclass(frozen=True, slots=True)
class MonitorRulesRequest:
    """One ``quotaform monitor rules`` run.

    Attributes:
        out: the rule file to write; ``-``: none (the caller prints the text).
        manifests: build from these manifests, offline (``--cluster`` picks
            the cluster of a multi-cluster set).
        snapshot: else from this ``quotaform snapshot`` file (``--cluster``
            picks a cluster of several).
        cluster_name: the cluster's name in the rule groups (and, with
            ``cluster_label``, in the series) when read live; default: the
            ``--cluster`` profile's name, else the cluster id.
        conventions: the exporter conventions to read; empty: those
            ``sample`` shows, else every one quotaform reads.
        sample: a saved Prometheus API answer (query, query_range or series)
            whose quota series tell the conventions in use.
        cluster_label, broker_label, interval_s, alerts: as
            :class:`~quotaform.monitor.rules.RuleOptions`.
        connection: where to connect when neither manifests nor a snapshot
            is given (read-only: DescribeClientQuotas, DescribeCluster,
            DescribeConfigs).
        view: warnings and notes.
    """

    out: Path
    manifests: tuple[Path, ...] = ()
    snapshot: Path | None = None
    cluster_name: str | None = None
    conventions: tuple[str, ...] = ()
    sample: Path | None = None
    cluster_label: str | None = None
    broker_label: str = "instance"
    interval_s: float | None = None
    alerts: AlertOptions = field(default_factory=AlertOptions)
    connection: ConnectionOptions = field(default_factory=ConnectionOptions)
    view: View = field(default_factory=View)


@dataclass(frozen=True, slots=True)
class MonitorRulesRun:
    """What ``monitor rules`` built.

    Attributes:
        rule_file: the rules (groups, counts).
        text: the rule file's YAML.
        cluster: the cluster's name in the rules.
        source: ``manifests``, ``snapshot`` or ``cluster``.
        detected: what the sample answer showed (``None``: no sample).
        enforcement: how the live brokers enforce quotas (``None``: offline).
    """

    rule_file: RuleFile
    text: str
    cluster: str
    source: str
    detected: Detected | None = None
    enforcement: QuotaEnforcement | None = None


Entries = Mapping[Entity, Mapping[str, float]]


def _quotas(
    request: MonitorRulesRequest,
) -> tuple[Entries, str, str, str, QuotaEnforcement | None]:
    """``(entries, cluster, source, where in words, enforcement)``."""
    connection = request.connection
    if request.manifests:
        if request.snapshot is not None:
            raise MonitorError("give manifests or --snapshot FILE, not both")
        _note_unused(request, "manifests")
        desired = load_manifests(request.manifests, cluster=connection.cluster)
        where = f"the manifests {', '.join(map(str, request.manifests))}"
        return desired.quotas, desired.cluster, "manifests", where, None
    if request.snapshot is not None:
        _note_unused(request, "--snapshot")
        configs = read_snapshot(request.snapshot)
        wanted = connection.cluster
        found = [c for c in configs if wanted is None or c.cluster == wanted]
        if len(found) != 1:
            names = ", ".join(c.cluster for c in configs)
            raise MonitorError(
                f"{request.snapshot} holds the clusters {names}: pick one with --cluster NAME"
                if wanted is None
                else f"{request.snapshot} holds no cluster {wanted!r} (it holds {names})"
            )
        config = found[0]
        return config.entries, config.cluster, "snapshot", f"the snapshot {request.snapshot}", None
    found_target = target(connection, request.view)
    with connect(
        found_target.settings, read_only=True, cluster_id=found_target.cluster_id
    ) as client:
        facts = gather_facts(client, None)
    live, enforcement, cluster_id = facts.live, facts.enforcement, facts.cluster_id
    name = request.cluster_name or found_target.cluster or cluster_id
    where = f"the live cluster {cluster_id}"
    return live.entities, name, "cluster", where, enforcement


def _note_unused(request: MonitorRulesRequest, source: str) -> None:
    """Say which connection options an offline build leaves unused."""
    unused = [
        flag
        for flag in request.connection.flags_given()
        if not (flag == "--cluster" and source in ("manifests", "--snapshot"))
    ]
    if unused:
        request.view.note(offline_note(source, unused, doing="building the rules from"))


def _conventions(request: MonitorRulesRequest) -> tuple[tuple[str, ...], Detected | None]:
    if request.sample is None:
        return request.conventions or READABLE, None
    document, _ = load_json(request.sample, LIMITS["prometheus-answer"], constants=True)
    detected = detect(series_labels(document))
    if request.conventions:
        missing = [c for c in request.conventions if c not in detected.conventions]
        if missing:
            request.view.warn(
                f"--convention {', '.join(missing)}: the sample {request.sample} shows no "
                f"series of it (it shows {', '.join(detected.conventions)})"
            )
        return request.conventions, detected
    return detected.conventions, detected


def run_monitor_rules(request: MonitorRulesRequest) -> MonitorRulesRun:
    """Build the rule file and write it to ``request.out`` (unless ``-``).

    Raises:
        MonitorError: unusable options, a sample with no readable quota
            series, a snapshot of several clusters without ``--cluster``.
        ManifestError, AnalyticsError, InputError: unreadable manifests,
            snapshot or sample.
        ClusterConfigError, ConnectionSettingsError, BrokerError: reading
            the live cluster.
    """
    conventions, detected = _conventions(request)
    entries, cluster, source, where, enforcement = _quotas(request)
    if enforcement is not None:
        said = monitor_enforcement_text(enforcement, limit=LIMIT, alert=ALERT_CALLBACK)
        if said is not None:
            request.view.warn(said)
    options = RuleOptions(
        cluster=cluster,
        source=where,
        conventions=conventions,
        cluster_label=request.cluster_label,
        broker_label=request.broker_label,
        interval_s=request.interval_s,
        alerts=request.alerts,
        enforcement=enforcement,
    )
    rule_file = build_rules(QuotaIndex(entries), options)
    text = render_rules(rule_file)
    _write(request.out, text, "the rule file")
    return MonitorRulesRun(rule_file, text, cluster, source, detected, enforcement)


def _write(out: Path, text: str, what: str) -> None:
    """Write ``text`` to ``out`` (``-``: nothing, the caller prints it).

    Raises:
        MonitorError: the file cannot be written (no such folder, no permission).
    """
    if str(out) == "-":
        return
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise MonitorError(f"cannot write {what} to {out}: {exc.strerror or exc}") from None


@dataclass(frozen=True, slots=True)
class MonitorDashboardRequest:
    """One ``quotaform monitor dashboard`` run.

    Attributes:
        out: the dashboard JSON file to write; ``-``: none (the caller prints).
        options: title, uid, the cluster and broker labels, refresh.
    """

    out: Path
    options: DashboardOptions = field(default_factory=DashboardOptions)


@dataclass(frozen=True, slots=True)
class MonitorDashboardRun:
    """The dashboard model, its JSON text, and how many panels and queries it has."""

    dashboard: Mapping[str, Any]
    text: str
    panels: int
    queries: int


def run_monitor_dashboard(request: MonitorDashboardRequest) -> MonitorDashboardRun:
    """Build the Grafana dashboard and write it to ``request.out`` (unless ``-``).

    Raises:
        MonitorError: the file cannot be written.
    """
    dashboard = build_dashboard(request.options)
    text = render_dashboard(dashboard)
    _write(request.out, text, "the dashboard")
    panels = sum(1 for p in dashboard["panels"] if p["type"] != "row")
    return MonitorDashboardRun(dashboard, text, panels, len(list(dashboard_queries(dashboard))))
