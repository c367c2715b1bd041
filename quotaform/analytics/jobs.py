"""``quotaform analyze``: read the inputs, run one engine, write the outputs.

Outputs in ``--out DIR``: ``<command>.parquet`` (the contract table),
``summary.json`` (``format_version``, ``schemas/analyze.schema.json``),
``report.md`` (for a pull-request comment) and ``report.html`` (self-contained:
tables and plots inline). The engine is ``python`` (the local engine: Arrow
and numpy, explain's resolution, no JVM; :mod:`quotaform.analytics.local`),
``spark`` (PySpark, ``local[*]`` or ``--master``), or ``auto``: Spark for a
remote, a master or a Hadoop URI, else from :data:`AUTO_SPARK_BYTES` of usage
input on.
"""

from __future__ import annotations

import enum
import logging
import shutil
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from quotaform.analytics import engine as py_engine
from quotaform.analytics.configs import QuotaConfig, by_cluster
from quotaform.analytics.model import (
    DEFAULT_ALIGN_S,
    DEFAULT_HEADROOM,
    DEFAULT_WINDOW_S,
    IMPACT_COLUMNS,
    RECOMMEND_COLUMNS,
    UTILISATION_COLUMNS,
    align_micros,
)
from quotaform.analytics.paths import DataPath, child, is_uri
from quotaform.analytics.remote import redact_remote
from quotaform.analytics.usage import (
    LabelMap,
    Rejections,
    UsageFormat,
    usage_files,
    usage_problem,
)
from quotaform.errors import AnalyticsError
from quotaform.inputs.limits import LIMITS, Limits

__all__ = [
    "AUTO_SPARK_BYTES",
    "BUCKETS",
    "BUCKET_LABELS",
    "TOP_ROWS",
    "AnalyzeRequest",
    "AnalyzeResult",
    "Command",
    "Engine",
    "UsageSeries",
    "group_label",
    "run_analysis",
    "table_rows",
    "write_files",
]

log = logging.getLogger(__name__)

#: ``--engine auto`` uses Spark from this much Parquet usage input on (bytes on
#: disk). The local engine (Arrow, no JVM) was faster than Spark ``local[2]``
#: at every size measured, 300k to 10M rows (``benchmarks/results/analytics_local.json``:
#: at 10M rows, 104 MiB, about 15 s against more than 60 s), so on one
#: machine there is no crossover; its peak memory grows by about 70 MiB per
#: million rows (0.96 GiB at 10M), so from 1 GiB of Parquet (about 100M rows,
#: some 7 GiB of memory) a Spark cluster (``--master``) is the safer choice.
AUTO_SPARK_BYTES = 1024 * 1024 * 1024
#: Text formats (CSV, JSON Lines, Prometheus, JmxTool) hold fewer rows per byte
#: than Parquet: 7.4x (CSV) and 14.6x (JSON Lines) the bytes for the same
#: 100,000 benchmark rows; 8 is used, so text input stays on Python a bit longer.
TEXT_BYTES_PER_PARQUET_BYTE = 8
#: Rows of each table shown in the reports.
TOP_ROWS = 20
#: Groups plotted over time in the HTML report.
PLOTTED = 6
#: Samples plotted per group at most.
MAX_POINTS = 5000


class Command(enum.StrEnum):
    """What ``analyze`` computes."""

    utilisation = "utilisation"
    impact = "impact"
    recommend = "recommend"


class Engine(enum.StrEnum):
    """Which engine runs (``--engine``)."""

    auto = "auto"
    spark = "spark"
    python = "python"


@dataclass(frozen=True)
class AnalyzeRequest:
    """One ``analyze`` run.

    Attributes:
        command: utilisation, impact or recommend.
        configs: the quota configuration per cluster (before the change, for impact).
        after: impact: the configuration after the change.
        usage: usage files or directories: local paths or Hadoop URIs
            (:mod:`quotaform.analytics.paths`; a URI needs the Spark engine).
        out: the output directory, a local path or a Hadoop URI.
        engine, master: the engine, and Spark's master URL (default local[*]).
        remote: a Spark Connect URL (``sc://HOST:PORT``) instead of a master;
            implies the Spark engine. Messages show it redacted.
        usage_format, labels, cluster, broker: how to read the usage.
        since, until: the time range (UTC).
        window_s: the quota window W of the throttle formula (seconds).
        align_s: the bucket (seconds) the brokers' samples are aligned on
            before a group's usage is summed across brokers (the cluster-wide
            columns, :data:`~quotaform.analytics.model.CLUSTER_COLUMNS`).
        quantile, headroom: recommend's quantile column and factor.
        request_sizes: S per quota key, one request's amount (bytes for the
            byte rates) for the steady-state throttle; keys not given take
            :data:`quotaform.kafka.impact.STEADY_RULES`' defaults.
        usage_limits: the bounds of a usage file (``--max-usage-size``).
    """

    command: Command
    configs: Sequence[QuotaConfig]
    usage: Sequence[DataPath]
    out: DataPath
    after: Sequence[QuotaConfig] = ()
    engine: Engine = Engine.auto
    master: str | None = None
    remote: str | None = None
    usage_format: UsageFormat = UsageFormat.auto
    labels: LabelMap = field(default_factory=LabelMap)
    cluster: str | None = None
    broker: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    window_s: float = DEFAULT_WINDOW_S
    quantile: str = "p99"
    headroom: float = DEFAULT_HEADROOM
    request_sizes: Mapping[str, float] = field(default_factory=dict)
    align_s: float = DEFAULT_ALIGN_S
    usage_limits: Limits = LIMITS["usage"]


@dataclass(frozen=True, slots=True)
class UsageSeries:
    """One plotted group's usage over time, against its quota.

    Attributes:
        title: the group as the reports name it (cluster, tags, broker).
        cluster: the group's cluster.
        quota_key: the quota key (its unit is the usage's unit).
        quota: the governing quota value (``None``: unlimited).
        points: ``(time, usage)`` in time order; times are UTC.
    """

    title: str
    cluster: str
    quota_key: str
    quota: float | None
    points: tuple[tuple[datetime, float], ...]


@dataclass
class AnalyzeResult:
    """What a run produced, for the reports and the summary.

    Attributes:
        engine: the engine that ran.
        table: the output table's path.
        rows: rows of the output table.
        top: the first :data:`TOP_ROWS` rows (ranked), as dicts.
        usage_rows: usable usage rows read (in the time range).
        rejected: rows that could not be used.
        histogram: utilisation_p99 bucket -> groups (utilisation), else empty.
        series: the plotted groups' usage over time (most loaded first).
        seconds: wall time by stage.
        extra: command-specific counts for the summary.
    """

    engine: Engine
    table: DataPath
    rows: int
    top: list[dict[str, Any]]
    usage_rows: int
    rejected: Rejections
    histogram: dict[str, int] = field(default_factory=dict)
    series: list[UsageSeries] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


_COLUMNS = {
    Command.utilisation: UTILISATION_COLUMNS,
    Command.impact: IMPACT_COLUMNS,
    Command.recommend: RECOMMEND_COLUMNS,
}
#: utilisation_p99 histogram buckets (upper bounds). The last one is 1: a
#: group at or over its quota falls in ``>= 1``, as the headline counts it.
BUCKETS = (0.25, 0.5, 0.75, 0.9, 1.0)
#: The histogram's labels in order: ``< 0.25`` ... ``< 1``, ``>= 1``, ``unlimited``.
BUCKET_LABELS = (*(f"< {b:g}" for b in BUCKETS), f">= {BUCKETS[-1]:g}", "unlimited")


def _bucket(value: float | None) -> str:
    if value is None:
        return "unlimited"
    for bound in BUCKETS:
        if value < bound:
            return f"< {bound:g}"
    return f">= {BUCKETS[-1]:g}"


def _in_bucket_order(counts: Mapping[str, int]) -> dict[str, int]:
    """Every bucket, in :data:`BUCKET_LABELS` order (empty ones as 0), so the
    summary and the plot read left to right the same way every run."""
    return {label: int(counts.get(label, 0)) for label in BUCKET_LABELS}


def choose_engine(request: AnalyzeRequest) -> Engine:
    """``request.engine``, with ``auto`` resolved: Spark for a remote, a
    master, or a Hadoop URI (usage or output), else by the usage input's size.

    Raises:
        AnalyticsError: ``--engine python`` with a remote, or with a URI it
            cannot reach.
    """
    if request.remote is not None:
        if request.engine is Engine.python:
            raise AnalyticsError(
                f"--remote {redact_remote(request.remote)} runs the Spark engine: drop "
                "--engine python (or the remote)"
            )
        return Engine.spark
    uris = [str(p) for p in (*request.usage, request.out) if is_uri(p)]
    if request.engine is Engine.python and uris:
        raise AnalyticsError(
            f"{uris[0]}: a URI is read and written through Spark; --engine python reads "
            "local paths only (use --engine spark, or a local path)"
        )
    if request.engine is not Engine.auto:
        return request.engine
    if uris or request.master is not None:  # a cluster named is a cluster used
        return Engine.spark
    size = sum(
        p.stat().st_size / (1 if p.suffix == ".parquet" else TEXT_BYTES_PER_PARQUET_BYTE)
        for p in usage_files([Path(p) for p in request.usage], limits=request.usage_limits)
    )
    return Engine.spark if size >= AUTO_SPARK_BYTES else Engine.python


def _ranked(command: Command, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if command is Command.utilisation:
        return sorted(
            rows,
            key=lambda r: (
                -(r["utilisation_p99"] if r["utilisation_p99"] is not None else -1.0),
                r["cluster"],
                r["broker"],
                r["user"],
                r["client_id"],
                r["ip"] or "",
                r["quota_key"],
            ),
        )
    if command is Command.impact:
        return rows  # already ranked: newly throttled first
    return sorted(rows, key=lambda r: (not r["censored"], r["cluster"], r["user"], r["client_id"]))


def group_label(row: Mapping[str, Any]) -> str:
    """A group as the reports name it: ``prod-eu: user=alice, client-id=ingest @1``."""
    if row.get("ip"):
        where = f"ip={row['ip']}"
    else:
        where = (
            ", ".join(
                f"{n}={row[c]}" for n, c in (("user", "user"), ("client-id", "client_id")) if row[c]
            )
            or "(no tags)"
        )
    broker = f" @{row['broker']}" if row.get("broker") else ""
    return f"{row['cluster']}: {where}{broker}"


def _series_of(
    wanted: Sequence[Mapping[str, Any]], points: Mapping[int, list[tuple[datetime, float]]]
) -> list[UsageSeries]:
    """The plotted series, in ``wanted``'s (ranked) order."""
    return [
        UsageSeries(
            title=f"{group_label(row)} {row['quota_key']}",
            cluster=row["cluster"],
            quota_key=row["quota_key"],
            quota=row["quota_value"],
            points=tuple(sorted(points[i])[:MAX_POINTS]),
        )
        for i, row in enumerate(wanted)
        if points.get(i)
    ]


def run_analysis(
    request: AnalyzeRequest, *, progress: Callable[[str], None] | None = None
) -> AnalyzeResult:
    """Run ``request`` and write its outputs (the table; the reports are
    written by :mod:`quotaform.analytics.report`).

    Raises:
        AnalyticsError: bad inputs (named), no usage row for any configured
            cluster, or Spark cannot start.
    """
    say = progress or (lambda _m: None)
    try:
        align_micros(request.align_s)
    except ValueError as exc:
        raise AnalyticsError(f"--align {exc}") from None
    chosen = choose_engine(request)
    if isinstance(request.out, Path):
        request.out.mkdir(parents=True, exist_ok=True)
    configs = by_cluster(request.configs)
    after = by_cluster(request.after) if request.after else {}
    if request.command is Command.impact:
        missing = sorted(set(configs) - set(after))
        if missing:
            raise AnalyticsError(f"no configuration after the change for {', '.join(missing)}")
    say(f"engine: {chosen.value}")
    if chosen is Engine.python:
        return _run_python(request, configs, after, say)
    try:
        return _run_spark(request, configs, after, say)
    except AnalyticsError:
        raise
    except Exception as exc:  # PySpark's, Py4J's and the Connect client's errors
        from quotaform.analytics.spark.job import spark_error

        failure = spark_error(exc, master=request.master, remote=request.remote)
        if failure is None:
            raise
        raise failure from exc


def _refuse_unusable(rows: int, rejected: Rejections, labels: LabelMap) -> None:
    """Raise :func:`~quotaform.analytics.usage.usage_problem`'s reason, if any.

    Raises:
        AnalyticsError: nothing usable, or quota series that cannot be read.
    """
    problem = usage_problem(rows, rejected, labels)
    if problem is not None:
        raise AnalyticsError(problem)


def _say_matched(rejected: Rejections, say: Callable[[str], None]) -> None:
    """Which exporter series were read as which usage metric (progress)."""
    for match, count in sorted(rejected.matched.items()):
        say(f"series read: {match}: {count:,}")


def _run_python(
    request: AnalyzeRequest,
    configs: Mapping[str, QuotaConfig],
    after: Mapping[str, QuotaConfig],
    say: Callable[[str], None],
) -> AnalyzeResult:
    """The local engine (Arrow, no JVM): usage read as Arrow and coded by
    series (:mod:`quotaform.analytics.local`), statistics in numpy, Kafka's
    rules once per group (:mod:`quotaform.analytics.engine`)."""
    from quotaform.analytics.local import aggregate
    from quotaform.analytics.local.reader import read_coded_usage

    times: dict[str, float] = {}
    start = time.perf_counter()
    usage, rejected = read_coded_usage(
        [Path(p) for p in request.usage],
        clusters=configs,
        fmt=request.usage_format,
        labels=request.labels,
        cluster=request.cluster,
        broker=request.broker,
        since=request.since,
        until=request.until,
        limits=request.usage_limits,
    )
    times["read"] = time.perf_counter() - start
    _say_matched(rejected, say)
    _refuse_unusable(usage.rows, rejected, request.labels)
    say(f"read {usage.rows:,} usage rows ({rejected.count:,} rejected)")
    start = time.perf_counter()
    util = aggregate.utilisation(
        usage, {c: cfg.index for c, cfg in configs.items()}, align_s=request.align_s
    )
    path = Path(request.out) / f"{request.command.value}.parquet"
    if request.command is Command.utilisation:
        order = aggregate.ranked_order(util.table)
        top = util.table.take(order[:TOP_ROWS]).to_pylist()
        times["compute"] = time.perf_counter() - start
        start = time.perf_counter()
        write_parquet_dataset(util.table, path)
        times["write"] = time.perf_counter() - start
        rows = util.table.num_rows
        summarised: Sequence[Mapping[str, Any]] = util.table.select(
            ["utilisation_p99", "censored", "brokers_observed"]
        ).to_pylist()
    else:
        util_rows = util.table.to_pylist()
        if request.command is Command.impact:
            table = py_engine.impact(
                util_rows,
                {c: cfg.index for c, cfg in after.items()},
                window_s=request.window_s,
                request_sizes=request.request_sizes,
            )
        else:
            table = py_engine.recommend(
                util_rows,
                quantile=request.quantile,
                headroom=request.headroom,
                request_sizes=request.request_sizes,
            )
        times["compute"] = time.perf_counter() - start
        start = time.perf_counter()
        _write_arrow(table, _COLUMNS[request.command], path)
        times["write"] = time.perf_counter() - start
        rows = len(table)
        top = _ranked(request.command, table)[:TOP_ROWS]
        summarised = table
    result = AnalyzeResult(
        engine=Engine.python,
        table=path,
        rows=rows,
        top=top,
        usage_rows=usage.rows,
        rejected=rejected,
        seconds=times,
    )
    _summarise(request.command, summarised, result)
    if request.command is Command.utilisation:
        result.series = _series_python(usage, util, order)
    return result


def _write_arrow(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], path: Path) -> None:
    import pyarrow as pa

    from quotaform.analytics.local.aggregate import arrow_schema

    schema = arrow_schema(columns)
    table = pa.Table.from_pylist([{c: r[c] for c in columns} for r in rows], schema=schema)
    write_parquet_dataset(table, path)


#: The one part file of a table the local engine writes.
PART_FILE = "part-00000.parquet"


def write_parquet_dataset(table: Any, path: Path) -> None:
    """Write an Arrow table as Spark lays a table out: ``path`` is a
    directory holding ``part-00000.parquet`` and an empty ``_SUCCESS``
    marker, replacing what is there, so both engines' tables are read the
    same way (``spark.read.parquet``, ``pyarrow.parquet.read_table``,
    pandas, DuckDB's ``path/*.parquet``)."""
    import pyarrow.parquet as pq

    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    path.mkdir(parents=True)
    pq.write_table(table, path / PART_FILE)
    (path / "_SUCCESS").touch()


def _summarise(command: Command, rows: Sequence[Mapping[str, Any]], result: AnalyzeResult) -> None:
    if command is Command.utilisation:
        counts: dict[str, int] = {}
        for row in rows:
            bucket = _bucket(row["utilisation_p99"])
            counts[bucket] = counts.get(bucket, 0) + 1
        result.histogram = _in_bucket_order(counts)
        result.extra = {
            "groups": len(rows),
            "censored": sum(1 for r in rows if r["censored"]),
            "over_quota": sum(
                1 for r in rows if r["utilisation_p99"] is not None and r["utilisation_p99"] >= 1.0
            ),
            **_spread(Counter(r["brokers_observed"] for r in rows)),
        }
    elif command is Command.impact:
        result.extra = {
            "changed": len(rows),
            "newly_throttled": sum(1 for r in rows if r["newly_throttled"]),
            "group_changes": {
                kind: sum(1 for r in rows if r["group_change"] == kind)
                for kind in ("splits", "merges")
            },
        }
    else:
        result.extra = {
            "recommendations": len(rows),
            "censored": sum(1 for r in rows if r["censored"]),
        }


def _spread(rows_by_brokers: Mapping[int, int]) -> dict[str, int]:
    """The summary's counts of groups over every broker, from the number of
    per-broker rows by ``brokers_observed`` (a group on n brokers has n
    rows): ``cluster_groups``, ``multi_broker_groups`` (on more than one
    broker) and ``max_brokers_observed``."""
    return {
        "cluster_groups": sum(rows // n for n, rows in rows_by_brokers.items()),
        "multi_broker_groups": sum(rows // n for n, rows in rows_by_brokers.items() if n > 1),
        "max_brokers_observed": max(rows_by_brokers, default=0),
    }


def _series_python(usage: Any, util: Any, order: Any) -> list[UsageSeries]:
    """The plotted groups' samples (the first :data:`PLOTTED` of ``order``,
    the ranked rows of ``util.table``, with samples), from the coded usage."""
    from quotaform.analytics.local import aggregate

    ranked = order[:PLOTTED]
    rows = util.table.take(ranked).to_pylist()
    picked = [(row, int(util.group[i])) for row, i in zip(rows, ranked, strict=True)]
    wanted = [(row, group) for row, group in picked if row["samples"]]
    points = aggregate.sample_points(usage, [group for _, group in wanted])
    return _series_of([row for row, _ in wanted], points)


def _run_spark(
    request: AnalyzeRequest,
    configs: Mapping[str, QuotaConfig],
    after: Mapping[str, QuotaConfig],
    say: Callable[[str], None],
) -> AnalyzeResult:
    from pyspark.sql import functions as F

    from quotaform.analytics.spark import job, transforms

    times: dict[str, float] = {}
    start = time.perf_counter()
    spark = job.spark_session(request.master, remote=request.remote)
    times["spark_start"] = time.perf_counter() - start
    where = job.session_target(spark, request.remote)
    say(f"Spark {spark.version} on {where} ({times['spark_start']:.1f} s)")
    start = time.perf_counter()
    usage, rejected, usage_rows = job.read_usage_counted(
        spark,
        [_for_server(p, request.remote) for p in request.usage],
        fmt=request.usage_format,
        labels=request.labels,
        cluster=request.cluster,
        broker=request.broker,
        known=sorted(configs),
        since=request.since,
        until=request.until,
        limits=request.usage_limits,
    )
    if usage_rows == 0 and rejected.by_reason.get("cluster"):
        raise AnalyticsError(
            "no usage row belongs to a configured cluster ("
            f"{', '.join(sorted(configs))}): {rejected.examples[0] if rejected.examples else ''}"
        )
    times["read"] = time.perf_counter() - start
    _say_matched(rejected, say)
    _refuse_unusable(usage_rows, rejected, request.labels)
    say(f"read {usage_rows:,} usage rows ({rejected.count:,} rejected)")
    start = time.perf_counter()
    config = job.config_frame(spark, list(configs.values())).cache()
    util = transforms.utilisation(usage, config=config, align_s=request.align_s)
    if request.command is Command.utilisation:
        table = util
    elif request.command is Command.impact:
        after_frame = job.config_frame(spark, list(after.values()))
        table = transforms.impact(
            util.cache(),
            after=after_frame,
            window_s=request.window_s,
            request_sizes=request.request_sizes,
        )
    else:
        table = transforms.recommend(
            util,
            quantile=request.quantile,
            headroom=request.headroom,
            request_sizes=request.request_sizes,
        )
    path = child(_for_server(request.out, request.remote), f"{request.command.value}.parquet")
    job.write_table(table.select(*_COLUMNS[request.command]), path)
    times["compute_and_write"] = time.perf_counter() - start
    say(f"wrote {path} ({times['compute_and_write']:.1f} s)")
    written = spark.read.parquet(str(path))
    if request.command is Command.utilisation:
        top_frame = written.orderBy(
            F.col("utilisation_p99").desc_nulls_last(),
            *[F.col(c) for c in ("cluster", "broker", "user", "client_id", "ip", "quota_key")],
        )
    elif request.command is Command.impact:
        top_frame = written.orderBy(
            F.col("newly_throttled").desc(),
            F.col("predicted_throttle_ms").desc(),
            *[F.col(c) for c in ("cluster", "broker", "user", "client_id", "ip", "quota_key")],
        )
    else:
        top_frame = written.orderBy(F.col("censored").desc(), "cluster", "user", "client_id")
    top = [r.asDict() for r in top_frame.limit(TOP_ROWS).collect()]
    result = AnalyzeResult(
        engine=Engine.spark,
        table=path,
        rows=0,
        top=top,
        usage_rows=usage_rows,
        rejected=rejected,
        seconds=times,
    )
    _summarise_spark(request.command, written, result)
    if request.command is Command.utilisation:
        result.series = _series_spark(usage, top[:PLOTTED])
    usage.unpersist()
    return result


def _for_server(where: DataPath, remote: str | None) -> DataPath:
    """A local path as a Spark Connect server must see it: absolute (the
    server resolves a relative path against its own working directory)."""
    if remote is None or not isinstance(where, Path):
        return where
    return where.resolve()


def write_files(request: AnalyzeRequest, files: Mapping[str, str]) -> dict[str, DataPath]:
    """Write small text files (name -> text) into ``request.out``: with the
    local file system for a local directory, through Spark for a URI
    (:func:`quotaform.analytics.spark.job.write_texts`); returns name ->
    where it went."""
    out = request.out
    if isinstance(out, Path):
        for name, text in files.items():
            (out / name).write_text(text, encoding="utf-8")
        return {name: out / name for name in files}
    from quotaform.analytics.spark import job

    return dict(
        job.write_texts(job.spark_session(request.master, remote=request.remote), out, files)
    )


def table_rows(request: AnalyzeRequest, result: AnalyzeResult) -> list[dict[str, Any]]:
    """Every row of the written table, as dicts (pyarrow for a local table,
    Spark for a URI)."""
    if isinstance(result.table, Path):
        import pyarrow.parquet as pq

        # A directory of parts, from either engine (write_parquet_dataset).
        return pq.read_table(result.table).to_pylist()
    from quotaform.analytics.spark import job

    spark = job.spark_session(request.master, remote=request.remote)
    return [r.asDict() for r in spark.read.parquet(result.table).collect()]


def _summarise_spark(command: Command, frame: Any, result: AnalyzeResult) -> None:
    """The table's row count and the summary's counts in one aggregation."""
    from pyspark.sql import functions as F

    if command is Command.utilisation:
        bucket = F.lit("unlimited")
        for bound in reversed(BUCKETS):
            bucket = F.when(F.col("utilisation_p99") < bound, F.lit(f"< {bound:g}")).otherwise(
                bucket
            )
        bucket = (
            F.when(F.col("utilisation_p99").isNull(), F.lit("unlimited"))
            .when(F.col("utilisation_p99") >= BUCKETS[-1], F.lit(f">= {BUCKETS[-1]:g}"))
            .otherwise(bucket)
        )
        # One aggregation for the histogram and the groups over every broker.
        rows = (
            frame.groupBy(bucket.alias("bucket"), "brokers_observed")
            .agg(F.count("*").alias("count"), F.sum(F.col("censored").cast("int")).alias("cens"))
            .collect()
        )
        counts: dict[str, int] = {}
        by_brokers: dict[int, int] = {}
        for r in rows:
            counts[r["bucket"]] = counts.get(r["bucket"], 0) + int(r["count"])
            brokers = int(r["brokers_observed"])
            by_brokers[brokers] = by_brokers.get(brokers, 0) + int(r["count"])
        result.rows = sum(counts.values())
        result.histogram = _in_bucket_order(counts)
        result.extra = {
            "groups": result.rows,
            "censored": sum(int(r["cens"] or 0) for r in rows),
            "over_quota": counts.get(f">= {BUCKETS[-1]:g}", 0),
            **_spread(by_brokers),
        }
    elif command is Command.impact:
        rows = (
            frame.groupBy("group_change")
            .agg(
                F.count("*").alias("count"),
                F.sum(F.col("newly_throttled").cast("int")).alias("newly"),
            )
            .collect()
        )
        counts = {r["group_change"]: int(r["count"]) for r in rows}
        result.rows = sum(counts.values())
        result.extra = {
            "changed": result.rows,
            "newly_throttled": sum(int(r["newly"] or 0) for r in rows),
            "group_changes": {k: counts.get(k, 0) for k in ("splits", "merges")},
        }
    else:
        rows = frame.groupBy("censored").count().collect()
        result.rows = sum(int(r["count"]) for r in rows)
        result.extra = {
            "recommendations": result.rows,
            "censored": sum(int(r["count"]) for r in rows if r["censored"]),
        }


def _series_spark(usage: Any, top: Sequence[Mapping[str, Any]]) -> list[UsageSeries]:
    """The usage samples of the ``top`` groups over time: one query (a join
    with the groups), not one scan per group."""
    from pyspark.sql import functions as F

    from quotaform.kafka.keys import QUOTA_KEYS

    wanted = [r for r in top if r["samples"]]
    if not wanted:
        return []
    spark = usage.sparkSession
    groups = spark.createDataFrame(
        [
            (
                str(i),
                r["cluster"],
                r["broker"],
                QUOTA_KEYS[r["quota_key"]].usage_metric,
                r["user"],
                r["client_id"],
                r["ip"] or "",
            )
            for i, r in enumerate(wanted)
        ],
        "g string, cluster string, broker string, metric string, user string, client_id string, "
        "ip string",
    )
    points = (
        usage.where(~F.isnan("value"))
        .withColumn("ip", F.coalesce(F.col("ip"), F.lit("")))
        .join(F.broadcast(groups), ["cluster", "broker", "metric", "user", "client_id", "ip"])
        .select("g", "timestamp", "value")
        .collect()
    )
    series: dict[int, list[tuple[datetime, float]]] = {}
    for point in points:
        series.setdefault(int(point["g"]), []).append((point["timestamp"], point["value"]))
    return _series_of(wanted, series)
