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
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from quotaform.analytics.configs import QuotaConfig, read_snapshot, snapshot_lines
from quotaform.analytics.exporters import metric_of_name
from quotaform.analytics.jobs import (
    AnalyzeRequest,
    AnalyzeResult,
    Command,
    Engine,
    run_analysis,
    table_rows,
)
from quotaform.analytics.model import DEFAULT_ALIGN_S, DEFAULT_HEADROOM, DEFAULT_WINDOW_S
from quotaform.analytics.paths import DataPath
from quotaform.analytics.prometheus_api import (
    DEFAULT_RANGE,
    PrometheusQuery,
    default_step,
    fetch_usage,
    load_auth,
    selector,
)
from quotaform.analytics.usage import LabelMap, UsageFormat, usage_clusters
from quotaform.app.common import ConnectionOptions, View, target
from quotaform.cluster.brokers import read_quota_enforcement
from quotaform.cluster.connect import connect
from quotaform.cluster.read import describe_matching
from quotaform.errors import AnalyticsError
from quotaform.inputs.limits import LIMITS
from quotaform.kafka.entity import Entity
from quotaform.kafka.keys import METRICS
from quotaform.manifest import load_manifests
from quotaform.plan.state import DesiredState

__all__ = [
    "QUANTILES",
    "AnalyzeCommandRequest",
    "AnalyzeRun",
    "CollectRequest",
    "QuotaSnapshotRequest",
    "QuotaSnapshotRun",
    "UsageOptions",
    "run_analyze",
    "run_collect",
    "run_quota_snapshot",
]

#: The usage quantiles ``recommend`` sizes by.
QUANTILES = ("p50", "p95", "p99", "max")


@dataclass(frozen=True, slots=True)
class UsageOptions:
    """How the usage is read, and which engine runs (shared by every analysis).

    Attributes:
        paths: usage files or directories: local paths or Hadoop URIs
            (``s3a://``, ``hdfs://``, ``file:///``: read through Spark).
        engine, master: the engine and Spark's master URL (default local[*]).
        remote: a Spark Connect URL (``sc://HOST:PORT``; implies the Spark
            engine; not with ``master``).
        usage_format: how the files are laid out.
        cluster_label, broker_label: the Prometheus labels naming the cluster
            and the broker.
        default_cluster: the cluster of series without the cluster label
            (and of JmxTool files).
        broker: the broker of JmxTool files.
        since, until: the time range; a naive time is UTC.
        prometheus: a Prometheus-compatible server's URL to read the usage
            from (``query_range``; with ``since``/``until``, default the
            last hour, and ``step_s``, default
            :func:`~quotaform.analytics.prometheus_api.default_step`).
        prometheus_config: a Prometheus HTTP client configuration file
            (authorization, basic_auth, tls_config); without it the
            ``QUOTAFORM_PROMETHEUS_*`` environment variables.
        prometheus_ca_file: the CA of the server's TLS certificate.
        prometheus_match: PromQL label matchers narrowing the series queried
            (``job="kafka"``).
        metric: the usage metric of Prometheus series without ``__name__``
            (``--metric``: a usage metric or exporter metric name).
        prometheus_timeout_s: the deadline of each ``--prometheus`` request,
            its answer included, seconds (``None``: 120).
        max_usage_bytes: the largest usage file or Prometheus answer read,
            bytes (``None``: :data:`quotaform.inputs.limits.LIMITS`).
    """

    paths: tuple[DataPath, ...]
    engine: Engine = Engine.auto
    master: str | None = None
    remote: str | None = None
    usage_format: UsageFormat = UsageFormat.auto
    cluster_label: str = "cluster"
    broker_label: str = "instance"
    default_cluster: str | None = None
    broker: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    prometheus: str | None = None
    step_s: float | None = None
    prometheus_config: Path | None = None
    prometheus_ca_file: Path | None = None
    metric: str | None = None
    prometheus_match: tuple[str, ...] = ()
    prometheus_timeout_s: float | None = None
    max_usage_bytes: int | None = None


def _utc(when: datetime | None) -> datetime | None:
    return None if when is None else (when if when.tzinfo else when.replace(tzinfo=UTC))


@dataclass(frozen=True, slots=True)
class AnalyzeCommandRequest:
    """One ``quotaform analyze utilisation|impact|recommend`` run.

    Attributes:
        command: what to compute.
        usage: the usage and the engine.
        out: the output directory (tables and reports): a local directory
            or a Hadoop URI (written through Spark).
        manifests: the quota configuration (impact: the change).
        snapshots: ``quotaform snapshot`` files (the configuration when no
            manifests are given; impact: the configuration now).
        plan_file: impact: a saved plan's before and after.
        window_s: impact: the brokers' quota window W, seconds.
        align_s: the bucket (seconds) the brokers' samples are aligned on
            before a group's usage is summed across brokers.
        request_sizes: impact, recommend: S per quota key, one request's
            amount for the steady-state throttle (the keys' defaults otherwise).
        quantile, headroom: recommend: the quantile sized by (one of
            :data:`QUANTILES`) and the factor over it.
        write_into: recommend: edit the manifests, appending new entries to
            this file of the set.
        connection: where to read the live configuration when neither
            manifests (utilisation, recommend) nor snapshots are given.
        view: ``info`` receives the pipeline's progress messages.
    """

    command: Command
    usage: UsageOptions
    out: DataPath
    manifests: tuple[Path, ...] = ()
    snapshots: tuple[Path, ...] = ()
    plan_file: Path | None = None
    window_s: float = DEFAULT_WINDOW_S
    align_s: float = DEFAULT_ALIGN_S
    quantile: str = "p99"
    headroom: float = DEFAULT_HEADROOM
    request_sizes: Mapping[str, float] = field(default_factory=dict)
    write_into: Path | None = None
    connection: ConnectionOptions = field(default_factory=ConnectionOptions)
    view: View = field(default_factory=View)


@dataclass(frozen=True, slots=True)
class AnalyzeRun:
    """What one analysis produced.

    Attributes:
        request: the pipeline's request (the engine's inputs).
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
    """Check the options, build the configurations, run the pipeline, write
    the reports (and the manifest edits of ``recommend --write-into``).

    Raises:
        AnalyticsError: contradictory or missing options, bad inputs (named),
            no usage for any configured cluster, Spark cannot start.
        ManifestError, PlanFileError, ExportError: as the inputs or the edit
            raise them.
    """
    _check_options(request)
    with tempfile.TemporaryDirectory(prefix="quotaform-prometheus-") as scratch:
        return _run_analyze(_with_prometheus(request, Path(scratch)))


def _with_prometheus(request: AnalyzeCommandRequest, scratch: Path) -> AnalyzeCommandRequest:
    """``request`` with ``--prometheus``'s answers fetched and added to the
    usage paths (saved in ``--out``'s ``prometheus/`` when local, so the
    run can be repeated offline, else in ``scratch``), and the range the
    analysis keeps set to the range fetched."""
    usage = request.usage
    if usage.metric is not None and metric_of_name(usage.metric) is None:
        raise AnalyticsError(
            f"--metric {usage.metric!r}: not a usage metric ({', '.join(METRICS)}) nor an "
            "exporter name such as kafka_server_produce_byte_rate"
        )
    if usage.prometheus is None:
        if not usage.paths:
            raise AnalyticsError("give the usage: --usage PATH (repeatable) or --prometheus URL")
        if usage.step_s is not None:
            raise AnalyticsError("--step is the resolution of --prometheus queries: give both")
        return request
    if usage.usage_format not in (UsageFormat.auto, UsageFormat.prometheus):
        raise AnalyticsError(
            f"--usage-format {usage.usage_format.value}: --prometheus answers are query_range "
            "JSON; read other files in a run of their own"
        )
    until = _utc(usage.until) or datetime.now(UTC)
    since = _utc(usage.since) or until - DEFAULT_RANGE
    query = PrometheusQuery(
        url=usage.prometheus,
        start=since,
        end=until,
        step_s=usage.step_s or default_step(since, until),
        selector=selector(usage.prometheus_match),
        auth=load_auth(
            os.environ, config=usage.prometheus_config, ca_file=usage.prometheus_ca_file
        ),
        max_bytes=usage.max_usage_bytes,
        **({"timeout_s": usage.prometheus_timeout_s} if usage.prometheus_timeout_s else {}),
    )
    into = request.out / "prometheus" if isinstance(request.out, Path) else scratch
    fetched = fetch_usage(query, into, progress=request.view.info)
    return replace(
        request,
        usage=replace(
            usage,
            paths=(*usage.paths, *fetched.files),
            since=since,
            until=until + timedelta(microseconds=1),
        ),
    )


def _run_analyze(request: AnalyzeCommandRequest) -> AnalyzeRun:
    desired: DesiredState | None = None
    after: list[QuotaConfig] = []
    if request.command is Command.impact:
        configs, after = _before_after(request)
    elif request.manifests:
        desired = load_manifests(request.manifests, cluster=request.connection.cluster)
        configs = [_manifest_config(desired, request.manifests)]
    else:
        configs = _configs_now(request)
    usage = request.usage
    pipeline = AnalyzeRequest(
        command=request.command,
        configs=configs,
        usage=list(usage.paths),
        out=request.out,
        after=after,
        engine=usage.engine,
        master=usage.master,
        remote=usage.remote,
        usage_format=usage.usage_format,
        labels=LabelMap(
            usage.cluster_label,
            usage.broker_label,
            usage.default_cluster,
            assumed_cluster=_one_cluster(configs) if usage.default_cluster is None else None,
            metric=metric_of_name(usage.metric) if usage.metric else None,
        ),
        cluster=usage.default_cluster,
        broker=usage.broker,
        since=_utc(usage.since),
        until=_utc(usage.until),
        window_s=request.window_s,
        align_s=request.align_s,
        quantile=request.quantile,
        headroom=request.headroom,
        request_sizes=dict(request.request_sizes),
        usage_limits=LIMITS["usage"].with_max_bytes(usage.max_usage_bytes),
    )
    from quotaform.analytics.report import enforcement_warnings, write_reports  # matplotlib

    for warning in enforcement_warnings([*configs, *after]):
        request.view.warn(warning)
    result = run_analysis(pipeline, progress=request.view.info)
    reports = write_reports(pipeline, result)
    if request.write_into is None or desired is None:
        return AnalyzeRun(pipeline, result, reports)
    added, updated = _write_recommendations(request, desired, request.write_into, pipeline, result)
    return AnalyzeRun(pipeline, result, reports, added, updated)


def _one_cluster(configs: Sequence[QuotaConfig]) -> str | None:
    """The configured cluster when there is exactly one (taken for usage
    series without the cluster label, and said so)."""
    names = {c.cluster for c in configs}
    return next(iter(names)) if len(names) == 1 else None


def _check_options(request: AnalyzeCommandRequest) -> None:
    """Refuse, before any input is read, what would fail after the analysis."""
    out = request.out
    if isinstance(out, Path) and out.exists() and not out.is_dir():
        raise AnalyticsError(f"--out {out} is a file: give a directory (created if missing)")
    if request.command is not Command.recommend:
        return
    if request.quantile not in QUANTILES:
        raise AnalyticsError(f"--quantile {request.quantile!r}: one of {', '.join(QUANTILES)}")
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
        live = describe_matching(client, None, cluster_id=client.cluster_id())
        enforcement = read_quota_enforcement(client)
    return [QuotaConfig(name, live.entities, f"live cluster {live.cluster_id}", enforcement)]


def _live_cluster_name(request: AnalyzeCommandRequest) -> str:
    """The name the usage knows a live cluster read without a profile
    (``--bootstrap-server``) by: ``--default-cluster``, else the one cluster
    the usage names; several names are refused."""
    usage = request.usage
    if usage.default_cluster:
        return usage.default_cluster
    local = [p for p in usage.paths if isinstance(p, Path)]
    if len(local) < len(usage.paths):
        raise AnalyticsError(
            "which cluster of the usage is the live cluster? usage at a URI is read only "
            "by Spark, after the configuration: give --default-cluster NAME (or --cluster PROFILE)"
        )
    names = usage_clusters(
        local,
        fmt=usage.usage_format,
        labels=LabelMap(usage.cluster_label, usage.broker_label, None),
        broker=usage.broker,
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
    pipeline: AnalyzeRequest,
    result: AnalyzeResult,
) -> tuple[tuple[Entity, ...], tuple[tuple[Entity, str], ...]]:
    """Edit the manifests with ``recommend.parquet``'s values for the
    manifests' cluster: new entities appended to ``into``, declared ones
    updated in their own files (comments kept)."""
    from quotaform.export.manifest_set import edit_manifest_set

    manifests = request.manifests
    rows = table_rows(pipeline, result)
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
        cluster_id = client.cluster_id()
        live = describe_matching(client, None, cluster_id=cluster_id)
    run = QuotaSnapshotRun(name, tuple(snapshot_lines(name, cluster_id, live.entities)))
    if str(request.out) != "-":
        request.out.write_text(run.text, encoding="utf-8")
    return run


@dataclass(frozen=True, slots=True)
class CollectRequest:
    """``quotaform analyze collect``: a (sandbox) broker's quota MBeans read
    with Kafka's JmxTool into the usage table.

    Attributes:
        jmx_port: the broker's loopback JMX port.
        out: the usage JSON Lines file appended to.
        cluster, broker: the cluster and broker the samples belong to.
        seconds: how long to collect; interval_s: seconds between reads.
    """

    jmx_port: int
    out: Path
    cluster: str
    broker: str = "0"
    seconds: float = 60.0
    interval_s: float = 5.0


def run_collect(request: CollectRequest) -> int:
    """Collect, appending to ``out``; returns the number of samples written.

    Raises:
        AnalyticsError, SandboxError: JmxTool cannot run or read the port.
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
