"""The Spark half of the usage sources: generic files (Parquet, CSV, JSON
Lines) read by Spark where they are, in parallel, with their types
normalised by the rules :mod:`quotaform.analytics.sources.schema` applies to
Arrow batches, so both engines see the same rows:

* ``TIMESTAMP(NANOS)``, which Spark refuses (``PARQUET_TYPE_ILLEGAL``):
  read again as a long with ``spark.sql.legacy.parquet.nanosAsLong`` (set
  for the session, for this read: it changes nothing but such columns),
  then microseconds, truncated as Arrow truncates them;
* ``TIMESTAMP_NTZ`` (a Parquet timestamp without a zone): taken as UTC
  (the session's zone), said in a ``Note:``;
* ``INT96`` and zoned timestamps are read by Spark's own reader; text,
  integer and dictionary columns are cast by the checks
  (:func:`quotaform.analytics.spark.job.checked`).

Each row carries where it came from (:data:`LOCATION`): the file, the start
of its split and an id that is consecutive within a split, so a rejected
row is named ``file:row`` as the local engine names it
(:func:`row_numbers`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from quotaform.analytics.model import USAGE_COLUMNS
from quotaform.analytics.sources.generic import first_row, layout
from quotaform.analytics.usage import NAIVE_TIME_NOTE, Rejections
from quotaform.errors import AnalyticsError

__all__ = ["LOCATION", "GenericFrames", "file_key", "generic_frames", "row_numbers"]

#: Where a row came from: its file (as Spark names it), the byte offset its
#: split starts at, and an id consecutive within the split
#: (``monotonically_increasing_id``). Rows parsed on the driver carry their
#: ``file: series N sample M`` in ``_file`` and nulls.
LOCATION = ("_file", "_block", "_id")
#: Spark's switch that reads ``TIMESTAMP(NANOS)`` as a long instead of refusing it.
NANOS_AS_LONG = "spark.sql.legacy.parquet.nanosAsLong"


@dataclass(frozen=True)
class GenericFrames:
    """Generic files as DataFrames of the usage columns plus :data:`LOCATION`.

    Attributes:
        frames: the rows to check, one frame per layout read.
        bad: rows no reader could parse (a JSON line that is not JSON):
            :data:`LOCATION` and ``_reason``.
        located: every row read (unparsable ones included), :data:`LOCATION`
            only: what :func:`row_numbers` counts.
    """

    frames: list[DataFrame]
    bad: list[DataFrame]
    located: list[DataFrame]


def _location() -> list[Column]:
    return [
        F.col("_metadata.file_path").alias("_file"),
        F.col("_metadata.file_block_start").alias("_block"),
        F.monotonically_increasing_id().alias("_id"),
    ]


def _with_columns(frame: DataFrame, files: Sequence[str]) -> DataFrame:
    missing = [c for c in USAGE_COLUMNS if c not in frame.columns]
    if missing:
        raise AnalyticsError(
            f"{', '.join(files)}: missing column(s) {', '.join(missing)} "
            f"(expected {', '.join(USAGE_COLUMNS)})"
        )
    return frame


def _parquet(spark: SparkSession, files: Sequence[str], rejected: Rejections) -> DataFrame:
    nanos = naive_nanos = False
    # Off first, whatever an earlier read of the session left: a long read
    # with it on could be a nanosecond time or a plain number.
    spark.conf.set(NANOS_AS_LONG, "false")
    try:
        frame = spark.read.parquet(*files)
        frame.schema  # noqa: B018 - analysed now (Spark Connect analyses lazily)
    except Exception as exc:  # AnalysisException: PARQUET_TYPE_ILLEGAL
        if "TIMESTAMP(NANOS" not in str(exc):
            raise
        spark.conf.set(NANOS_AS_LONG, "true")
        nanos, naive_nanos = True, "NANOS,false" in str(exc)
        frame = spark.read.parquet(*files)
    frame = _with_columns(frame, files)
    kind = dict(frame.dtypes)["timestamp"]
    timestamp = F.col("timestamp")
    if nanos and kind == "bigint":
        # Truncated to microseconds, as Arrow's cast truncates them.
        timestamp = F.timestamp_micros(F.expr("`timestamp` div 1000"))
    if kind == "timestamp_ntz" or naive_nanos:
        rejected.notes[NAIVE_TIME_NOTE] += len(files)
        timestamp = timestamp.cast("timestamp")  # the session's zone: UTC
    columns = [timestamp.alias(c) if c == "timestamp" else F.col(c) for c in USAGE_COLUMNS]
    return frame.select(*columns, *_location())


def _csv(spark: SparkSession, files: Sequence[str]) -> DataFrame:
    frame = spark.read.option("header", True).option("mode", "PERMISSIVE").csv(list(files))
    return _with_columns(frame, files).select(*USAGE_COLUMNS, *_location())


def _json(spark: SparkSession, files: Sequence[str]) -> tuple[DataFrame, DataFrame | None]:
    frame = (
        spark.read.option("allowNonNumericNumbers", True)
        .option("mode", "PERMISSIVE")
        .option("primitivesAsString", True)
        .json(list(files))
    )
    for column in USAGE_COLUMNS:
        if column not in frame.columns:
            frame = frame.withColumn(column, F.lit(None).cast("string"))
    corrupt = "_corrupt_record" in frame.columns
    frame = frame.select(
        *USAGE_COLUMNS,
        *([F.col("_corrupt_record")] if corrupt else []),
        *_location(),
    )
    if not corrupt:
        return frame, None
    bad = frame.where(F.col("_corrupt_record").isNotNull()).select(
        *LOCATION, F.lit("line: not JSON").alias("_reason")
    )
    return frame.where(F.col("_corrupt_record").isNull()).drop("_corrupt_record"), bad


def generic_frames(
    spark: SparkSession, files: Sequence[str], rejected: Rejections
) -> GenericFrames:
    """Generic usage files (local paths made absolute, or Hadoop URIs) as
    DataFrames of the usage columns, normalised, with :data:`LOCATION`.

    Raises:
        AnalyticsError: a Parquet or CSV file without the usage columns.
    """
    by_layout: dict[str, list[str]] = {}
    for where in files:
        by_layout.setdefault(layout(where), []).append(where)
    frames: list[DataFrame] = []
    bad: list[DataFrame] = []
    if by_layout.get("parquet"):
        frames.append(_parquet(spark, by_layout["parquet"], rejected))
    if by_layout.get("csv"):
        frames.append(_csv(spark, by_layout["csv"]))
    if by_layout.get("json"):
        good, corrupt = _json(spark, by_layout["json"])
        frames.append(good)
        if corrupt is not None:
            bad.append(corrupt)
    located = [f.select(*LOCATION) for f in frames] + [b.select(*LOCATION) for b in bad]
    return GenericFrames(frames, bad, located)


def file_key(where: str) -> str:
    """A file as Spark and quotaform both name it, for matching: a local
    file's absolute path (``file:/x``, ``file:///x`` and ``/x`` alike,
    percent-decoded), any other URI as it is."""
    text = unquote(where)
    if text.startswith("file:"):
        return "/" + text[len("file:") :].lstrip("/")
    return text


def row_numbers(
    located: Iterable[DataFrame],
    rows: Sequence[Mapping[str, object]],
    shown: Mapping[str, str],
) -> list[str]:
    """``file:row`` of each of ``rows`` (their :data:`LOCATION`), counted as
    the local engine counts them (:func:`quotaform.analytics.sources.generic.first_row`):
    the rows of the earlier splits of the file, plus the row's place in its
    split. One small aggregation over the files named (run only when rows
    were rejected).

    Args:
        located: every row read, :data:`LOCATION` only.
        rows: the rows to name (rows parsed on the driver are named by their
            ``_file`` as it is).
        shown: :func:`file_key` -> the file as the user gave it.
    """
    files = sorted({str(r["_file"]) for r in rows if r["_block"] is not None})
    splits: dict[str, list[tuple[int, int, int]]] = {}
    if files:
        frames = list(located)
        every = frames[0]
        for frame in frames[1:]:
            every = every.unionByName(frame)
        for split in (
            every.where(F.col("_file").isin(files))
            .groupBy("_file", "_block")
            .agg(F.min("_id").alias("first"), F.count("*").alias("rows"))
            .collect()
        ):
            splits.setdefault(str(split["_file"]), []).append(
                (int(split["_block"]), int(split["first"]), int(split["rows"]))
            )
    named = []
    for row in rows:
        where = str(row["_file"])
        if row["_block"] is None:
            named.append(where)
            continue
        before = 0
        number = None
        for block, first, count in sorted(splits.get(where, [])):
            if block == row["_block"]:
                number = before + int(row["_id"]) - first  # type: ignore[call-overload]
                break
            before += count
        name = shown.get(file_key(where), where)
        named.append(f"{name}:{'?' if number is None else number + first_row(layout(where))}")
    return named
