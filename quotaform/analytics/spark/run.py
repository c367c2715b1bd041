"""The Spark engine's run: the session, the sources' frames
(:func:`quotaform.analytics.spark.job.read_usage_counted`), the transforms,
the table written where ``--out`` says, and the summary's counts and plotted
samples computed by Spark."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from quotaform.analytics.configs import QuotaConfig
from quotaform.analytics.model import RANKING, TABLE_COLUMNS
from quotaform.analytics.paths import DataPath, child
from quotaform.analytics.request import AnalyzeRequest, Command, Engine
from quotaform.analytics.results import (
    BUCKETS,
    TOP_ROWS,
    AnalyzeResult,
    in_bucket_order,
    refuse_unusable,
    say_matched,
    spread,
)
from quotaform.analytics.spark import job, partitions, session, transforms
from quotaform.errors import AnalyticsError

__all__ = ["for_server", "ranking", "run_spark", "table_rows", "write_texts"]


def ranking(command: str) -> list[Column]:
    """A command's :data:`~quotaform.analytics.model.RANKING` as Spark sort
    columns."""
    return [
        F.col(c).desc_nulls_last() if descending else F.col(c).asc_nulls_first()
        for c, descending in RANKING[command]
    ]


def run_spark(
    request: AnalyzeRequest,
    configs: Mapping[str, QuotaConfig],
    after: Mapping[str, QuotaConfig],
    say: Callable[[str], None],
) -> AnalyzeResult:
    """One analysis on Spark: the session, the usage read and checked once,
    the quotas of ``configs`` (``after``: impact's) answered per distinct
    look-up, the command's transform, the table and reports written; the
    same :class:`~quotaform.analytics.results.AnalyzeResult` as the local
    engine, with each step's seconds. (Over 80 lines: the steps in the order
    they run, each timed.) Raises AnalyticsError (bad or unusable input, no
    usable row, a Spark failure worded by ``session.spark_error``)."""
    times: dict[str, float] = {}
    start = time.perf_counter()
    spark = session.spark_session(request.master, remote=request.remote)
    times["spark_start"] = time.perf_counter() - start
    where = session.session_target(spark, request.remote)
    say(f"Spark {spark.version} on {where} ({times['spark_start']:.1f} s)")
    start = time.perf_counter()
    checked = job.read_checked(
        spark,
        [for_server(p, request.remote) for p in request.usage],
        fmt=request.usage_format,
        options=request.read,
        known=sorted(configs),
        since=request.since,
        until=request.until,
    )
    rejected, usage_rows, computed = checked.rejected, 0, None
    if checked.rows is not None:
        # One pass over the checked rows: shuffled once by group, each
        # partition counted and aggregated by the local engine's code
        # (partitions.py); checkpointed, so the counts are read now and the
        # table written (and read by impact and recommend) next.
        shuffle = int(spark.conf.get("spark.sql.shuffle.partitions") or 1)
        computed = partitions.utilisation(
            checked.kinds(),
            configs={c: q.index for c, q in configs.items()},
            align_s=request.align,
            partitions=partitions.partitions_for(checked.inputs.parquet_bytes, shuffle),
        ).localCheckpoint()
        counts = partitions.counts_of(computed)
        usage_rows = job.count_kinds(counts.kinds, rejected)
        rejected.duplicates = counts.repeats
        usage_rows -= counts.repeats
    checked.name_rejected(rejected)
    if usage_rows == 0 and rejected.by_reason.get("cluster"):
        raise AnalyticsError(
            "no usage row belongs to a configured cluster ("
            f"{', '.join(sorted(configs))}): {rejected.examples[0] if rejected.examples else ''}"
        )
    times["read"] = time.perf_counter() - start
    say_matched(rejected, say)
    refuse_unusable(usage_rows, rejected, request.read.labels)
    say(f"read {usage_rows:,} usage rows ({rejected.count:,} rejected)")
    start = time.perf_counter()
    assert computed is not None and checked.rows is not None  # else refused above
    util = partitions.table_of(computed)
    if request.command is Command.utilisation:
        table = util
    elif request.command is Command.impact:
        after_frame = job.config_frame(spark, list(after.values()))
        table = transforms.impact(
            util,
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
    path = child(for_server(request.out, request.remote), f"{request.command.value}.parquet")
    job.write_table(table.select(*TABLE_COLUMNS[request.command]), path)
    times["compute_and_write"] = time.perf_counter() - start
    say(f"wrote {path} ({times['compute_and_write']:.1f} s)")
    written = spark.read.parquet(str(path))
    top_frame = written.orderBy(*ranking(request.command.value))
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
        result.series = partitions.plotted(computed, top)
    checked.rows.unpersist()
    return result


def for_server(where: DataPath, remote: str | None) -> DataPath:
    """A local path as a Spark Connect server must see it: absolute (the
    server resolves a relative path against its own working directory)."""
    if remote is None or not isinstance(where, Path):
        return where
    return where.resolve()


def _summarise_spark(command: Command, frame: DataFrame, result: AnalyzeResult) -> None:
    """The table's row count and the summary's counts in one aggregation."""
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
        result.histogram = in_bucket_order(counts)
        result.extra = {
            "groups": result.rows,
            "censored": sum(int(r["cens"] or 0) for r in rows),
            "over_quota": counts.get(f">= {BUCKETS[-1]:g}", 0),
            **spread(by_brokers),
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


def write_texts(request: AnalyzeRequest, files: Mapping[str, str]) -> dict[str, DataPath]:
    """Small text files (the reports) under the URI ``request.out``, through
    Spark (:func:`quotaform.analytics.spark.job.write_texts`)."""
    spark = session.spark_session(request.master, remote=request.remote)
    return dict(job.write_texts(spark, str(request.out), files))


def table_rows(request: AnalyzeRequest, table: DataPath) -> list[dict[str, Any]]:
    """Every row of a table Spark wrote at a URI, as dicts."""
    spark = session.spark_session(request.master, remote=request.remote)
    return [r.asDict() for r in spark.read.parquet(str(table)).collect()]
