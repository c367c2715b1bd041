"""The utilisation table on Spark: the usage rows shuffled once by group, each
partition aggregated by the local engine's own code.

Every row of a group over every broker (``cluster``, ``user``,
``client_id``, ``ip``, ``quota_key``) goes to one partition, so a partition
holds whole groups: its rows are coded by
:func:`~quotaform.analytics.local.reader.code_checked` and aggregated by
:func:`quotaform.analytics.local.aggregate.utilisation` (a (series, time)
kept once, the exact quantiles, the sums across brokers in the rule's
order, the quotas resolved once per distinct look-up), in a Python worker
next to the partition (``mapInArrow``). The rules are written once, for
both engines, and the figures are the local engine's to the bit.

Before (issue 33), the same figures were three Spark aggregations over every
row (per (series, time), per bucket, per broker) with ``collect_list``
arrays: at 10M rows on ``local[2]`` they took most of 50 s and spilled
gigabytes (``benchmarks/README.md``).

The executors' Python needs ``quotaform`` importable (with numpy and
pyarrow, which Spark's Arrow functions need anyway): ``PYSPARK_PYTHON`` of
the sandbox's cluster and Connect server is quotaform's own interpreter, and
a local session's workers run the driver's (:mod:`quotaform.analytics.spark.session`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from quotaform.analytics.local import aggregate
from quotaform.analytics.local.reader import CodedUsage, code_checked
from quotaform.analytics.model import (
    CLUSTER_GROUP_COLUMNS,
    DEFAULT_ALIGN_S,
    GROUP_COLUMNS,
    UTILISATION_COLUMNS,
)
from quotaform.analytics.results import MAX_POINTS, PLOTTED, UsageSeries, series_of
from quotaform.analytics.spark.job import IN_RANGE, KIND
from quotaform.analytics.spark.schemas import UTILISATION_SCHEMA
from quotaform.kafka.keys import METRICS
from quotaform.kafka.resolution import QuotaIndex

__all__ = [
    "PARQUET_BYTES_PER_PARTITION",
    "Counts",
    "counts_of",
    "partitions_for",
    "plotted",
    "table_of",
    "utilisation",
]

#: Usage input per partition of the shuffle, as Parquet bytes (text counts
#: as its Parquet equivalent): about 1.5M generated usage rows, whose coded
#: arrays and sorts take a few hundred MiB in one Python worker.
PARQUET_BYTES_PER_PARTITION = 16 * 1024 * 1024


def partitions_for(parquet_bytes: float, at_least: int) -> int:
    """The shuffle's partitions for this much usage input (bytes as Parquet):
    one per :data:`PARQUET_BYTES_PER_PARTITION`, and ``at_least`` (the
    session's ``spark.sql.shuffle.partitions``)."""
    return max(at_least, math.ceil(parquet_bytes / PARQUET_BYTES_PER_PARTITION))


#: The columns of the rows each partition adds besides its table rows: a
#: count (``_count``) of its checked rows of one kind (``_kind``, null:
#: usable) in or out of the time range (``_in_range``), or (``_repeats``)
#: how many of its usable rows repeated a (series, time). Null on the table's
#: rows.
_COUNTED = (
    (KIND, StringType(), pa.string()),
    (IN_RANGE, BooleanType(), pa.bool_()),
    ("_count", LongType(), pa.int64()),
    ("_repeats", LongType(), pa.int64()),
)
#: On the first :data:`~quotaform.analytics.results.PLOTTED` table rows of a
#: partition in the utilisation's ranking: their samples, ``(t, v)`` in
#: time order (at most :data:`~quotaform.analytics.results.MAX_POINTS`).
#: The whole table's first rows are among them (the ranking is a total
#: order), so the plotted series need no second read of the usage.
_POINTS = "_points"
_POINT_ARROW = pa.list_(pa.struct([("t", pa.timestamp("us", tz="UTC")), ("v", pa.float64())]))
_POINT_SPARK = ArrayType(
    StructType([StructField("t", TimestampType(), True), StructField("v", DoubleType(), True)])
)
_OUT_SCHEMA = StructType(
    [
        *UTILISATION_SCHEMA.fields,
        *(StructField(n, t, True) for n, t, _ in _COUNTED),
        StructField(_POINTS, _POINT_SPARK, True),
    ]
)
_OUT_ARROW = pa.schema(
    [
        *aggregate.arrow_schema(UTILISATION_COLUMNS),
        *(pa.field(n, a) for n, _, a in _COUNTED),
        pa.field(_POINTS, _POINT_ARROW),
    ]
)


def _quota_key() -> Column:
    """The quota key a usage row's metric measures (usage or throttle time)."""
    pairs = [F.lit(x) for metric, (key, _) in METRICS.items() for x in (metric, key)]
    return F.create_map(*pairs)[F.col("metric")]


def utilisation(
    checked: DataFrame,
    *,
    configs: Mapping[str, QuotaIndex],
    align_s: float = DEFAULT_ALIGN_S,
    partitions: int | None = None,
) -> DataFrame:
    """The utilisation table of the usable rows of ``checked`` in the time
    range, and the counts of its rows, in one pass over them.

    Returns the table's rows (:data:`~quotaform.analytics.model.UTILISATION_COLUMNS`,
    one per observed (cluster, broker, group, key), as
    :func:`quotaform.analytics.local.aggregate.utilisation` computes them)
    and, from each partition, rows that count its checked rows by kind and
    range and its repeated (series, time) rows. Checkpoint it, then read
    :func:`table_of` and :func:`counts_of`: each action computes it again.

    Args:
        checked: every checked row: USAGE_SCHEMA with ``_kind`` (why it
            cannot be used, up to the colon; null: usable) and ``_in_range``
            (:meth:`quotaform.analytics.spark.job.CheckedRows.kinds`), the
            usable ones of clusters in ``configs``; or usable rows only
            (USAGE_SCHEMA: every row counted usable and in range).
        configs: cluster -> its quota configuration (pickled to the workers).
        align_s: the cluster-wide sums' bucket, seconds.
        partitions: the shuffle's partitions (:func:`partitions_for`); by
            default the session's ``spark.sql.shuffle.partitions``, which
            adaptive execution may coalesce.

    Raises:
        ValueError: ``align_s`` is not a positive duration (when computed:
            the workers raise it).
    """
    if KIND not in checked.columns:  # usable rows only (the engine tests' frames)
        checked = checked.withColumn(KIND, F.lit(None).cast("string"))
        checked = checked.withColumn(IN_RANGE, F.lit(True))
    keys = [F.col(c) for c in CLUSTER_GROUP_COLUMNS if c not in ("ip", "quota_key")]
    # The one shuffle, by the group over every broker.
    by_group = [*keys, F.coalesce(F.col("ip"), F.lit("")), _quota_key()]
    parted = (
        checked.repartition(partitions, *by_group) if partitions else checked.repartition(*by_group)
    )
    work = functools.partial(_partition, configs=dict(configs), align_s=align_s)
    return parted.mapInArrow(work, _OUT_SCHEMA)


def table_of(frame: DataFrame) -> DataFrame:
    """The table rows of :func:`utilisation`'s result (UTILISATION_COLUMNS)."""
    counted = F.col("_count").isNull() & F.col("_repeats").isNull()  # the table's rows
    return frame.where(counted).select(*UTILISATION_COLUMNS)


@dataclass(frozen=True)
class Counts:
    """The counts of :func:`utilisation`'s pass: ``kinds`` as
    ``(kind or None, in range, rows)`` and ``repeats`` (usable rows that
    repeated a (series, time), left out of the table)."""

    kinds: list[tuple[str | None, bool, int]]
    repeats: int


def counts_of(frame: DataFrame) -> Counts:
    """The counts of :func:`utilisation`'s result, over every partition (one
    small Spark job)."""
    rows = (
        frame.where(F.col("_count").isNotNull() | F.col("_repeats").isNotNull())
        .groupBy(KIND, IN_RANGE)
        .agg(F.sum("_count").alias("count"), F.sum("_repeats").alias("repeats"))
        .collect()
    )
    kinds = [(r[KIND], bool(r[IN_RANGE]), int(r["count"])) for r in rows if r["count"]]
    return Counts(kinds=kinds, repeats=sum(int(r["repeats"] or 0) for r in rows))


def _partition(
    batches: Iterable[pa.RecordBatch], *, configs: Mapping[str, QuotaIndex], align_s: float
) -> Iterator[pa.RecordBatch]:
    """One partition's checked rows (whole groups) -> its utilisation rows,
    its counts by kind and range, and its repeats. Runs in a Python worker."""
    given = [b for b in batches if b.num_rows]
    if not given:
        return
    table = pa.Table.from_batches(given)
    counted = table.group_by([KIND, IN_RANGE]).aggregate([([], "count_all")])
    yield pa.RecordBatch.from_pylist(
        [
            {KIND: kind, IN_RANGE: in_range, "_count": count}
            for kind, in_range, count in zip(
                *(counted.column(c).to_pylist() for c in (KIND, IN_RANGE, "count_all")),
                strict=True,
            )
        ],
        schema=_OUT_ARROW,
    )
    usable = pc.and_(pc.is_null(table.column(KIND)), table.column(IN_RANGE))
    rows = table.filter(usable).drop_columns([KIND, IN_RANGE])
    if not rows.num_rows:
        return
    usage, repeats = code_checked(rows.combine_chunks().to_batches(), configs)
    util = aggregate.utilisation(usage, configs, align_s=align_s)
    table = util.table
    nulls = {n: pa.nulls(table.num_rows, a) for n, _, a in _COUNTED}
    columns = {c: table.column(c) for c in UTILISATION_COLUMNS}
    yield from pa.Table.from_pydict(
        {**columns, **nulls, _POINTS: _plotted(usage, util)}, schema=_OUT_ARROW
    ).to_batches()
    yield pa.RecordBatch.from_pylist([{"_repeats": repeats}], schema=_OUT_ARROW)


def _plotted(usage: CodedUsage, util: aggregate.Utilisation) -> pa.Array:
    """:data:`_POINTS` of every table row: the samples of the partition's
    first plotted rows, null on the others."""
    table = util.table
    ranked = aggregate.ranked_order(table)[:PLOTTED].tolist()
    samples = table.column("samples")
    picked = [i for i in ranked if samples[i].as_py()]
    points = aggregate.sample_points(usage, [int(util.group[i]) for i in picked])
    column: list[list[dict[str, Any]] | None] = [None] * table.num_rows
    for position, row in enumerate(picked):
        kept = sorted(points.get(position, []))[:MAX_POINTS]
        column[row] = [{"t": t, "v": v} for t, v in kept]
    return pa.array(column, _POINT_ARROW)


def plotted(frame: DataFrame, top: Sequence[Mapping[str, Any]]) -> list[UsageSeries]:
    """The plotted series of the first rows of the ranked table ``top``
    (their first :data:`~quotaform.analytics.results.PLOTTED` with samples)
    from :func:`utilisation`'s result: the points its partitions kept (one
    small Spark job, no read of the usage)."""
    wanted = [r for r in top[:PLOTTED] if r["samples"]]
    if not wanted:
        return []
    kept = frame.where(F.col(_POINTS).isNotNull()).select(*GROUP_COLUMNS, _POINTS).collect()
    by_group = {tuple(r[c] for c in GROUP_COLUMNS): r[_POINTS] for r in kept}
    points: dict[int, list[tuple[datetime, float]]] = {}
    for i, row in enumerate(wanted):
        found = by_group.get(tuple(row[c] for c in GROUP_COLUMNS)) or []
        points[i] = [(p["t"], p["v"]) for p in found]
    return series_of(wanted, points)
