"""Issue 32's first-use defects on the Spark engine: rows all outside
``--since``/``--until`` say so, and a rejected row is named ``file:row`` as
the local engine names it (was ``file:///...usage.csv row 108`` against
``usage.csv:110``), also when Spark splits a file into several partitions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from quotaform.analytics.configs import read_snapshot
from quotaform.analytics.jobs import AnalyzeRequest, Command, Engine, run_analysis
from quotaform.analytics.local.reader import read_coded_usage
from quotaform.analytics.model import USAGE_COLUMNS
from quotaform.analytics.spark import job
from quotaform.errors import AnalyticsError

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "analytics"
T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)


def _records(rows: int) -> list[dict[str, object]]:
    return [
        {
            "cluster": "prod-eu",
            "broker": "1",
            "timestamp": (T0 + timedelta(seconds=15 * i)).isoformat().replace("+00:00", "Z"),
            "metric": "produce-byte-rate",
            "user": "alice",
            "client_id": "ingest",
            "ip": None,
            "value": 1000.0 + i,
        }
        for i in range(rows)
    ]


@pytest.fixture
def small_splits(spark: SparkSession) -> Iterator[None]:
    """Spark splits even a small file into several partitions."""
    key = "spark.sql.files.maxPartitionBytes"
    before = spark.conf.get(key)
    spark.conf.set(key, "2048")
    yield
    spark.conf.set(key, before)


@pytest.mark.usefixtures("small_splits")
def test_a_rejected_row_is_named_file_and_row_as_the_local_engine_names_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    records = _records(150)
    records[107]["timestamp"] = "yesterday"  # CSV line 109 (the header is line 1)
    records[140]["metric"] = "bytes-in"  # CSV line 142
    csv = tmp_path / "usage.csv"
    pd.DataFrame(records)[list(USAGE_COLUMNS)].to_csv(csv, index=False)
    jsonl = tmp_path / "usage.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    parquet = tmp_path / "usage.parquet"
    frame = pd.DataFrame(records)[list(USAGE_COLUMNS)]
    frame.to_parquet(parquet, row_group_size=20)
    for path, want in (
        (csv, [f"{csv}:109", f"{csv}:142"]),
        (jsonl, [f"{jsonl}:108", f"{jsonl}:141"]),
        (parquet, [f"{parquet}:108", f"{parquet}:141"]),
    ):
        _, local = read_coded_usage([path], clusters=["prod-eu"])
        _, remote, _ = job.read_usage_counted(spark, [path], known=["prod-eu"])
        assert local.count == remote.count == 2
        assert [e.split(": ")[0] for e in local.examples] == want
        assert [e.split(": ")[0] for e in remote.examples] == want, remote.examples
        # The same field at fault, in the same words up to the value's quoting.
        assert [e.split(": ")[1] for e in remote.examples] == ["timestamp", "metric"]


def test_rows_all_outside_the_time_range_say_so_on_spark_too(tmp_path: Path) -> None:
    # Was, on Spark: "no quota usage series in the usage: no series at all. The
    # exporter rules export no client-quota metrics (Strimzi's ...)".
    path = tmp_path / "usage.parquet"
    pd.DataFrame(_records(10))[list(USAGE_COLUMNS)].to_parquet(path)
    configs = read_snapshot(FIXTURES / "snapshot.jsonl")
    for engine in (Engine.python, Engine.spark):
        request = AnalyzeRequest(
            Command.utilisation,
            tmp_path / f"out-{engine.value}",
            usage=(path,),
            since=datetime(2026, 11, 24, tzinfo=UTC),
            engine=engine,
            master="local[1]" if engine is Engine.spark else None,
        )
        with pytest.raises(AnalyticsError) as caught:
            run_analysis(request, configs)
        assert str(caught.value) == (
            "no usable usage row in the time range (--since / --until): all 10 usable "
            "row(s) are outside it"
        ), engine
