"""The Spark engine reads real exporter setups as the local engine does:
duplicates once, listener rates skipped in the same words, non-query_range
JSON left out of directories, one table layout from both engines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from quotaform.analytics.local.reader import read_coded_usage
from quotaform.analytics.spark import job

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "analytics"
T0 = 1795428000


def _listener_answer() -> dict[str, object]:
    name = "kafka_server_socket_server_metrics_connection_accept_rate"
    base = {"instance": "b1:9999", "cluster": "prod-eu", "__name__": name}
    points = [[T0, "1"], [T0 + 15, "2"]]
    return {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {"metric": {**base, "ip": "127.0.0.1"}, "values": points},
                {"metric": {**base, "listener": "PLAINTEXT"}, "values": points},
            ],
        },
    }


def test_spark_counts_duplicates_and_skips_like_the_local_engine(
    spark: SparkSession, tmp_path: Path
) -> None:
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "copy.json").write_text((FIXTURES / "prometheus.json").read_text(), "utf-8")
    (folder / "listeners.json").write_text(json.dumps(_listener_answer()), "utf-8")
    (folder / "summary.json").write_text('{"rows": 1}\n', "utf-8")
    paths = [FIXTURES / "prometheus.json", folder]
    frame, rejected, usable = job.read_usage_counted(spark, paths, known=["prod-eu"])
    usage, local = read_coded_usage(paths, clusters=["prod-eu"])
    assert frame.count() == usable == usage.rows
    assert rejected.duplicates == local.duplicates > 0
    assert dict(rejected.skipped) == dict(local.skipped)
    assert (rejected.count, dict(rejected.by_reason)) == (local.count, dict(local.by_reason))


def test_both_engines_write_the_table_the_same_way(jsonl_utilisation: dict[str, Path]) -> None:
    # utilisation of usage.jsonl from the CLI on each engine (run once for the
    # Spark tests: tests/spark/conftest.py).
    layouts = {}
    for engine in ("spark", "python"):
        table = jsonl_utilisation[engine] / "utilisation.parquet"
        assert table.is_dir() and (table / "_SUCCESS").is_file()
        layouts[engine] = sorted(p.suffix for p in table.iterdir() if not p.name.startswith("."))
    assert set(layouts["spark"]) == set(layouts["python"]) == {"", ".parquet"}
