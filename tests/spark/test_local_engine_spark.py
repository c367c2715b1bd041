"""The local engine (Arrow, no JVM) equals the Spark engine row for row: on
generated usage (every level, ip groups, NaN samples, throttle times, several
brokers, rejected rows and an unconfigured cluster) and on every fixture
format, through ``run_analysis`` as ``quotaform analyze`` runs it."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from quotaform.analytics import engine as py_engine
from quotaform.analytics.configs import QuotaConfig, read_snapshot
from quotaform.analytics.jobs import AnalyzeRequest, Command, Engine, run_analysis
from quotaform.analytics.local import aggregate
from quotaform.analytics.local.reader import read_coded_usage
from quotaform.analytics.model import USAGE_COLUMNS, UTILISATION_COLUMNS
from quotaform.analytics.sources.base import ReadOptions
from quotaform.analytics.sources.registry import read_usage
from quotaform.analytics.spark import job, partitions
from quotaform.analytics.spark.schemas import USAGE_SCHEMA, UTILISATION_SCHEMA
from quotaform.kafka.resolution import QuotaIndex

from .generated import generated

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "analytics"


def _parquet(rows: list[Any], path: Path) -> Path:
    """The generated rows as a usage Parquet file, with a few bad rows and
    rows of a cluster that is not configured."""
    records = [{c: getattr(r, c) for c in USAGE_COLUMNS} for r in rows]
    good = dict(records[0])
    records[5:5] = [
        {**good, "cluster": ""},
        {**good, "metric": "bytes-in"},
        {**good, "timestamp": None},
        {**good, "value": None},
        {**good, "ip": "192.0.2.99"},
        {**good, "cluster": "elsewhere"},
    ]
    text = pa.string()
    schema = pa.schema(
        [(c, text) for c in USAGE_COLUMNS[:2]]
        + [("timestamp", pa.timestamp("us", tz="UTC"))]
        + [(c, text) for c in USAGE_COLUMNS[3:7]]
        + [("value", pa.float64())]
    )
    table = pa.Table.from_pylist(records, schema=schema)
    pq.write_table(table, path, row_group_size=97)
    return path


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_local_engine_equals_spark_on_generated_usage(
    spark: SparkSession, tmp_path: Path, seed: int
) -> None:
    before, _after, rows = generated(seed)
    path = _parquet(rows, tmp_path / "usage.parquet")
    usage, rejected = read_coded_usage([path], clusters=["c"])
    local = aggregate.utilisation(usage, {"c": QuotaIndex(before)}).table
    assert rejected.count == 6 and usage.rows == len(rows)
    assert any(r["ip"] for r in local.to_pylist()) and any(r["censored"] for r in local.to_pylist())

    frame, spark_rejected, _ = job.read_usage_counted(spark, [path], known=["c"])
    assert (spark_rejected.count, dict(spark_rejected.by_reason)) == (
        rejected.count,
        dict(rejected.by_reason),
    )
    spark_util = partitions.table_of(
        partitions.utilisation(frame, configs={"c": QuotaIndex(before)})
    )
    local_frame = spark.createDataFrame(
        [tuple(r[c] for c in UTILISATION_COLUMNS) for r in local.to_pylist()],
        UTILISATION_SCHEMA,
    )
    assertDataFrameEqual(spark_util, local_frame, rtol=1e-9)


def _rows(path: Path) -> list[dict[str, Any]]:
    parts = [path] if path.is_file() else sorted(path.glob("*.parquet"))
    rows = [r for part in parts for r in pq.read_table(part).to_pylist()]
    key = lambda r: tuple(str(r[c]) for c in UTILISATION_COLUMNS[:6])  # noqa: E731
    return sorted(rows, key=key)


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9)
    return bool(a == b)


@pytest.mark.parametrize(
    ("files", "options"),
    [
        (["usage.csv"], {}),
        (["usage.jsonl"], {}),
        (["prometheus.json"], {}),
        (["jmxtool.csv"], {"read": ReadOptions(cluster="prod-eu", broker="1")}),
    ],
)
def test_the_local_engine_equals_spark_on_every_fixture(
    spark: SparkSession, tmp_path: Path, files: list[str], options: dict[str, ReadOptions]
) -> None:
    configs = read_snapshot(FIXTURES / "snapshot.jsonl")
    tables = {}
    for engine in (Engine.python, Engine.spark):
        result = run_analysis(
            AnalyzeRequest(
                command=Command.utilisation,
                usage=tuple(FIXTURES / f for f in files),
                out=tmp_path / engine.value,
                engine=engine,
                master="local[1]",
                **options,  # type: ignore[arg-type]
            ),
            configs,
        )
        tables[engine] = (
            _rows(result.table),
            result.usage_rows,
            result.rejected.count,
            result.extra,
        )
    local, spark_rows = tables[Engine.python], tables[Engine.spark]
    assert local[1:] == spark_rows[1:]
    assert local[0] and len(local[0]) == len(spark_rows[0])
    for a, b in zip(local[0], spark_rows[0], strict=True):
        assert all(_close(a[c], b[c]) for c in UTILISATION_COLUMNS), (a, b)


def test_spark_sums_a_group_across_brokers_as_the_python_engine_to_the_bit(
    spark: SparkSession,
) -> None:
    # Quotas are enforced per broker: the cases of tests/unit/test_broker_sums.py
    # (where the local engine equals the Python engine exactly) through the
    # Spark transform, in one job: the Prometheus steps of three instances as
    # cluster "prom", samples taken at other times on each broker as "prod-eu",
    # on 10 s buckets.
    prometheus, _ = read_usage([FIXTURES / "prometheus_brokers.json"])
    collected, _ = read_usage([FIXTURES / "usage_brokers.jsonl"])
    rows = [dataclasses.replace(r, cluster="prom") for r in prometheus] + collected
    (snapshot,) = read_snapshot(FIXTURES / "snapshot.jsonl")
    configs = [snapshot, QuotaConfig("prom", snapshot.entries, "fixture")]
    want = py_engine.utilisation(rows, {c.cluster: c.index for c in configs}, align_s=10.0)
    frame = spark.createDataFrame(
        [tuple(getattr(r, c) for c in USAGE_COLUMNS) for r in rows], USAGE_SCHEMA
    )
    got = partitions.table_of(
        partitions.utilisation(frame, configs={c.cluster: c.index for c in configs}, align_s=10.0)
    )
    key = lambda r: tuple(str(r[c]) for c in UTILISATION_COLUMNS[:6])  # noqa: E731
    assert sorted((r.asDict() for r in got.collect()), key=key) == sorted(want, key=key)
    alice = {(r["cluster"], r["broker"]): r for r in want if r["user"] == "alice"}
    assert len(alice) == 6 and {r["brokers_observed"] for r in alice.values()} == {3}
    assert {r["cluster_ceiling"] for r in alice.values()} == {3 * 1024 * 1024.0}
    # 10 s buckets: (200 + 1500 + 20), (600 + 4000 + 50); steps missed by b3 sum two.
    assert alice[("prod-eu", "1")]["cluster_samples"] == 2
    assert alice[("prod-eu", "1")]["cluster_max"] == 4650.0
    assert alice[("prom", "b1:9999")]["cluster_samples"] == 4
    assert alice[("prom", "b1:9999")]["cluster_p50"] == 810000.0
    # controller_mutation_rate: the active controller alone holds the quota.
    adm = [(r["brokers_observed"], r["cluster_ceiling"], r["cluster_max"]) for r in want
           if r["client_id"] == "adm"]  # fmt: skip
    assert adm == [(2, 2.0, 3.0 + 0.25)] * 2  # buckets: 1.0 + 0.5, 3.0 + 0.25
    one = [r for r in want if r["brokers_observed"] == 1]
    assert one and all(r["cluster_ceiling"] == r["quota_value"] for r in one)


def test_the_spark_table_and_counts_do_not_depend_on_the_partitions(
    spark: SparkSession, tmp_path: Path
) -> None:
    # One partition holding every group, and more partitions than groups of
    # some clusters (empty partitions, partitions of rejected rows only):
    # the same table as the local engine's, the same counts by kind.
    before, _after, rows = generated(2)
    path = _parquet(rows, tmp_path / "usage.parquet")
    usage, rejected = read_coded_usage([path], clusters=["c"])
    local = aggregate.utilisation(usage, {"c": QuotaIndex(before)}).table
    want = spark.createDataFrame(
        [tuple(r[c] for c in UTILISATION_COLUMNS) for r in local.to_pylist()], UTILISATION_SCHEMA
    )
    checked = job.read_checked(spark, [path], known=["c"])
    assert partitions.partitions_for(checked.inputs.parquet_bytes, 1) == 1
    for count in (1, 64):
        done = partitions.utilisation(
            checked.kinds(), configs={"c": QuotaIndex(before)}, partitions=count
        ).localCheckpoint()
        assert done.rdd.getNumPartitions() == count
        assertDataFrameEqual(partitions.table_of(done), want, rtol=1e-9)
        counts = partitions.counts_of(done)
        by_kind: dict[str, int] = {}
        for kind, _in_range, n in counts.kinds:
            by_kind[kind or "usable"] = by_kind.get(kind or "usable", 0) + n
        assert by_kind == {"usable": usage.rows + rejected.duplicates, **rejected.by_reason}
        assert counts.repeats == rejected.duplicates
