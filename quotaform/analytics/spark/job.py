"""The Spark job: reads the usage and the configurations into DataFrames
(every row checked once, the rejected rows counted and named as the local
engine names them) and writes the table and the reports. The SparkSession
it runs on comes from :mod:`quotaform.analytics.spark.session`.

Inputs and outputs may be local paths or any Hadoop-compatible URI Spark can
read and write (:mod:`quotaform.analytics.paths`), on ``local[*]``, a
cluster (``--master``, or the same run submitted with ``spark-submit``) or
a Spark Connect server.
"""

from __future__ import annotations

import contextlib
import functools
import math
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict, Unpack

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from quotaform.analytics.configs import QuotaConfig, config_rows
from quotaform.analytics.model import USAGE_COLUMNS
from quotaform.analytics.paths import DataPath, name_of
from quotaform.analytics.sources.base import ReadOptions, Source
from quotaform.analytics.sources.registry import (
    AUTO,
    SUFFIXES,
    detect,
    parquet_bytes,
    source_named,
    usage_inputs,
)
from quotaform.analytics.sources.schema import STAGED_SCHEMA
from quotaform.analytics.spark import transforms
from quotaform.analytics.spark.schemas import CONFIG_SCHEMA, USAGE_SCHEMA
from quotaform.analytics.spark.sources import LOCATION, file_key, generic_frames, row_numbers
from quotaform.analytics.usage import EXAMPLES_KEPT, Rejections
from quotaform.errors import AnalyticsError
from quotaform.inputs.limits import Limits
from quotaform.kafka.keys import METRICS, QUOTA_KEYS
from quotaform.kafka.metrics import ISO_TIMESTAMP

__all__ = [
    "IN_RANGE",
    "KIND",
    "CheckedRows",
    "ReadArgs",
    "checked",
    "config_frame",
    "count_kinds",
    "read_checked",
    "read_usage_counted",
    "write_table",
    "write_texts",
]


def config_frame(spark: SparkSession, configs: Sequence[QuotaConfig]) -> DataFrame:
    """The quota configurations as a (small) DataFrame of CONFIG_SCHEMA."""
    return spark.createDataFrame(config_rows(configs), CONFIG_SCHEMA)


def checked(frame: DataFrame, known: Sequence[str] | None = None) -> DataFrame:
    """Every row typed as USAGE_SCHEMA plus ``_reason`` (why it cannot be
    used, null when it can) and its :data:`~quotaform.analytics.spark.sources.LOCATION`:
    :func:`quotaform.analytics.usage.check_row` as columns, and rows of
    clusters not in ``known`` refused. Text and integer columns are read as
    text, numbers as doubles (the rules of
    :mod:`quotaform.analytics.sources.schema`).

    (Over 80 lines: one column expression per rule of ``check_row``, in its
    order, so that the two are read side by side.)"""
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
    if types.get("value") in _NUMBERS:
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
            F.abs(value) == F.lit(float("inf")),
            F.concat(
                F.lit("value: "),
                F.coalesce(text["value"], F.lit("None")),
                F.lit(" is not a finite number"),
            ),
        )
        .when(
            text["metric"].isin(ip_metrics) & ip.isNull(),
            F.concat(F.lit("ip: "), text["metric"], F.lit(" needs the ip tag")),
        )
        .when(
            ~text["metric"].isin(ip_metrics) & ip.isNotNull(),
            F.concat(F.lit("ip: only connection metrics carry an ip, not "), text["metric"]),
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
        *LOCATION,
    )


#: Spark's numeric column types, read as doubles.
_NUMBERS = ("double", "float", "int", "bigint", "smallint", "tinyint")
#: Rows per Arrow batch of parsed (Prometheus, JmxTool) usage.
_BATCH_ROWS = 50_000


def _usage_inputs(
    spark: SparkSession,
    paths: Sequence[DataPath],
    fmt: str,
    skipped: Rejections,
    limits: Limits,
) -> list[tuple[DataPath, Source, bool, int]]:
    """Each usage file as (where, source, local?, bytes): local paths listed and
    detected by :func:`~quotaform.analytics.sources.registry.usage_inputs`,
    URIs listed by Spark (``binaryFile``, content not read) and detected by
    the same :func:`~quotaform.analytics.sources.registry.detect`, their
    first lines read through Spark when a source asks, in the order given.

    Raises:
        AnalyticsError: as ``usage_inputs``, for URIs too.
    """
    found: list[tuple[DataPath, Source, bool, int]] = []
    forced = None if fmt == AUTO else source_named(fmt)
    for given in paths:
        if isinstance(given, Path):
            for path, source in usage_inputs([given], skipped, fmt=fmt, limits=limits):
                found.append((path, source, True, path.stat().st_size))
            continue
        sizes = _listed(spark, given)
        listed = list(sizes)
        for uri in listed:
            found_source = forced or detect(name_of(uri), functools.partial(_head, spark, uri))
            if found_source is None:
                if listed == [given]:
                    raise AnalyticsError(
                        f"{uri}: neither a Prometheus query_range answer nor JSON Lines usage rows"
                    )
                skipped.skipped[
                    f"{uri}: neither a Prometheus query_range answer nor JSON Lines"
                ] += 1
                continue
            found.append((uri, found_source, False, sizes[uri]))
    if not found:
        raise AnalyticsError(
            f"{', '.join(map(str, paths))}: no usage files (*.parquet, *.csv, *.jsonl, *.json)"
        )
    return found


def _listed(spark: SparkSession, uri: str) -> dict[str, int]:
    """The data files at ``uri`` (a file, or a directory searched
    recursively; names starting with ``.`` or ``_`` left out, as Spark does),
    in name order, with their sizes (bytes).

    Raises:
        AnalyticsError: nothing there, or no data file in it.
    """
    try:
        rows = (
            spark.read.format("binaryFile")
            .option("recursiveFileLookup", "true")
            .load(uri)
            .select("path", "length")
            .collect()
        )
    except Exception as exc:  # Spark's AnalysisException (PATH_NOT_FOUND) and kin
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        raise AnalyticsError(f"{uri}: cannot be listed by Spark ({first})") from None
    files = {str(r["path"]): int(r["length"]) for r in rows if str(r["path"]).endswith(SUFFIXES)}
    if not files:
        raise AnalyticsError(f"{uri}: no usage files (*.parquet, *.csv, *.jsonl, *.json)")
    return dict(sorted(files.items()))


def _head(spark: SparkSession, uri: str) -> bytes:
    """The first lines of a URI's text, read through Spark (for detection)."""
    head = spark.read.text(uri).limit(5).collect()
    return "\n".join(str(r["value"]) for r in head).encode("utf-8")


@contextlib.contextmanager
def _local_copy(spark: SparkSession, where: DataPath, local: bool) -> Iterator[Path]:
    """``where`` as a local file for the streaming parsers: itself, or a
    URI's text fetched through Spark into a temporary file (removed after)."""
    if local:
        yield Path(where)
        return
    row = spark.read.text(str(where), wholetext=True).first()
    with tempfile.TemporaryDirectory(prefix="quotaform-usage-") as scratch:
        path = Path(scratch) / name_of(where)
        path.write_text("" if row is None else str(row["value"]), encoding="utf-8")
        try:
            yield path
        except AnalyticsError as exc:
            raise AnalyticsError(str(exc).replace(str(path), str(where))) from None


def _text(value: Any) -> str | None:
    """A parsed record's value as the text a JSON Lines file would hold."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return str(value)


def _record_batches(
    records: Iterable[tuple[str, Mapping[str, Any] | str]],
    rejected: Rejections,
    *,
    label: str,
    local: Path,
) -> list[pa.RecordBatch]:
    """Parsed usage records as Arrow batches of
    :data:`~quotaform.analytics.sources.schema.STAGED_SCHEMA` (``_where``
    naming ``label``, not the local copy); refusals counted in ``rejected``."""
    copy = str(local)
    batches: list[pa.RecordBatch] = []
    columns: dict[str, list[str | None]] = {c: [] for c in STAGED_SCHEMA.names}

    def flush() -> None:
        if columns["_where"]:
            batches.append(pa.RecordBatch.from_pydict(columns, schema=STAGED_SCHEMA))
            for values in columns.values():
                values.clear()

    for where, record in records:
        where = where.replace(copy, label, 1)
        if isinstance(record, str):
            rejected.reject(where, record)
            continue
        for column in USAGE_COLUMNS:
            columns[column].append(_text(record.get(column)))
        columns["_where"].append(where)
        if len(columns["_where"]) >= _BATCH_ROWS:
            flush()
    flush()
    return batches


def _shown(where: DataPath) -> tuple[str, str]:
    """``(file_key, name)`` of a usage file: how Spark names it, matched to
    how the user gave it (a local file listed by Spark as ``file:/x`` is
    shown ``file:///x``, as it is written)."""
    if isinstance(where, Path):
        return file_key(str(where.resolve())), str(where)
    name = where
    if name.startswith("file:/") and not name.startswith("file://"):
        name = "file://" + name[len("file:") :]
    return file_key(where), name


class ReadArgs(TypedDict, total=False):
    """What :func:`read_checked` and :func:`read_usage_counted` read: ``fmt``
    (a source's name, or ``auto``), ``options``, ``known`` (the configured
    clusters; rows of others are refused), ``since`` and ``until`` (the
    time range; ``None``: open)."""

    fmt: str
    options: ReadOptions | None
    known: Sequence[str] | None
    since: datetime | None
    until: datetime | None


def read_usage_counted(
    spark: SparkSession,
    paths: Sequence[DataPath],
    *,
    one_of_each: bool = True,
    **read: Unpack[ReadArgs],
) -> tuple[DataFrame, Rejections, int]:
    """The usable usage rows with ``since <= timestamp < until`` as a
    DataFrame (USAGE_SCHEMA), what was rejected, and how many rows are usable
    (counted in the same pass as the rejections: one scan of the input).

    ``paths`` are local paths or Hadoop URIs (``file:///``, ``hdfs://``,
    ``s3a://``; a URI directory is listed by Spark, recursively). Each file
    is read by its source (:mod:`quotaform.analytics.sources`): a source
    that reads in place (generic files) through its Spark half
    (:mod:`quotaform.analytics.spark.sources`), in parallel, where the files
    are; the others (Prometheus, JmxTool) parsed on the driver (a URI's
    text fetched through Spark first) and handed to Spark as Arrow batches,
    so the same code runs in local mode, on a cluster and over Spark Connect.
    Every row is checked once (rows of clusters not in ``known`` are rejected
    too); the checked rows are counted by reason in one pass, usable rows
    outside the time range counted as such, and the first rejected ones
    named ``file:row`` as the local engine names them. With
    ``one_of_each``, a (series, time) read more than once is kept once
    (counted in ``rejected.duplicates``, not in the usable rows: one more
    shuffle of every row); without, the rows are returned as read, for a
    caller that keeps one of each itself
    (:func:`~quotaform.analytics.spark.partitions.utilisation` does, and
    counts them). The returned
    DataFrame is cached when any input is text (unpersist it when done);
    Parquet alone is read again by each action.

    Raises:
        AnalyticsError: a path that does not exist or holds no usage file, a
            generic file without the usage columns.
    """
    checked_rows = read_checked(spark, paths, **read)
    rejected = checked_rows.rejected
    if checked_rows.rows is None:
        return spark.createDataFrame([], USAGE_SCHEMA), rejected, 0
    usable = _count_checked(checked_rows, rejected)
    checked_rows.name_rejected(rejected)
    usage = checked_rows.usable()
    if not one_of_each:
        return usage, rejected, usable
    usage, duplicates = _one_of_each(usage)
    rejected.duplicates += duplicates
    return usage, rejected, usable - duplicates


#: A checked row's kind of refusal (``_reason`` up to its colon; null: usable).
KIND = "_kind"
#: Whether a checked row is in the time range.
IN_RANGE = "_in_range"


def _kind_of(reason: str) -> Column:
    """A refusal's kind: the ``reason`` column up to its colon (null: usable)."""
    return F.split(reason, ":")[0]


@dataclass(frozen=True)
class CheckedRows:
    """Every usage row read and checked once, not yet counted.

    Attributes:
        rows: USAGE_SCHEMA plus ``_reason`` (null: usable) and
            :data:`IN_RANGE`; ``None`` when no input holds a row.
        inputs: where the rows came from (to name rejected rows).
        known: the configured clusters (rows of others were refused).
        rejected: the files read, and what their parsers refused.
    """

    rows: DataFrame | None
    inputs: _Inputs
    known: Sequence[str] | None
    rejected: Rejections

    def usable(self) -> DataFrame:
        """The usable rows in the time range (USAGE_SCHEMA)."""
        assert self.rows is not None
        usable = F.col("_reason").isNull() & F.col(IN_RANGE)
        return self.rows.where(usable).select(*USAGE_COLUMNS)

    def kinds(self) -> DataFrame:
        """USAGE_SCHEMA plus :data:`KIND` and :data:`IN_RANGE`: the rows to
        count and aggregate in one pass."""
        assert self.rows is not None
        return self.rows.select(*USAGE_COLUMNS, _kind_of("_reason").alias(KIND), IN_RANGE)

    def name_rejected(self, rejected: Rejections) -> None:
        """After the checked rows are counted into ``rejected``: count the
        rows the generic readers refused and name the first rejected rows
        ``file:row`` (the inputs read again, with their location, only when
        a row was rejected)."""
        _name_rejected(self.inputs, self.known, rejected)


def read_checked(
    spark: SparkSession,
    paths: Sequence[DataPath],
    *,
    fmt: str = AUTO,
    options: ReadOptions | None = None,
    known: Sequence[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> CheckedRows:
    """Every usage row of ``paths`` read by its source and checked once
    (:func:`read_usage_counted` says how), not counted: the caller counts
    the kinds in its own pass over the rows (:meth:`CheckedRows.kinds`) and
    names the rejected ones after (:meth:`CheckedRows.name_rejected`). The
    rows are cached when any input is text (unpersist them when done);
    Parquet alone is read again by each action.

    Raises:
        AnalyticsError: as :func:`read_usage_counted`.
    """
    options = options or ReadOptions()
    rejected = Rejections()
    inputs = _input_frames(spark, paths, fmt, options, rejected)
    if not inputs.frames:
        return CheckedRows(None, inputs, known, rejected)
    # Text (CSV, JSON Lines, staged Prometheus/JmxTool) is parsed once: the
    # checked rows are cached, without their location. Parquet alone is
    # scanned again instead: building the in-memory cache of 10M rows took
    # 13 s, a scan and check of them 2 s (benchmarks/README.md). The first
    # rejected rows are found again, located, only if any.
    rows = _checked_union(inputs.frames, known).drop(*LOCATION)
    rows = rows.withColumn(IN_RANGE, _window(since, until))
    if inputs.text:
        rows = rows.cache()
    return CheckedRows(rows, inputs, known, rejected)


@dataclass(frozen=True)
class _Inputs:
    """The usage inputs as DataFrames before the row checks: ``frames`` (in
    the staged layout: usage columns plus location), ``bad`` (rows a generic
    source rejected while reading, with ``_reason``), ``shown`` (each file's
    key to the name a rejected row is reported under), ``located`` (the
    generic files' row blocks, for row numbers), ``text`` (some input is
    text, parsed once and worth caching) and ``parquet_bytes`` (the inputs'
    size as Parquet holding as many rows: what sizes the partitions)."""

    frames: list[DataFrame]
    bad: list[DataFrame]
    shown: dict[str, str]
    located: list[DataFrame]
    text: bool
    parquet_bytes: float


def _input_frames(
    spark: SparkSession,
    paths: Sequence[DataPath],
    fmt: str,
    options: ReadOptions,
    rejected: Rejections,
) -> _Inputs:
    """Each usage file read by its source: generic files in place by Spark,
    the others parsed on the driver and staged as one Arrow-backed DataFrame
    (see :func:`read_usage_counted`). Files read are recorded in
    ``rejected``."""
    shown: dict[str, str] = {}
    in_place: list[str] = []
    parsed: list[pa.RecordBatch] = []
    size = 0.0
    for where, source, local, length in _usage_inputs(
        spark, paths, fmt, rejected, options.limits
    ):
        rejected.read_file(where, source.name)
        size += parquet_bytes(name_of(where), length)
        if source.spark is not None:
            key, name = _shown(where)
            shown[key] = name
            in_place.append(str(Path(where).resolve()) if isinstance(where, Path) else where)
            continue
        with _local_copy(spark, where, local) as path:
            records = source.records(path, options, rejected)
            parsed += _record_batches(records, rejected, label=str(where), local=path)
    generic = generic_frames(spark, in_place, rejected) if in_place else None
    frames = list(generic.frames) if generic else []
    if parsed:
        staged = spark.createDataFrame(pa.Table.from_batches(parsed, schema=STAGED_SCHEMA))
        frames.append(
            staged.select(
                *USAGE_COLUMNS,
                F.col("_where").alias("_file"),
                F.lit(None).cast("long").alias("_block"),
                F.lit(None).cast("long").alias("_id"),
            )
        )
    return _Inputs(
        frames=frames,
        bad=list(generic.bad) if generic else [],
        shown=shown,
        located=list(generic.located) if generic else [],
        text=bool(parsed) or any(not w.endswith(".parquet") for w in in_place),
        parquet_bytes=size,
    )


def _checked_union(frames: Sequence[DataFrame], known: Sequence[str] | None) -> DataFrame:
    """Every frame's rows :func:`checked`, as one DataFrame (with location)."""
    parts = [checked(f, known) for f in frames]
    merged = parts[0]
    for part in parts[1:]:
        merged = merged.unionByName(part)
    return merged


def _window(since: datetime | None, until: datetime | None) -> Column:
    """``since <= timestamp < until`` as a column (true when both are open)."""
    window = F.lit(True)
    if since is not None:
        window = window & (F.col("timestamp") >= F.lit(since))
    if until is not None:
        window = window & (F.col("timestamp") < F.lit(until))
    return window


def _count_checked(checked_rows: CheckedRows, rejected: Rejections) -> int:
    """Count the checked rows by kind in one pass (one Spark job) into
    ``rejected``, with the usable rows outside ``[since, until)``. Returns
    the usable rows in the time range."""
    counts = checked_rows.kinds().groupBy(KIND, IN_RANGE).count().collect()
    kinds = [(r[KIND], bool(r[IN_RANGE]), int(r["count"])) for r in counts]
    return count_kinds(kinds, rejected)


def count_kinds(counts: Iterable[tuple[str | None, bool, int]], rejected: Rejections) -> int:
    """Add ``(kind, in range, rows)`` counts of checked rows (kind ``None``:
    usable) to ``rejected``: refusals by kind, usable rows outside the time
    range. Returns the usable rows in the range."""
    usable = 0
    for kind, in_range, count in counts:
        if kind is not None:
            rejected.count += count
            rejected.by_reason[kind] += count
        elif in_range:
            usable += count
        else:
            rejected.outside_range += count
    return usable


def _name_rejected(inputs: _Inputs, known: Sequence[str] | None, rejected: Rejections) -> None:
    """Count the rows the generic readers refused into ``rejected`` and name
    the first rejected rows ``file:row`` (checked again with their location,
    only if any)."""
    failed = list(inputs.bad)
    if rejected.count and inputs.frames:
        failed.insert(0, _checked_union(inputs.frames, known).where(F.col("_reason").isNotNull()))
    for extra in inputs.bad:
        for row in extra.groupBy(_kind_of("_reason").alias("kind")).count().collect():
            rejected.count += int(row["count"])
            rejected.by_reason[str(row["kind"])] += int(row["count"])
    if not failed:
        return
    first = failed[0].select(*LOCATION, "_reason")
    for part in failed[1:]:
        first = first.unionByName(part.select(*LOCATION, "_reason"))
    examples = first.orderBy(*LOCATION).limit(EXAMPLES_KEPT - len(rejected.examples)).collect()
    names = row_numbers(inputs.located, [r.asDict() for r in examples], inputs.shown)
    for name, row in zip(names, examples, strict=True):
        rejected.examples.append(f"{name}: {row['_reason']}")


#: What identifies a usage row: one row per series and time (``schemas/usage.schema.json``).
_ROW_KEY = tuple(c for c in USAGE_COLUMNS if c != "value")


def _one_of_each(usage: DataFrame) -> tuple[DataFrame, int]:
    """One row per (series, timestamp), and how many rows repeated one: the
    largest value is kept (NaN only when every value is NaN), as the local
    engine keeps it."""
    repeated = (
        usage.groupBy(*_ROW_KEY)
        .count()
        .where(F.col("count") > 1)
        .agg(F.sum(F.col("count") - 1).alias("extra"))
        .first()
    )
    extra = int(repeated["extra"] or 0) if repeated is not None else 0
    if not extra:
        return usage, 0
    number = F.when(~F.isnan("value"), F.col("value"))
    kept = usage.groupBy(*_ROW_KEY).agg(F.coalesce(F.max(number), F.first("value")).alias("value"))
    return kept.select(*USAGE_COLUMNS), extra


def write_table(frame: DataFrame, path: DataPath) -> None:
    """Write ``frame`` as Parquet at ``path`` (a local path or a Hadoop URI; a
    directory of part files, one per partition: the computation stays
    parallel), replacing what is there."""
    if isinstance(path, Path) and path.exists():
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    frame.write.mode("overwrite").parquet(str(path))


def write_texts(spark: SparkSession, out: str, files: Mapping[str, str]) -> dict[str, str]:
    """Write small text files (the reports) under the URI ``out``; returns
    name -> the URI written.

    Through Hadoop's ``FileSystem`` where the session has a JVM (local mode,
    ``--master``, spark-submit): ``out/report.md`` is one file, as locally.
    Over Spark Connect the client has no file system of the cluster's, so
    each is written by Spark as a one-part text dataset
    (``out/report.md/part-00000-*.txt``).
    """
    written: dict[str, str] = {}
    jvm = None if _is_connect(spark) else getattr(spark, "_jvm", None)
    for name, text in files.items():
        target = f"{out.rstrip('/')}/{name}"
        if jvm is not None:
            hadoop_path = jvm.org.apache.hadoop.fs.Path(target)
            fs = hadoop_path.getFileSystem(spark._jsc.hadoopConfiguration())
            stream = fs.create(hadoop_path, True)
            try:
                stream.write(bytearray(text.encode("utf-8")))
            finally:
                stream.close()
        else:
            one = spark.createDataFrame([(text.rstrip("\n"),)], "value string").coalesce(1)
            one.write.mode("overwrite").option("lineSep", "\n").text(target)
        written[name] = target
    return written


def _is_connect(spark: Any) -> bool:
    """True for a Spark Connect session (no JVM on this side)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def in_range(frame: DataFrame, since: datetime | None, until: datetime | None) -> DataFrame:
    """Rows of ``frame`` with ``since <= timestamp < until``."""
    if since is None and until is None:
        return frame
    return frame.where(_window(since, until))


__all__ += ["in_range", "transforms"]
