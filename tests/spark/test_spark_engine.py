"""The Spark engine equals the Python engine (explain's resolution) on every
row, on generated data covering every level, key, ip, shared groups,
unlimited, and groups that split or merge; it reads every usage format as
the Python readers do; the conformance cases hold through its utilisation;
and ``quotaform analyze`` runs on it end to end from the CLI."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual
from typer.testing import CliRunner

from quotaform.analytics import engine
from quotaform.analytics.configs import QuotaConfig
from quotaform.analytics.model import (
    IMPACT_COLUMNS,
    RECOMMEND_COLUMNS,
    USAGE_COLUMNS,
    UTILISATION_COLUMNS,
    UsageRow,
)
from quotaform.analytics.sources.base import ReadOptions
from quotaform.analytics.sources.registry import read_usage
from quotaform.analytics.spark import job, partitions, transforms
from quotaform.analytics.spark.schemas import (
    IMPACT_SCHEMA,
    RECOMMEND_SCHEMA,
    USAGE_SCHEMA,
    UTILISATION_SCHEMA,
)
from quotaform.cli.app import app
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.metrics import sanitize_user
from quotaform.kafka.resolution import QuotaIndex

from ..conformance.cases import load_cases
from .generated import generated

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "analytics"
runner = CliRunner()


def _usage_frame(spark: SparkSession, rows: list[UsageRow]) -> Any:
    return spark.createDataFrame(
        [tuple(getattr(r, c) for c in USAGE_COLUMNS) for r in rows], USAGE_SCHEMA
    )


def _frame(
    spark: SparkSession, rows: list[dict[str, Any]], columns: tuple[str, ...], schema: Any
) -> Any:
    return spark.createDataFrame([tuple(r[c] for c in columns) for r in rows], schema)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_spark_equals_the_python_engine_on_every_row(spark: SparkSession, seed: int) -> None:
    before, after, rows = generated(seed)
    py_util = engine.utilisation(rows, {"c": QuotaIndex(before)})
    py_impact = engine.impact(py_util, {"c": QuotaIndex(after)})
    py_recommend = engine.recommend(py_util)
    assert py_util and py_impact and py_recommend  # coverage: the test below

    usage = _usage_frame(spark, rows)
    config_after = job.config_frame(spark, [QuotaConfig("c", after, "generated")])
    # Computed once for the three comparisons (impact and recommend read it).
    spark_util = (
        partitions.table_of(partitions.utilisation(usage, configs={"c": QuotaIndex(before)}))
        .cache()
    )
    assertDataFrameEqual(
        spark_util, _frame(spark, py_util, UTILISATION_COLUMNS, UTILISATION_SCHEMA), rtol=1e-9
    )
    spark_impact = transforms.impact(spark_util, after=config_after).select(*IMPACT_COLUMNS)
    assertDataFrameEqual(
        spark_impact, _frame(spark, py_impact, IMPACT_COLUMNS, IMPACT_SCHEMA), rtol=1e-9
    )
    spark_recommend = transforms.recommend(spark_util).select(*RECOMMEND_COLUMNS)
    assertDataFrameEqual(
        spark_recommend, _frame(spark, py_recommend, RECOMMEND_COLUMNS, RECOMMEND_SCHEMA), rtol=1e-9
    )
    spark_util.unpersist()


def test_the_generated_data_covers_every_level_and_group_change() -> None:
    levels: set[int] = set()
    changes: set[str] = set()
    unlimited = ips = False
    for seed in (1, 2, 3):
        before, after, rows = generated(seed)
        util = engine.utilisation(rows, {"c": QuotaIndex(before)})
        levels |= {r["level"] for r in util if r["level"] is not None}
        unlimited |= any(r["quota_value"] is None for r in util)
        ips |= any(r["ip"] for r in util)
        changes |= {r["group_change"] for r in engine.impact(util, {"c": QuotaIndex(after)})}
    assert levels >= {1, 2, 3, 4, 5, 6, 7, 8}
    assert unlimited and ips
    assert changes >= {"none", "splits", "merges"}


def test_the_conformance_cases_through_the_spark_engine(spark: SparkSession) -> None:
    # Each recorded (case, key): one usage sample of the expected tags gets
    # the expected value and level in the Spark engine's utilisation table.
    rows = []
    want = {}
    configs = []
    when = datetime(2026, 1, 1, tzinfo=UTC)
    for number, case in enumerate(load_cases()):
        cluster = f"case-{number}"
        configs.append(QuotaConfig(cluster, case.entries, case.name))
        for key, expect in case.expect.items():
            if not expect["recorded"]:
                continue
            tags = expect["tags"]
            user = sanitize_user(tags.get("user", "")) if tags.get("user") else ""
            ip = tags.get("ip") or None
            metric = QUOTA_KEYS[key].usage_metric
            rows.append((cluster, "1", when, metric, user, tags.get("client-id", ""), ip, 1.0))
            value = None if expect["value"] is None else float(expect["value"])
            want[(cluster, user, tags.get("client-id", ""), ip, key)] = (value, expect["level"])
    usage = spark.createDataFrame(rows, USAGE_SCHEMA)
    table = partitions.table_of(
        partitions.utilisation(usage, configs={c.cluster: c.index for c in configs})
    ).collect()
    got = {
        (r["cluster"], r["user"], r["client_id"], r["ip"], r["quota_key"]): (
            r["quota_value"],
            r["level"],
        )
        for r in table
    }
    assert len(rows) == len(want) and got == want


def test_spark_reads_every_usage_format_like_the_python_readers(
    spark: SparkSession, tmp_path: Path
) -> None:
    for files, options in [
        (["usage.csv"], {}),
        (["usage.jsonl"], {}),
        (["prometheus.json"], {}),
        (["jmxtool.csv"], {"cluster": "prod-eu", "broker": "1"}),
    ]:
        paths = [FIXTURES / f for f in files]
        read = ReadOptions(**options)
        frame, rejected, _ = job.read_usage_counted(spark, paths, options=read)
        rows, py_rejected = read_usage(paths, options=read)
        assert frame.count() == len(rows), files
        assert (rejected.count, dict(rejected.by_reason)) == (
            py_rejected.count,
            dict(py_rejected.by_reason),
        ), files
        assert dict(rejected.skipped) == dict(py_rejected.skipped), files
        spark_series = {(r["metric"], r["user"], r["client_id"], r["ip"]) for r in frame.collect()}
        assert spark_series == {(r.metric, r.user, r.client_id, r.ip) for r in rows}, files


# ----------------------------------------------------------------- the CLI on Spark


def _table(path: Path) -> list[dict[str, Any]]:
    parts = [path] if path.is_file() else sorted(path.glob("*.parquet"))
    return [r for part in parts for r in pq.read_table(part).to_pylist()]


def test_analyze_from_the_cli_on_both_engines(reference_analyses: dict[str, Path]) -> None:
    # utilisation of usage.csv from the CLI on each engine (run once for the
    # Spark tests: tests/spark/conftest.py).
    for engine_name in ("spark", "python"):
        out = reference_analyses[engine_name] / "utilisation"
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
        assert (summary["format_version"], summary["engine"], summary["rows"]) == (
            1,
            engine_name,
            7,
        )
        assert summary["rejected"]["count"] == 2
        html = (out / "report.html").read_text(encoding="utf-8")
        assert (
            html.count("data:image/png;base64,") >= 2
        )  # the distribution and a usage-vs-quota plot
        assert "user=alice, client-id=ingest" in (out / "report.md").read_text(encoding="utf-8")
    key = lambda r: (r["broker"], r["user"], r["client_id"], r["ip"] or "", r["quota_key"])  # noqa: E731
    spark_out, python_out = (reference_analyses[e] / "utilisation" for e in ("spark", "python"))
    assert sorted(_table(spark_out / "utilisation.parquet"), key=key) == sorted(
        _table(python_out / "utilisation.parquet"), key=key
    )


def test_impact_of_a_saved_plan_and_recommendations_into_the_manifests(
    spark: SparkSession, reference_analyses: dict[str, Path], tmp_path: Path
) -> None:
    manifests = tmp_path / "m"
    manifests.mkdir()
    text = (FIXTURES / "manifest.yaml").read_text(encoding="utf-8")
    (manifests / "m.yaml").write_text(text, encoding="utf-8")
    # The change: alice's ingest quota halved. From the snapshot (now) to the
    # manifests: the reference impact on Spark (tests/spark/analyses.py) is
    # that run, `analyze impact <these manifests> --snapshot snapshot.jsonl
    # --usage usage.csv --engine spark`.
    (manifests / "m.yaml").write_text(
        text.replace("values: {producer_byte_rate: 1MiB}", "values: {producer_byte_rate: 512KiB}"),
        encoding="utf-8",
    )
    out = reference_analyses["spark"] / "impact"
    assert (out.parent / "changed" / "m.yaml").read_text(encoding="utf-8") == (
        manifests / "m.yaml"
    ).read_text(encoding="utf-8")
    (row,) = _table(out / "impact.parquet")
    assert (row["user"], row["client_id"], row["quota_before"], row["quota_after"]) == (
        "alice",
        "ingest",
        1048576.0,
        524288.0,
    )
    assert row["first_throttle_ms"] == pytest.approx(
        round((row["p99"] - 524288) / 524288 * 11000), abs=1
    )
    # The steady state: requests of the default batch.size 16384 held S / T.
    assert row["predicted_throttle_ms"] == (
        round(16384 / 524288 * 1000) if row["p99"] > 524288 else 0.0
    )
    # What its clients measure: the typical rate (p50), held at most at T when p99 > T.
    held = row["p99"] > 524288
    assert row["throughput_after"] == (min(row["p50"], 524288) if held else row["p50"])
    recommended = tmp_path / "rec"
    result = runner.invoke(
        app,
        ["analyze", "recommend", str(manifests), "--usage", str(FIXTURES / "usage.csv"),
         "--out", str(recommended), "--engine", "spark", "--write-into", str(manifests / "m.yaml")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    edited = (manifests / "m.yaml").read_text(encoding="utf-8")
    assert "# recommended by quotaform analyze" in edited
    assert "# level 1" in edited  # comments kept
    assert "Wrote the recommendations" in result.stdout
