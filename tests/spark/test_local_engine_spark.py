"""The local engine (Arrow, no JVM) equals the Spark engine row for row: on
generated usage (every level, ip groups, NaN samples, throttle times, several
brokers, rejected rows and an unconfigured cluster) and on every fixture
format, through ``run_analysis`` as ``quotaform analyze`` runs it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from quotaform.analytics.configs import QuotaConfig, read_snapshot
from quotaform.analytics.jobs import AnalyzeRequest, Command, Engine, run_analysis
from quotaform.analytics.local import aggregate
from quotaform.analytics.local.reader import read_coded_usage
from quotaform.analytics.model import USAGE_COLUMNS, UTILISATION_COLUMNS
from quotaform.analytics.spark import job, transforms
from quotaform.analytics.spark.schemas import UTILISATION_SCHEMA
from quotaform.kafka.resolution import QuotaIndex

from .generated import generated

pytestmark = pytest.mark.spark

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
    config = job.config_frame(spark, [QuotaConfig("c", before, "generated")])
    spark_util = transforms.utilisation(frame, config=config).select(*UTILISATION_COLUMNS)
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
        (["jmxtool.csv"], {"cluster": "prod-eu", "broker": "1"}),
    ],
)
def test_the_local_engine_equals_spark_on_every_fixture(
    spark: SparkSession, tmp_path: Path, files: list[str], options: dict[str, str]
) -> None:
    configs = read_snapshot(FIXTURES / "snapshot.jsonl")
    tables = {}
    for engine in (Engine.python, Engine.spark):
        result = run_analysis(
            AnalyzeRequest(
                command=Command.utilisation,
                configs=configs,
                usage=[FIXTURES / f for f in files],
                out=tmp_path / engine.value,
                engine=engine,
                master="local[1]",
                **options,  # type: ignore[arg-type]
            )
        )
        tables[engine] = (_rows(result.table), result.usage_rows, result.rejected.count)
    local, spark_rows = tables[Engine.python], tables[Engine.spark]
    assert local[1:] == spark_rows[1:]
    assert local[0] and len(local[0]) == len(spark_rows[0])
    for a, b in zip(local[0], spark_rows[0], strict=True):
        assert all(_close(a[c], b[c]) for c in UTILISATION_COLUMNS), (a, b)
