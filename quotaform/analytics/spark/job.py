"""The Spark job: the only place that starts a SparkSession, reads and writes.

``local[*]`` by default from ``pip install quotaform[spark]`` (Java 17+); a
real cluster with ``--master`` or by submitting this module::

    job=$(python -c 'import quotaform.analytics.spark.job as j; print(j.__file__)')
    spark-submit --master spark://host:7077 "$job" \\
        utilisation manifests/ --usage s3a://bucket/usage/ --out s3a://bucket/out/

(quotaform installed on the driver and the executors). Inputs and outputs
may be any Hadoop-compatible path Spark can read.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from quotaform.analytics.configs import QuotaConfig, config_rows
from quotaform.analytics.model import USAGE_COLUMNS
from quotaform.analytics.spark import transforms
from quotaform.analytics.spark.schemas import CONFIG_SCHEMA, USAGE_SCHEMA
from quotaform.analytics.usage import (
    EXAMPLES_KEPT,
    LabelMap,
    Rejections,
    UsageFormat,
    detect_format,
    jmxtool_rows,
    prometheus_rows,
    usage_files,
    write_jsonl,
)
from quotaform.errors import AnalyticsError
from quotaform.kafka.keys import METRICS, QUOTA_KEYS
from quotaform.kafka.metrics import ISO_TIMESTAMP

__all__ = ["config_frame", "read_usage_frame", "spark_session", "write_table"]

log = logging.getLogger(__name__)


def spark_session(
    master: str | None = None, *, shuffle_partitions: int = 8, app: str = "quotaform-analyze"
) -> SparkSession:
    """A SparkSession: ``master`` (default ``local[*]``, or what
    ``spark-submit`` set), UTC session time zone, few shuffle partitions, no UI.

    Raises:
        AnalyticsError: Spark cannot start (no Java 17+ on PATH or JAVA_HOME).
    """
    log4j = Path(__file__).with_name("log4j2.properties")
    builder = (
        SparkSession.builder.appName(app)
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.ansi.enabled", "false")
        .config("spark.sql.adaptive.enabled", "true")
    )
    if master is not None:
        builder = builder.master(master)
    elif "SPARK_MASTER" not in os.environ and not os.environ.get("PYSPARK_SUBMIT_ARGS"):
        builder = builder.master("local[*]")
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # the JVM failed to start: Java missing or too old
        raise AnalyticsError(
            f"Spark could not start ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); "
            "it needs Java 17+ on PATH or in JAVA_HOME. The Python engine needs none: "
            "--engine python"
        ) from exc
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def config_frame(spark: SparkSession, configs: Sequence[QuotaConfig]) -> DataFrame:
    """The quota configurations as a (small) DataFrame of CONFIG_SCHEMA."""
    return spark.createDataFrame(config_rows(configs), CONFIG_SCHEMA)


def _checked(frame: DataFrame, where: Any, known: Sequence[str] | None = None) -> DataFrame:
    """Every row typed as USAGE_SCHEMA plus ``_reason`` (why it cannot be
    used, null when it can) and ``_where``: :func:`quotaform.analytics.usage.check_row`
    as columns, and rows of clusters not in ``known`` refused."""
    types = dict(frame.dtypes)
    text = {c: F.col(c).cast("string") for c in USAGE_COLUMNS}
    metrics = list(METRICS)
    ip_metrics = [m for m, (k, _) in METRICS.items() if "ip" in QUOTA_KEYS[k].entity_types]
    ts_text = text["timestamp"]
    # Typed columns (Parquet) need no parsing: only text is checked and parsed.
    if types.get("timestamp", "").startswith("timestamp"):
        parsed_ts = F.col("timestamp").cast("timestamp")
    else:
        parsed_ts = F.when(ts_text.rlike(ISO_TIMESTAMP), F.try_to_timestamp(ts_text))
    if types.get("value") in ("double", "float", "int", "bigint"):
        value = F.col("value").cast("double")
    else:
        value = text["value"].try_cast("double")
    ip = F.when(text["ip"] == "", F.lit(None)).otherwise(text["ip"])
    reason = (
        F.when(
            text["cluster"].isNull() | (text["cluster"] == ""), F.lit("cluster: missing or empty")
        )
        .when(text["broker"].isNull() | (text["broker"] == ""), F.lit("broker: missing or empty"))
        .when(
            ~F.coalesce(text["metric"].isin(metrics), F.lit(False)),
            F.concat(
                F.lit("metric: "),
                F.coalesce(text["metric"], F.lit("None")),
                F.lit(" is not a usage metric"),
            ),
        )
        .when(
            parsed_ts.isNull(),
            F.concat(
                F.lit("timestamp: "),
                F.coalesce(ts_text, F.lit("None")),
                F.lit(" is not an ISO-8601 time"),
            ),
        )
        .when(
            value.isNull(),
            F.concat(
                F.lit("value: "),
                F.coalesce(text["value"], F.lit("None")),
                F.lit(" is not a number"),
            ),
        )
        .when(
            text["metric"].isin(ip_metrics) & ip.isNull(),
            F.lit("ip: a connection metric needs the ip tag"),
        )
        .when(
            ~text["metric"].isin(ip_metrics) & ip.isNotNull(),
            F.lit("ip: only connection metrics carry an ip"),
        )
    )
    if known is not None:
        reason = reason.when(
            ~text["cluster"].isin(list(known)),
            F.concat(F.lit("cluster: no quota configuration for cluster "), text["cluster"]),
        )
    return frame.select(
        text["cluster"].alias("cluster"),
        text["broker"].alias("broker"),
        parsed_ts.alias("timestamp"),
        text["metric"].alias("metric"),
        F.coalesce(text["user"], F.lit("")).alias("user"),
        F.coalesce(text["client_id"], F.lit("")).alias("client_id"),
        ip.alias("ip"),
        value.alias("value"),
        reason.alias("_reason"),
        where.alias("_where"),
    )


def _with_columns(frame: DataFrame, path: str) -> DataFrame:
    missing = [c for c in USAGE_COLUMNS if c not in frame.columns]
    if missing:
        raise AnalyticsError(
            f"{path}: missing column(s) {', '.join(missing)} (expected {', '.join(USAGE_COLUMNS)})"
        )
    return frame


def read_usage_frame(
    spark: SparkSession,
    paths: Sequence[Path],
    *,
    fmt: UsageFormat = UsageFormat.auto,
    labels: LabelMap | None = None,
    cluster: str | None = None,
    broker: str | None = None,
    scratch: Path | None = None,
    known: Sequence[str] | None = None,
) -> tuple[DataFrame, Rejections]:
    """The usage table as a DataFrame (USAGE_SCHEMA) and what was rejected.

    Generic files are read by Spark in parallel; Prometheus and JmxTool files
    are first streamed into JSON Lines under ``scratch`` (a big ``query_range``
    document is never one task). Every row is checked once (rows of clusters
    not in ``known`` are rejected too); the checked rows are cached, counted
    by reason in one pass, and the first rejected ones named by file and row.
    The returned DataFrame is cached when any input is text (unpersist it
    when done); Parquet alone is read again by each action.
    """
    rejected = Rejections()
    frames: list[DataFrame] = []
    bad: list[DataFrame] = []
    staged_dir = Path(scratch or tempfile.mkdtemp(prefix="quotaform-usage-"))
    staged_dir.mkdir(parents=True, exist_ok=True)
    generic: dict[str, list[str]] = {"parquet": [], "csv": [], "json": []}
    for number, path in enumerate(usage_files(paths)):
        kind = detect_format(path) if fmt is UsageFormat.auto else fmt
        if kind in (UsageFormat.prometheus, UsageFormat.jmxtool):
            records = (
                prometheus_rows(path, labels or LabelMap(), rejected)
                if kind is UsageFormat.prometheus
                else jmxtool_rows(path, cluster=cluster, broker=broker, skipped=rejected)
            )
            out = staged_dir / f"{number:05d}-{path.stem}.jsonl"
            with out.open("w", encoding="utf-8") as fh:
                good = []
                for where, record in records:
                    if isinstance(record, str):
                        rejected.reject(where, record)
                    else:
                        good.append({**record, "_where": where})
                        if len(good) >= 10000:
                            write_jsonl(good, fh)
                            good.clear()
                write_jsonl(good, fh)
            generic["json"].append(str(out))
        elif path.suffix == ".parquet":
            generic["parquet"].append(str(path))
        elif path.suffix == ".csv":
            generic["csv"].append(str(path))
        else:
            generic["json"].append(str(path))
    row_id = F.concat(F.input_file_name(), F.lit(" row "), F.monotonically_increasing_id())
    if generic["parquet"]:
        frame = _with_columns(
            spark.read.parquet(*generic["parquet"]), ", ".join(generic["parquet"])
        )
        frames.append(frame.select(*USAGE_COLUMNS).withColumn("_where", row_id))
    if generic["csv"]:
        frame = spark.read.option("header", True).option("mode", "PERMISSIVE").csv(generic["csv"])
        frames.append(
            _with_columns(frame, ", ".join(generic["csv"]))
            .select(*USAGE_COLUMNS)
            .withColumn("_where", row_id)
        )
    if generic["json"]:
        frame = (
            spark.read.option("allowNonNumericNumbers", True)
            .option("mode", "PERMISSIVE")
            .option("primitivesAsString", True)
            .json(generic["json"])
        )
        if "_corrupt_record" in frame.columns:
            corrupt = frame.where(F.col("_corrupt_record").isNotNull())
            bad.append(
                corrupt.select(row_id.alias("_where"), F.lit("line: not JSON").alias("_reason"))
            )
            frame = frame.where(F.col("_corrupt_record").isNull())
        if "_where" not in frame.columns:
            frame = frame.withColumn("_where", row_id)
        for column in USAGE_COLUMNS:
            if column not in frame.columns:
                frame = frame.withColumn(column, F.lit(None).cast("string"))
        frames.append(frame.select(*USAGE_COLUMNS, "_where"))
    if not frames:
        return spark.createDataFrame([], USAGE_SCHEMA), rejected

    def check_all(with_where: bool) -> DataFrame:
        parts = [_checked(f, F.col("_where"), known) for f in frames]
        merged = parts[0]
        for part in parts[1:]:
            merged = merged.unionByName(part)
        return merged if with_where else merged.drop("_where")

    # Text (CSV, JSON Lines, staged Prometheus/JmxTool) is parsed once: the
    # checked rows are cached, without their file/row label (a string per
    # row). Parquet alone is scanned again instead: building the in-memory
    # cache of 10M rows took 13 s, a scan and check of them 2 s
    # (benchmarks/README.md). The first rejected rows are found again,
    # labelled, only if any.
    checked = check_all(False)
    if generic["csv"] or generic["json"]:
        checked = checked.cache()
    counts = checked.groupBy(F.split("_reason", ":")[0].alias("kind")).count().collect()
    for row in counts:
        if row["kind"] is not None:
            rejected.count += int(row["count"])
            rejected.by_reason[str(row["kind"])] += int(row["count"])
    failed_parts = [f for f in bad]
    if rejected.count:
        failed_parts.insert(
            0, check_all(True).where(F.col("_reason").isNotNull()).select("_where", "_reason")
        )
    for extra in bad:
        for row in extra.groupBy(F.split("_reason", ":")[0].alias("kind")).count().collect():
            rejected.count += int(row["count"])
            rejected.by_reason[str(row["kind"])] += int(row["count"])
    for part in failed_parts:
        for row in part.limit(EXAMPLES_KEPT).collect():
            if len(rejected.examples) < EXAMPLES_KEPT:
                rejected.examples.append(f"{row['_where']}: {row['_reason']}")
    usage = checked.where(F.col("_reason").isNull()).select(*USAGE_COLUMNS)
    return usage, rejected


def write_table(frame: DataFrame, path: Path) -> None:
    """Write ``frame`` as Parquet at ``path`` (a directory of part files, one
    per partition: the computation stays parallel), replacing what is there."""
    if path.exists():
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    frame.write.mode("overwrite").parquet(str(path))


def in_range(frame: DataFrame, since: datetime | None, until: datetime | None) -> DataFrame:
    """Rows of ``frame`` with ``since <= timestamp < until``."""
    if since is not None:
        frame = frame.where(F.col("timestamp") >= F.lit(since))
    if until is not None:
        frame = frame.where(F.col("timestamp") < F.lit(until))
    return frame


__all__ += ["in_range", "transforms"]
