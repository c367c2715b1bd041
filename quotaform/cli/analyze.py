"""``quotaform analyze utilisation | impact | recommend | collect``, and
``quotaform snapshot``: the fleet analytics.

Each analysis reads a quota configuration (manifests, ``--snapshot`` files,
a saved ``--plan``, or the live cluster), usage samples (``--usage``: generic
Parquet / CSV / JSON Lines, Prometheus ``query_range`` JSON, or JmxTool CSV),
and writes to ``--out DIR`` the contract table (Parquet), ``summary.json``,
``report.md`` and ``report.html``. Exit codes: 0 written, 1 error.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from quotaform.analytics.configs import QuotaConfig, read_snapshot, snapshot_lines
from quotaform.analytics.jobs import AnalyzeRequest, Command, Engine, run_analysis
from quotaform.analytics.report import write_reports
from quotaform.analytics.usage import LabelMap, UsageFormat
from quotaform.cli.options import (
    BootstrapServer,
    ClusterOption,
    CommandConfig,
    ConfigOption,
    Timeout,
    target,
)
from quotaform.cli.output import make_console, say
from quotaform.cluster.connect import connect
from quotaform.cluster.read import describe_matching
from quotaform.errors import AnalyticsError
from quotaform.formats.planfile import load_saved_plan
from quotaform.kafka.entity import Entity
from quotaform.manifest import load_manifests
from quotaform.plan.state import DesiredState

__all__ = ["analyze_app", "register"]

analyze_app = typer.Typer(
    name="analyze",
    help="Fleet analytics: quotas joined with observed usage (Spark or Python).",
    no_args_is_help=True,
    rich_markup_mode=None,
)

Manifests = Annotated[
    list[Path] | None,
    typer.Argument(
        help="Manifest files or directories: the quota configuration (without them: "
        "--snapshot, or the live cluster).",
        metavar="PATH",
        show_default=False,
    ),
]
Usage = Annotated[
    list[Path],
    typer.Option(
        "--usage",
        metavar="PATH",
        help="Usage samples: files or directories (repeatable). Parquet / CSV / JSON Lines "
        "(schemas/usage.schema.json), Prometheus query_range JSON, or JmxTool CSV.",
        show_default=False,
    ),
]
Out = Annotated[Path, typer.Option("--out", metavar="DIR", help="Where the tables and reports go.")]
Snapshot = Annotated[
    list[Path] | None,
    typer.Option(
        "--snapshot",
        metavar="FILE",
        help="Quota snapshot(s) from `quotaform snapshot` (JSON Lines), one or more clusters.",
        show_default=False,
    ),
]
EngineOption = Annotated[
    Engine,
    typer.Option(
        "--engine",
        help="spark (PySpark, local[*] or --master), python (no JVM), or auto (by input size).",
    ),
]
Master = Annotated[
    str | None,
    typer.Option(
        "--master",
        metavar="URL",
        help="Spark master, e.g. spark://host:7077 (default local[*]).",
        show_default=False,
    ),
]
FormatOption = Annotated[
    UsageFormat, typer.Option("--usage-format", help="How the usage files are laid out.")
]
ClusterLabel = Annotated[
    str, typer.Option("--cluster-label", help="Prometheus label naming the cluster.")
]
BrokerLabel = Annotated[
    str, typer.Option("--broker-label", help="Prometheus label naming the broker.")
]
DefaultCluster = Annotated[
    str | None,
    typer.Option(
        "--default-cluster",
        metavar="NAME",
        help="Cluster of usage series without the cluster label; also the cluster of "
        "JmxTool files.",
        show_default=False,
    ),
]
JmxBroker = Annotated[
    str | None,
    typer.Option("--broker", metavar="ID", help="The broker of JmxTool files.", show_default=False),
]
Since = Annotated[
    datetime | None,
    typer.Option("--since", help="Only usage at or after this time (UTC).", show_default=False),
]
Until = Annotated[
    datetime | None,
    typer.Option("--until", help="Only usage before this time (UTC).", show_default=False),
]


def _utc(when: datetime | None) -> datetime | None:
    return None if when is None else (when if when.tzinfo else when.replace(tzinfo=UTC))


def _manifest_config(desired: DesiredState, manifests: list[Path]) -> QuotaConfig:
    return QuotaConfig(
        desired.cluster, desired.quotas, f"manifests {', '.join(map(str, manifests))}"
    )


def _configs(
    manifests: list[Path] | None,
    snapshots: list[Path] | None,
    cluster: str | None,
    config: Path | None,
    bootstrap_server: str | None,
    command_config: Path | None,
    timeout: float | None,
) -> list[QuotaConfig]:
    """The quota configuration: manifests, else snapshots, else the live cluster."""
    if manifests:
        return [_manifest_config(load_manifests(manifests, cluster=cluster), manifests)]
    if snapshots:
        return [c for path in snapshots for c in read_snapshot(path)]
    where = target(cluster, config, bootstrap_server, command_config, timeout=timeout)
    with connect(where.settings, read_only=True, cluster_id=where.cluster_id) as client:
        live = describe_matching(client, None, cluster_id=client.cluster_id())
    name = where.cluster or "default"
    return [QuotaConfig(name, live.entities, f"live cluster {live.cluster_id}")]


def _run(request: AnalyzeRequest) -> None:
    err = make_console(stderr=True)
    result = run_analysis(request, progress=lambda m: say(err, m, style="dim"))
    paths = write_reports(request, result)
    if result.rejected.count:
        say(
            err,
            f"{result.rejected.count:,} usage row(s) could not be used (see {paths['summary']}); "
            f"first: {result.rejected.examples[0] if result.rejected.examples else ''}",
            style="yellow",
            prefix="Warning: ",
        )
    out = make_console()
    say(out, f"{request.command.value}: {result.rows:,} rows -> {result.table}")
    say(out, f"reports: {paths['markdown']}, {paths['html']}, {paths['summary']}")


def _request(
    command: Command,
    *,
    usage: list[Path],
    out: Path,
    engine: Engine,
    master: str | None,
    usage_format: UsageFormat,
    cluster_label: str,
    broker_label: str,
    default_cluster: str | None,
    broker: str | None,
    since: datetime | None,
    until: datetime | None,
    **kw: object,
) -> AnalyzeRequest:
    """The request of one analysis: the usage options every command shares,
    plus the command's own (``configs``, ``after``, ``window_s``, ...)."""
    return AnalyzeRequest(
        command=command,
        usage=usage,
        out=out,
        engine=engine,
        master=master,
        usage_format=usage_format,
        labels=LabelMap(cluster_label, broker_label, default_cluster),
        cluster=default_cluster,
        broker=broker,
        since=_utc(since),
        until=_utc(until),
        **kw,  # type: ignore[arg-type]
    )


@analyze_app.command("utilisation")
def utilisation(
    manifests: Manifests = None,
    usage: Usage = ...,  # type: ignore[assignment]
    out: Out = ...,  # type: ignore[assignment]
    snapshot: Snapshot = None,
    engine: EngineOption = Engine.auto,
    master: Master = None,
    usage_format: FormatOption = UsageFormat.auto,
    cluster_label: ClusterLabel = "cluster",
    broker_label: BrokerLabel = "instance",
    default_cluster: DefaultCluster = None,
    broker: JmxBroker = None,
    since: Since = None,
    until: Until = None,
    bootstrap_server: BootstrapServer = None,
    command_config: CommandConfig = None,
    cluster: ClusterOption = None,
    config: ConfigOption = None,
    timeout: Timeout = None,
) -> None:
    """Which quota governs each observed group, and how close it runs.

    DIR/utilisation.parquet: one row per (cluster, broker, user, client_id,
    ip, quota_key) with quota_value, level, entity, samples, p50, p95, p99,
    max, utilisation_p99, throttled_share, censored.
    """
    _run(
        _request(
            Command.utilisation,
            configs=_configs(
                manifests, snapshot, cluster, config, bootstrap_server, command_config, timeout
            ),
            usage=usage,
            out=out,
            engine=engine,
            master=master,
            usage_format=usage_format,
            cluster_label=cluster_label,
            broker_label=broker_label,
            default_cluster=default_cluster,
            broker=broker,
            since=since,
            until=until,
        )
    )


@analyze_app.command("impact")
def impact(
    manifests: Manifests = None,
    usage: Usage = ...,  # type: ignore[assignment]
    out: Out = ...,  # type: ignore[assignment]
    plan_file: Annotated[
        Path | None,
        typer.Option(
            "--plan",
            metavar="PLANFILE",
            help="A saved plan (quotaform plan --out): its before and after configurations.",
            show_default=False,
        ),
    ] = None,
    snapshot: Snapshot = None,
    window: Annotated[
        float,
        typer.Option(
            "--window",
            metavar="SECONDS",
            help="The brokers' quota window W (quota.window.num x quota.window.size.seconds).",
        ),
    ] = 11.0,
    engine: EngineOption = Engine.auto,
    master: Master = None,
    usage_format: FormatOption = UsageFormat.auto,
    cluster_label: ClusterLabel = "cluster",
    broker_label: BrokerLabel = "instance",
    default_cluster: DefaultCluster = None,
    broker: JmxBroker = None,
    since: Since = None,
    until: Until = None,
    bootstrap_server: BootstrapServer = None,
    command_config: CommandConfig = None,
    cluster: ClusterOption = None,
    config: ConfigOption = None,
    timeout: Timeout = None,
) -> None:
    """What a change does to the observed groups: --plan FILE, or manifests
    (the change) against --snapshot / the live cluster (now).

    DIR/impact.parquet: one row per changed (group, key) with quota_before,
    quota_after, level_before, level_after, p99, predicted_throttle_ms;
    groups newly throttled first.
    """
    if plan_file is not None:
        if manifests:
            raise AnalyticsError("give --plan FILE or manifests, not both")
        saved = load_saved_plan(plan_file)
        before = [
            QuotaConfig(
                saved.plan.cluster, saved.plan.before_entries(), f"plan {plan_file} (before)"
            )
        ]
        after = [
            QuotaConfig(saved.plan.cluster, saved.plan.after_entries(), f"plan {plan_file} (after)")
        ]
    elif manifests:
        desired = load_manifests(manifests, cluster=cluster)
        now = _configs(None, snapshot, cluster, config, bootstrap_server, command_config, timeout)
        matching = [c for c in now if c.cluster == desired.cluster] or now[:1]
        current = matching[0]
        kept = {e: q for e, q in current.entries.items() if not desired.scope.contains(e)}
        before = [QuotaConfig(desired.cluster, current.entries, current.source)]
        after = [
            QuotaConfig(
                desired.cluster, {**kept, **desired.quotas}, f"manifests for {desired.cluster}"
            )
        ]
    else:
        raise AnalyticsError("give the change: --plan PLANFILE, or manifests with --snapshot")
    _run(
        _request(
            Command.impact,
            configs=before,
            after=after,
            usage=usage,
            out=out,
            engine=engine,
            master=master,
            usage_format=usage_format,
            cluster_label=cluster_label,
            broker_label=broker_label,
            default_cluster=default_cluster,
            broker=broker,
            since=since,
            until=until,
            window_s=window,
        )
    )


@analyze_app.command("recommend")
def recommend(
    manifests: Manifests = None,
    usage: Usage = ...,  # type: ignore[assignment]
    out: Out = ...,  # type: ignore[assignment]
    snapshot: Snapshot = None,
    quantile: Annotated[
        str, typer.Option("--quantile", help="The usage quantile to size by: p50, p95, p99 or max.")
    ] = "p99",
    headroom: Annotated[
        float, typer.Option("--headroom", min=1.0, help="Factor over the quantile.")
    ] = 1.2,
    write_into: Annotated[
        Path | None,
        typer.Option(
            "--write-into",
            metavar="FILE",
            help="Write the recommendations as manifest edits into this file of the set "
            "(new entries appended; declared ones updated in their own files; comments kept).",
            show_default=False,
        ),
    ] = None,
    engine: EngineOption = Engine.auto,
    master: Master = None,
    usage_format: FormatOption = UsageFormat.auto,
    cluster_label: ClusterLabel = "cluster",
    broker_label: BrokerLabel = "instance",
    default_cluster: DefaultCluster = None,
    broker: JmxBroker = None,
    since: Since = None,
    until: Until = None,
    bootstrap_server: BootstrapServer = None,
    command_config: CommandConfig = None,
    cluster: ClusterOption = None,
    config: ConfigOption = None,
    timeout: Timeout = None,
) -> None:
    """Quotas sized from observed usage: the quantile x headroom, rounded up
    to readable units; never below the current quota for a throttled
    (censored) group, and said so."""
    if quantile not in ("p50", "p95", "p99", "max"):
        raise AnalyticsError(f"--quantile {quantile!r}: one of p50, p95, p99, max")
    if write_into is not None and not manifests:
        raise AnalyticsError("--write-into edits the manifests: give them")
    desired = load_manifests(manifests, cluster=cluster) if manifests else None
    request = _request(
        Command.recommend,
        configs=[_manifest_config(desired, manifests)]
        if desired is not None and manifests
        else _configs(None, snapshot, cluster, config, bootstrap_server, command_config, timeout),
        usage=usage,
        out=out,
        engine=engine,
        master=master,
        usage_format=usage_format,
        cluster_label=cluster_label,
        broker_label=broker_label,
        default_cluster=default_cluster,
        broker=broker,
        since=since,
        until=until,
        quantile=quantile,
        headroom=headroom,
    )
    _run(request)
    if write_into is not None and desired is not None and manifests:
        _write_recommendations(manifests, desired, write_into, out, cluster)


def _write_recommendations(
    manifests: list[Path], desired: DesiredState, into: Path, out: Path, cluster: str | None
) -> None:
    import pyarrow.parquet as pq

    from quotaform.export.workflow import edit_manifest_set
    from quotaform.manifest.files import is_member

    if not is_member(into, manifests):
        raise AnalyticsError(f"{into} is not one of the manifest files given")
    # A file (Python engine) or Spark's directory of parts: pyarrow reads both.
    rows = pq.read_table(out / "recommend.parquet").to_pylist()
    wanted: dict[Entity, dict[str, float]] = {}
    for row in rows:
        if row["cluster"] != desired.cluster:
            continue
        entity = Entity.from_mapping(json.loads(row["entity"]))
        wanted.setdefault(entity, {})[row["quota_key"]] = row["recommended"]
    add = {e: q for e, q in wanted.items() if e not in desired.entities}
    update = {
        e: {**desired.entities[e].quotas, **q} for e, q in wanted.items() if e in desired.entities
    }
    added, updated, _ = edit_manifest_set(
        manifests,
        desired,
        into=into,
        add=add,
        update=update,
        comment=f"recommended by quotaform analyze {datetime.now(UTC).date().isoformat()}",
        cluster=cluster,
    )
    say(
        make_console(),
        f"Wrote the recommendations: {len(added)} entit{'y' if len(added) == 1 else 'ies'} "
        f"added to {into}, {len(updated)} updated. Review them with quotaform plan.",
    )


@analyze_app.command("collect")
def collect(
    jmx_port: Annotated[int, typer.Option("--jmx-port", help="The broker's loopback JMX port.")],
    out: Annotated[
        Path, typer.Option("--out", metavar="FILE", help="Usage JSON Lines to append to.")
    ],
    cluster_name: Annotated[
        str, typer.Option("--cluster-name", help="The cluster these samples belong to.")
    ],
    broker: Annotated[str, typer.Option("--broker", help="The broker's id in the samples.")] = "0",
    seconds: Annotated[
        float, typer.Option("--seconds", min=0.0, help="How long to collect.")
    ] = 60.0,
    interval: Annotated[
        float, typer.Option("--interval", min=0.2, help="Seconds between reads.")
    ] = 5.0,
) -> None:
    """Read a (sandbox) broker's quota MBeans with Kafka's JmxTool into the
    usage table (JSON Lines), every --interval seconds for --seconds."""
    from quotaform.analytics.collect import collect_jmx

    with out.open("a", encoding="utf-8") as fh:
        count = collect_jmx(
            jmx_port, fh, cluster=cluster_name, broker=broker, seconds=seconds, interval_s=interval
        )
    say(make_console(stderr=True), f"collected {count:,} samples into {out}")


def snapshot(
    out: Annotated[Path, typer.Option("--out", metavar="FILE", help="The snapshot (JSON Lines).")],
    cluster_name: Annotated[
        str | None,
        typer.Option(
            "--cluster-name",
            help="The cluster's name in the snapshot (default: the --cluster name).",
            show_default=False,
        ),
    ] = None,
    bootstrap_server: BootstrapServer = None,
    command_config: CommandConfig = None,
    cluster: ClusterOption = None,
    config: ConfigOption = None,
    timeout: Timeout = None,
) -> None:
    """Write the live quotas of every entity as JSON Lines
    (schemas/snapshot.schema.json), for `quotaform analyze --snapshot`."""
    name = cluster_name or cluster
    if name is None:
        raise AnalyticsError("name the cluster: --cluster-name NAME (or --cluster NAME)")
    where = target(cluster, config, bootstrap_server, command_config, implied=name, timeout=timeout)
    with connect(where.settings, read_only=True, cluster_id=where.cluster_id) as client:
        cluster_id = client.cluster_id()
        live = describe_matching(client, None, cluster_id=cluster_id)
    lines = snapshot_lines(name, cluster_id, live.entities)
    text = "".join(line + "\n" for line in lines)
    if str(out) == "-":
        sys.stdout.write(text)
    else:
        out.write_text(text, encoding="utf-8")
    say(make_console(stderr=True), f"snapshot of {len(lines):,} entities of {name!r} -> {out}")


def register(app: typer.Typer) -> None:
    """Add ``analyze`` and ``snapshot`` to ``app``."""
    app.add_typer(analyze_app, name="analyze")
    app.command("snapshot")(snapshot)
