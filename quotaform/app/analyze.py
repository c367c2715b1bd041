"""``quotaform analyze utilisation|impact|recommend|collect`` and
``quotaform snapshot``: quotas joined with observed usage.

:func:`run_analyze` takes one :class:`AnalyzeCommandRequest`: it builds the
quota configurations (manifests, ``quotaform snapshot`` files, the live
cluster, or a saved plan's before and after), runs the pipeline
(:func:`quotaform.analytics.jobs.run_analysis`, Python or Spark), writes the
reports, and for ``recommend --write-into`` edits the manifests. It returns
one :class:`AnalyzeRun`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from quotaform.analytics.configs import QuotaConfig, read_snapshot, snapshot_lines
from quotaform.analytics.jobs import AnalyzeResult, run_analysis, table_rows
from quotaform.analytics.paths import DataPath
from quotaform.analytics.request import QUANTILES, AnalyzeRequest, Command
from quotaform.analytics.sources.base import ReadOptions
from quotaform.analytics.sources.collector import Collected
from quotaform.analytics.sources.registry import usage_clusters
from quotaform.app.common import ConnectionOptions, View, target
from quotaform.app.facts import FactsWanted, gather_facts
from quotaform.cluster.connect import connect
from quotaform.errors import AnalyticsError
from quotaform.kafka.entity import Entity
from quotaform.kafka.units import same_value
from quotaform.manifest import load_manifests
from quotaform.plan.state import DesiredState

__all__ = [
    "QUANTILES",
    "AnalyzeCommandRequest",
    "AnalyzeRun",
    "CollectRequest",
    "QuotaSnapshotRequest",
    "QuotaSnapshotRun",
    "run_analyze",
    "run_collect",
    "run_quota_snapshot",
]


@dataclass(frozen=True, slots=True)
class AnalyzeCommandRequest:
    """One ``quotaform analyze utilisation|impact|recommend`` run: the
    pipeline's request as the CLI parsed it, and where the quota
    configuration comes from.

    Attributes:
        analysis: the run (command, usage, engine, outputs, options), handed
            to the pipeline as it is (:class:`~quotaform.analytics.request.AnalyzeRequest`).
        manifests: the quota configuration (impact: the change).
        snapshots: ``quotaform snapshot`` files (the configuration when no
            manifests are given; impact: the configuration now).
        plan_file: impact: a saved plan's before and after.
        write_into: recommend: edit the manifests, appending new entries to
            this file of the set.
        connection: where to read the live configuration when neither
            manifests (utilisation, recommend) nor snapshots are given.
        view: ``info`` receives the pipeline's progress messages.
    """

    analysis: AnalyzeRequest
    manifests: tuple[Path, ...] = ()
    snapshots: tuple[Path, ...] = ()
    plan_file: Path | None = None
    write_into: Path | None = None
    connection: ConnectionOptions = field(default_factory=ConnectionOptions)
    view: View = field(default_factory=View)

    @property
    def command(self) -> Command:
        """What to compute."""
        return self.analysis.command


@dataclass(frozen=True, slots=True)
class AnalyzeRun:
    """What one analysis produced.

    Attributes:
        request: the pipeline's request as it ran (a live read's answers
            among its usage).
        result: the pipeline's result (table, rows, rejections).
        reports: the written reports by kind (``summary``, ``markdown``, ``html``).
        added, updated: ``recommend --write-into``: entities added to the
            file and updated in place (``None``: nothing was written).
    """

    request: AnalyzeRequest
    result: AnalyzeResult
    reports: dict[str, DataPath]
    added: tuple[Entity, ...] | None = None
    updated: tuple[tuple[Entity, str], ...] | None = None


def run_analyze(request: AnalyzeCommandRequest) -> AnalyzeRun:
    """Check the options, read the quota configurations, run the pipeline
    (:func:`quotaform.analytics.jobs.run_analysis`) on the request as the
    CLI built it, write the reports (and the manifest edits of ``recommend
    --write-into``).

    Raises:
        AnalyticsError: contradictory or missing options, bad inputs (named),
            no usage for any configured cluster, Spark cannot start.
        ManifestError, PlanFileError, ExportError: as the inputs or the edit
            raise them.
    """
    _check_options(request)
    desired: DesiredState | None = None
    after: list[QuotaConfig] = []
    if request.command is Command.impact:
        configs, after = _before_after(request)
    elif request.manifests:
        desired = load_manifests(request.manifests, cluster=request.connection.cluster)
        configs = [_manifest_config(desired, request.manifests)]
    else:
        configs = _configs_now(request)
    analysis = _assuming_one_cluster(request.analysis, configs)
    from quotaform.analytics.report import enforcement_warnings, write_reports  # matplotlib

    for warning in enforcement_warnings([*configs, *after]):
        request.view.warn(warning)
    result = run_analysis(analysis, configs, after=after, progress=request.view.info)
    assert result.request is not None
    reports = write_reports(result.request, result)
    if request.write_into is None or desired is None:
        return AnalyzeRun(result.request, result, reports)
    added, updated = _write_recommendations(request, desired, request.write_into, result)
    return AnalyzeRun(result.request, result, reports, added, updated)


def _assuming_one_cluster(
    analysis: AnalyzeRequest, configs: Sequence[QuotaConfig]
) -> AnalyzeRequest:
    """The request with the one configured cluster assumed for Prometheus
    series without the cluster label, unless ``--default-cluster`` names one
    (said in a note when it is used)."""
    labels = analysis.read.labels
    if labels.default_cluster is not None:
        return analysis
    assumed = replace(labels, assumed_cluster=_one_cluster(configs))
    return replace(analysis, read=replace(analysis.read, labels=assumed))


def _one_cluster(configs: Sequence[QuotaConfig]) -> str | None:
    """The configured cluster when there is exactly one (taken for usage
    series without the cluster label, and said so)."""
    names = {c.cluster for c in configs}
    return next(iter(names)) if len(names) == 1 else None


def _check_options(request: AnalyzeCommandRequest) -> None:
    """Refuse, before any input is read, what would fail after the analysis."""
    out = request.analysis.out
    if isinstance(out, Path) and out.exists() and not out.is_dir():
        raise AnalyticsError(f"--out {out} is a file: give a directory (created if missing)")
    if request.command is not Command.recommend:
        return
    quantile = request.analysis.quantile
    if quantile not in QUANTILES:
        raise AnalyticsError(f"--quantile {quantile!r}: one of {', '.join(QUANTILES)}")
    into = request.write_into
    if into is None:
        return
    if not request.manifests:
        raise AnalyticsError(
            "--write-into edits the manifests: give them (quotaform analyze recommend "
            "MANIFESTS... --write-into FILE)"
        )
    from quotaform.manifest.files import is_member

    if into.is_dir():
        raise AnalyticsError(f"--write-into {into} is a directory: give a manifest file")
    if not is_member(into, request.manifests):
        raise AnalyticsError(
            f"--write-into {into} is not read with the manifests given "
            f"({', '.join(map(str, request.manifests))}): name one of their files, or a new "
            "*.yaml file in one of their directories"
        )
    if not into.parent.is_dir():
        raise AnalyticsError(f"--write-into {into}: no directory {into.parent}")


def _manifest_config(desired: DesiredState, manifests: Sequence[Path]) -> QuotaConfig:
    return QuotaConfig(
        desired.cluster, desired.quotas, f"manifests {', '.join(map(str, manifests))}"
    )


def _configs_now(request: AnalyzeCommandRequest) -> list[QuotaConfig]:
    """The configuration now: snapshots, else the live cluster (read-only)."""
    if request.snapshots:
        return [c for path in request.snapshots for c in read_snapshot(path)]
    where = target(request.connection, request.view)
    name = where.cluster or _live_cluster_name(request)
    with connect(where.settings, read_only=True, cluster_id=where.cluster_id) as client:
        facts = gather_facts(client, None)
    live = facts.live
    return [QuotaConfig(name, live.entities, f"live cluster {live.cluster_id}", facts.enforcement)]


def _live_cluster_name(request: AnalyzeCommandRequest) -> str:
    """The name the usage knows a live cluster read without a profile
    (``--bootstrap-server``) by: ``--default-cluster``, else the one cluster
    the usage names; several names are refused."""
    analysis = request.analysis
    read = analysis.read
    if read.labels.default_cluster:
        return read.labels.default_cluster
    local = [p for p in analysis.usage if isinstance(p, Path)]
    if len(local) < len(analysis.usage):
        raise AnalyticsError(
            "which cluster of the usage is the live cluster? usage at a URI is read only "
            "by Spark, after the configuration: give --default-cluster NAME (or --cluster PROFILE)"
        )
    names = usage_clusters(
        local,
        fmt=analysis.usage_format,
        options=ReadOptions(
            labels=replace(read.labels, default_cluster=None, assumed_cluster=None),
            broker=read.broker,
            limits=read.limits,
        ),
    )
    if len(names) == 1:
        (name,) = names
        request.view.info(f"the live cluster is {name!r} in the usage (the one cluster it names)")
        return name
    named = f"the usage names {', '.join(sorted(names))}" if names else "the usage names none"
    raise AnalyticsError(
        f"which cluster of the usage is the live cluster? {named}: give --default-cluster NAME "
        "(or --cluster PROFILE)"
    )


def _before_after(request: AnalyzeCommandRequest) -> tuple[list[QuotaConfig], list[QuotaConfig]]:
    """impact's configurations: a saved plan's before and after, or the
    configuration now and the manifests over it (their scope replaced)."""
    plan_file = request.plan_file
    if plan_file is not None:
        if request.manifests:
            raise AnalyticsError("give --plan FILE or manifests, not both")
        from quotaform.formats.planfile import load_saved_plan  # only for --plan

        plan = load_saved_plan(plan_file).plan

        def side(entries: Mapping[Entity, Mapping[str, float]], which: str) -> list[QuotaConfig]:
            source = f"plan {plan_file} ({which})"
            return [QuotaConfig(plan.cluster, entries, source, plan.enforcement)]

        return side(plan.before_entries(), "before"), side(plan.after_entries(), "after")
    if not request.manifests:
        raise AnalyticsError("give the change: --plan PLANFILE, or manifests with --snapshot")
    desired = load_manifests(request.manifests, cluster=request.connection.cluster)
    now = _configs_now(request)
    current = ([c for c in now if c.cluster == desired.cluster] or now[:1])[0]
    kept = {e: q for e, q in current.entries.items() if not desired.scope.contains(e)}
    return (
        [QuotaConfig(desired.cluster, current.entries, current.source, current.enforcement)],
        [
            QuotaConfig(
                desired.cluster,
                {**kept, **desired.quotas},
                f"manifests for {desired.cluster}",
                current.enforcement,
            )
        ],
    )


def _write_recommendations(
    request: AnalyzeCommandRequest,
    desired: DesiredState,
    into: Path,
    result: AnalyzeResult,
) -> tuple[tuple[Entity, ...], tuple[tuple[Entity, str], ...]]:
    """Edit the manifests with ``recommend.parquet``'s values for the
    manifests' cluster: new entities appended to ``into``, declared ones
    updated in their own files (comments kept). A recommendation equal to
    the quota the group already gets adds no entity: it would change only
    the level the quota comes from, which ``analyze impact`` would then
    list as a change."""
    from quotaform.export.manifest_set import edit_manifest_set

    manifests = request.manifests
    assert result.request is not None
    rows = table_rows(result.request, result)
    wanted: dict[Entity, dict[str, float]] = {}
    for row in rows:
        if row["cluster"] != desired.cluster:
            continue
        entity = Entity.from_mapping(json.loads(row["entity"]))
        now = row["quota_value"]
        if (
            entity not in desired.entities
            and now is not None
            and same_value(row["recommended"], now)
        ):
            continue
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
        cluster=request.connection.cluster,
    )
    return added, updated


@dataclass(frozen=True, slots=True)
class QuotaSnapshotRequest:
    """``quotaform snapshot``: the live quotas of every entity as JSON Lines.

    Attributes:
        out: the file to write, or ``-`` for none (the caller prints the text).
        cluster_name: the cluster's name in the snapshot (default: the
            ``--cluster`` name).
        connection: where to connect (read-only).
        view: warnings.
    """

    out: Path
    cluster_name: str | None = None
    connection: ConnectionOptions = field(default_factory=ConnectionOptions)
    view: View = field(default_factory=View)


@dataclass(frozen=True, slots=True)
class QuotaSnapshotRun:
    """The snapshot: the cluster's name, its lines, and their text."""

    cluster: str
    lines: tuple[str, ...]

    @property
    def text(self) -> str:
        """JSON Lines, one entity per line."""
        return "".join(line + "\n" for line in self.lines)


def run_quota_snapshot(request: QuotaSnapshotRequest) -> QuotaSnapshotRun:
    """Describe every live entity (read-only) and write the snapshot to
    ``out`` (unless ``-``).

    Raises:
        AnalyticsError: no cluster name.
        ClusterConfigError, ConnectionSettingsError, BrokerError: as the
            connection and describe raise them.
    """
    name = request.cluster_name or request.connection.cluster
    if name is None:
        raise AnalyticsError("name the cluster: --cluster-name NAME (or --cluster NAME)")
    where = target(request.connection, request.view, implied=name)
    with connect(where.settings, read_only=True, cluster_id=where.cluster_id) as client:
        facts = gather_facts(client, None, FactsWanted(enforcement=False))
    live, cluster_id = facts.live, facts.cluster_id
    run = QuotaSnapshotRun(name, tuple(snapshot_lines(name, cluster_id, live.entities)))
    if str(request.out) != "-":
        request.out.write_text(run.text, encoding="utf-8")
    return run


@dataclass(frozen=True, slots=True)
class CollectRequest:
    """``quotaform analyze collect``: a broker's quota MBeans read over its
    loopback JMX port into the usage table.

    Attributes:
        jmx_port: the broker's loopback JMX port.
        out: the usage JSON Lines file appended to.
        cluster: the cluster the samples belong to.
        broker: the broker's id in the samples; ``None``: its node id, read
            from the broker itself.
        seconds: how long to collect; interval_s: seconds between reads.
    """

    jmx_port: int
    out: Path
    cluster: str
    broker: str | None = None
    seconds: float = 60.0
    interval_s: float = 5.0


def run_collect(request: CollectRequest) -> Collected:
    """Collect, appending to ``out``; returns what was written.

    Raises:
        AnalyticsError, SandboxError: JmxTool cannot run or read the port;
            the broker's id cannot be read.
    """
    from quotaform.app.collect import collect_jmx

    with request.out.open("a", encoding="utf-8") as fh:
        return collect_jmx(
            request.jmx_port,
            fh,
            cluster=request.cluster,
            broker=request.broker,
            seconds=request.seconds,
            interval_s=request.interval_s,
        )
