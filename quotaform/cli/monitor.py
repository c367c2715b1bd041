"""``quotaform monitor rules | dashboard``: monitoring as code.

``monitor rules`` writes a Prometheus rule file giving every quota group's
usage series the quota it really gets (Kafka's resolution of the manifests,
a ``quotaform snapshot`` file or the live cluster, done in PromQL from the
metric labels), its utilisation, and alerts. ``monitor dashboard`` writes a
Grafana dashboard over those series. Exit codes: 0 written, 1 error.
"""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import Annotated

import typer

from quotaform.analytics.exporters import CONVENTIONS
from quotaform.app.common import ConnectionOptions
from quotaform.app.monitor import (
    MonitorDashboardRequest,
    MonitorRulesRequest,
    MonitorRulesRun,
    run_monitor_dashboard,
    run_monitor_rules,
)
from quotaform.cli.options import CONNECTION, expands, with_connection
from quotaform.cli.output import make_console, say
from quotaform.cli.view import make_view
from quotaform.manifest.models import parse_duration
from quotaform.monitor.dashboard import DASHBOARD_TITLE, DASHBOARD_UID, DashboardOptions
from quotaform.monitor.rules import AlertOptions, prometheus_duration

__all__ = ["ConventionName", "monitor_app", "register"]

#: The exporter naming conventions ``--convention`` accepts.
ConventionName = enum.StrEnum("ConventionName", {c: c for c in CONVENTIONS})  # type: ignore[misc]

monitor_app = typer.Typer(
    name="monitor",
    help="Monitoring as code: Prometheus rules and a Grafana dashboard of every client's usage "
    "against the quota it really gets.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _seconds(text: str, option: str) -> float:
    """Seconds of a duration option (``10m``, ``30s``), a whole number of ms."""
    try:
        seconds = parse_duration(text)
        prometheus_duration(seconds)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from None
    return seconds


def _ratio(text: str) -> float:
    """``--near-limit``: ``0.9`` or ``90%``."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise typer.BadParameter(
            f"{text!r}: give a ratio (0.9) or a percentage (90%)", param_hint="--near-limit"
        ) from None
    if not value > 0:
        raise typer.BadParameter(f"{text!r}: give a positive ratio", param_hint="--near-limit")
    return value


def _labels(values: list[str] | None) -> dict[str, str]:
    found: dict[str, str] = {}
    for text in values or ():
        name, sep, value = text.partition("=")
        if not sep or not name.strip():
            raise typer.BadParameter(f"{text!r}: give NAME=VALUE", param_hint="--alert-label")
        found[name.strip()] = value
    return found


def _alerts(
    near_limit: Annotated[
        str,
        typer.Option(
            "--near-limit",
            metavar="RATIO",
            help="Alert when a quota group's utilisation stays above this (0.9 or 90%).",
        ),
    ] = "0.9",
    near_limit_for: Annotated[
        str,
        typer.Option(
            "--near-limit-for",
            metavar="DURATION",
            help="... for this long (10m, 30s).",
        ),
    ] = "10m",
    throttled_for: Annotated[
        str,
        typer.Option(
            "--throttled-for",
            metavar="DURATION",
            help="Alert when the brokers throttle a quota group for this long (5m, 30s).",
        ),
    ] = "5m",
    alert_label: Annotated[
        list[str] | None,
        typer.Option(
            "--alert-label",
            metavar="NAME=VALUE",
            help="A label every alert gets (repeatable), e.g. severity=page or team=platform "
            "(default severity: warning).",
            show_default=False,
        ),
    ] = None,
    no_alerts: Annotated[
        bool, typer.Option("--no-alerts", help="Write the recording rules only.")
    ] = False,
) -> AlertOptions:
    return AlertOptions(
        enabled=not no_alerts,
        near_limit=_ratio(near_limit),
        near_limit_for_s=_seconds(near_limit_for, "--near-limit-for"),
        throttled_for_s=_seconds(throttled_for, "--throttled-for"),
        labels=_labels(alert_label),
    )


with_alerts = expands("alerts", _alerts)
ALERTS = AlertOptions()

ClusterLabel = Annotated[
    str | None,
    typer.Option(
        "--cluster-label",
        metavar="LABEL",
        help="The Prometheus label naming the cluster: every series the rules read or "
        "write is then restricted to this cluster's name, so several clusters' rule files "
        "can share one Prometheus (default: none, one cluster per Prometheus).",
        show_default=False,
    ),
]
BrokerLabel = Annotated[
    str,
    typer.Option("--broker-label", metavar="LABEL", help="The Prometheus label naming the broker."),
]


RuleManifests = Annotated[
    list[Path] | None,
    typer.Argument(
        help="Manifest files or directories: the quotas (without them: --snapshot, or the "
        "live cluster).",
        metavar="PATH",
        show_default=False,
    ),
]

RuleOut = Annotated[
    Path,
    typer.Option(
        "--out", metavar="FILE", help="The rule file to write (- for standard output)."
    ),
]

RuleSnapshot = Annotated[
    Path | None,
    typer.Option(
        "--snapshot",
        metavar="FILE",
        help="The quotas from a `quotaform snapshot` file (--cluster picks one cluster).",
        show_default=False,
    ),
]

RuleClusterName = Annotated[
    str | None,
    typer.Option(
        "--cluster-name",
        metavar="NAME",
        help="The cluster's name in the rules when read live (default: the --cluster name, "
        "else the cluster id).",
        show_default=False,
    ),
]

RuleConventions = Annotated[
    list[ConventionName] | None,
    typer.Option(
        "--convention",
        help="The exporter naming convention(s) to read (repeatable; default: those "
        "--sample shows, else all).",
        show_default=False,
    ),
]

RuleSample = Annotated[
    Path | None,
    typer.Option(
        "--sample",
        metavar="FILE",
        help="A saved Prometheus API answer (query, query_range or series) of the brokers' "
        "quota metrics: the conventions are read off its series.",
        show_default=False,
    ),
]

RuleInterval = Annotated[
    str | None,
    typer.Option(
        "--interval",
        metavar="DURATION",
        help="The rule groups' evaluation interval (default: Prometheus' evaluation_interval).",
        show_default=False,
    ),
]


@monitor_app.command(
    "rules",
    short_help="A Prometheus rule file: every quota group's real limit, utilisation, alerts.",
)
@with_connection
@with_alerts
def rules(
    manifests: RuleManifests = None,
    out: RuleOut = ...,  # type: ignore[assignment]
    snapshot: RuleSnapshot = None,
    cluster_name: RuleClusterName = None,
    convention: RuleConventions = None,
    sample: RuleSample = None,
    cluster_label: ClusterLabel = None,
    broker_label: BrokerLabel = "instance",
    interval: RuleInterval = None,
    alerts: AlertOptions = ALERTS,
    connection: ConnectionOptions = CONNECTION,
) -> None:
    """Write a Prometheus rule file: for every usage series of the brokers'
    quota metrics, quotaform:client_quota_limit (the effective quota of its
    quota group, with quota_key, level and entity as `quotaform explain`
    names them), quotaform:client_quota_utilisation:ratio, and alerts (near
    the limit, throttled, a custom quota callback). Check it with `promtool
    check rules`; load it with Prometheus' rule_files."""
    run = run_monitor_rules(
        MonitorRulesRequest(
            out,
            manifests=tuple(manifests or ()),
            snapshot=snapshot,
            cluster_name=cluster_name,
            conventions=tuple(c.value for c in convention or ()),
            sample=sample,
            cluster_label=cluster_label,
            broker_label=broker_label,
            interval_s=_seconds(interval, "--interval") if interval is not None else None,
            alerts=alerts,
            connection=connection,
            view=make_view(),
        )
    )
    if str(out) == "-":
        sys.stdout.write(run.text)
    _say_rules_written(run, sample, out)


def _say_rules_written(run: MonitorRulesRun, sample: Path | None, out: Path) -> None:
    """What ``monitor rules`` wrote, on standard error: the conventions read
    off ``--sample``, the rules per cluster and the keys with limits."""
    built = run.rule_file
    err = make_console(stderr=True)
    if run.detected is not None:
        kip = (
            f"; {run.detected.utilisation} KIP-1373 quota-utilization series (used)"
            if run.detected.utilisation
            else ""
        )
        say(err, f"conventions in {sample}: {', '.join(run.detected.conventions)}{kip}")
    limits = ", ".join(built.resolved) or "none (no entry sets a quota)"
    say(
        err,
        f"{built.rules} rules for cluster {run.cluster!r} ({built.entries} quota entries; "
        f"limits for {limits}) -> {out}",
    )


@monitor_app.command("dashboard", short_help="A Grafana dashboard over the rules' series.")
def dashboard(
    out: Annotated[
        Path,
        typer.Option(
            "--out", metavar="FILE", help="The dashboard JSON to write (- for standard output)."
        ),
    ],
    title: Annotated[
        str, typer.Option("--title", metavar="TEXT", help="The dashboard's title.")
    ] = DASHBOARD_TITLE,
    uid: Annotated[
        str, typer.Option("--uid", metavar="UID", help="The dashboard's uid.")
    ] = DASHBOARD_UID,
    cluster_label: Annotated[
        str,
        typer.Option(
            "--cluster-label",
            metavar="LABEL",
            help="The Prometheus label naming the cluster (the cluster variable).",
        ),
    ] = "cluster",
    broker_label: BrokerLabel = "instance",
    refresh: Annotated[
        str, typer.Option("--refresh", metavar="DURATION", help="Grafana's auto-refresh.")
    ] = "30s",
) -> None:
    """Write a Grafana dashboard (JSON model, schemaVersion 41) over the
    rules' series: usage against the effective limit per quota group, the
    top groups by utilisation, the throttled groups, per broker and summed
    across brokers, with cluster, user and client-id variables. Provision it
    as a file, or import it."""
    refresh = prometheus_duration(_seconds(refresh, "--refresh"))
    run = run_monitor_dashboard(
        MonitorDashboardRequest(
            out,
            DashboardOptions(
                title=title,
                uid=uid,
                cluster_label=cluster_label,
                broker_label=broker_label,
                refresh=refresh,
            ),
        )
    )
    if str(out) == "-":
        sys.stdout.write(run.text)
    say(
        make_console(stderr=True),
        f"dashboard {uid!r}: {run.panels} panels, {run.queries} queries -> {out}",
    )


def register(app: typer.Typer) -> None:
    """Add ``monitor`` to ``app``."""
    app.add_typer(monitor_app, name="monitor")
