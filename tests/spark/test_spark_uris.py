"""Hadoop URIs for ``--usage`` and ``--out`` (issue 20, item 4): read and
written only through Spark, with the same rows, rejections and outputs as
local paths; the Python engine refuses them by name; ``spark-submit``'s
arguments are ``quotaform analyze``'s."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from typer.testing import CliRunner

from quotaform.analytics.jobs import AnalyzeRequest, Command, Engine, choose_engine
from quotaform.analytics.paths import child, data_path, is_uri, name_of
from quotaform.analytics.sources.base import ReadOptions
from quotaform.analytics.spark import job
from quotaform.cli.app import app
from quotaform.cli.spark_submit import submit_arguments
from quotaform.errors import AnalyticsError

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "analytics"
runner = CliRunner()


def _rows(frame: DataFrame) -> list[str]:
    """Rows as comparable text (NaN equals NaN)."""
    return sorted(repr(tuple(r)) for r in frame.collect())


def test_a_uri_stays_text_and_a_path_is_a_path() -> None:
    assert data_path("s3a://bucket/usage/") == "s3a://bucket/usage/"
    assert data_path("file:///tmp/x") == "file:///tmp/x"
    assert data_path("hdfs://nn:8020/u") == "hdfs://nn:8020/u"
    assert data_path("usage/") == Path("usage")
    assert data_path("C:\\data") == Path("C:\\data")  # a drive letter is not a scheme
    assert child("s3a://bucket/out/", "report.md") == "s3a://bucket/out/report.md"
    assert child(Path("out"), "report.md") == Path("out/report.md")
    assert name_of("s3a://b/x/usage.json") == "usage.json"
    assert is_uri("file:///x") and not is_uri(Path("x"))


def test_the_python_engine_refuses_a_uri_and_auto_picks_spark(tmp_path: Path) -> None:
    request = AnalyzeRequest(
        command=Command.utilisation,
        usage=(f"file://{FIXTURES}/usage.jsonl",),
        out=tmp_path,
        engine=Engine.python,
    )
    with pytest.raises(AnalyticsError, match=r"file://.*usage.jsonl: a URI is read and written"):
        choose_engine(request)
    auto = AnalyzeRequest(
        command=Command.utilisation,
        usage=(FIXTURES / "usage.jsonl",),
        out=f"file://{tmp_path}/out",
    )
    assert choose_engine(auto) is Engine.spark


def test_uris_read_like_local_paths_in_every_format(spark: SparkSession, tmp_path: Path) -> None:
    # A directory URI holding every layout (listed by Spark), against the same
    # files as local paths: same rows, same rejections, examples named by URI.
    folder = tmp_path / "usage"
    folder.mkdir()
    for name in ("usage.csv", "usage.jsonl", "prometheus.json"):
        shutil.copy(FIXTURES / name, folder / name)
    (folder / "bad.jsonl").write_text(
        '{"cluster":"prod-eu","broker":"1","timestamp":"yesterday","metric":"produce-byte-rate",'
        '"user":"a","client_id":"","ip":null,"value":1}\n',
        encoding="utf-8",
    )
    local, local_rejected, local_rows = job.read_usage_counted(spark, [folder])
    remote, remote_rejected, remote_rows = job.read_usage_counted(spark, [f"file://{folder}"])
    assert remote_rows == local_rows == local.count() > 100
    assert _rows(remote) == _rows(local)
    assert (remote_rejected.count, dict(remote_rejected.by_reason)) == (
        local_rejected.count,
        dict(local_rejected.by_reason),
    )
    assert remote_rejected.count == 3  # the fixtures' own two, and bad.jsonl's
    assert any(
        e.startswith(f"file://{folder}/bad.jsonl:1: ")
        and e.endswith("timestamp: yesterday is not an ISO-8601 time")
        for e in remote_rejected.examples
    ), remote_rejected.examples


def test_a_jmxtool_file_at_a_uri_is_detected_and_parsed(spark: SparkSession) -> None:
    uri = f"file://{FIXTURES}/jmxtool.csv"
    jmx = ReadOptions(cluster="prod-eu", broker="1")
    frame, _, rows = job.read_usage_counted(spark, [uri], options=jmx)
    local, _, local_rows = job.read_usage_counted(spark, [FIXTURES / "jmxtool.csv"], options=jmx)
    assert rows == local_rows > 0
    assert _rows(frame) == _rows(local)


def test_a_missing_uri_is_one_error_naming_it(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(AnalyticsError, match=rf"file://{tmp_path}/nothing: cannot be listed"):
        job.read_usage_counted(spark, [f"file://{tmp_path}/nothing"])
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("x", encoding="utf-8")
    with pytest.raises(AnalyticsError, match="empty: no usage files"):
        job.read_usage_counted(spark, [f"file://{tmp_path}/empty"])


def test_reports_at_a_uri_are_files_written_through_hadoop(
    spark: SparkSession, tmp_path: Path
) -> None:
    written = job.write_texts(spark, f"file://{tmp_path}/out", {"report.md": "# hello\nworld\n"})
    assert written == {"report.md": f"file://{tmp_path}/out/report.md"}
    assert (tmp_path / "out" / "report.md").read_text(encoding="utf-8") == "# hello\nworld\n"


def test_analyze_writes_every_output_at_a_file_uri(
    spark: SparkSession, jsonl_utilisation: dict[str, Path], tmp_path: Path
) -> None:
    # In this process the shared local session serves the run (getOrCreate).
    out = f"file://{tmp_path}/out"
    result = runner.invoke(
        app,
        [
            "analyze",
            "utilisation",
            str(FIXTURES / "manifest.yaml"),
            "--usage",
            f"file://{FIXTURES}/usage.jsonl",
            "--out",
            out,
        ],
    )
    assert result.exit_code == 0, result.output
    assert f"-> {out}/utilisation.parquet" in result.stdout
    # The same analysis of the local path on Spark (run once for the Spark
    # tests: tests/spark/conftest.py).
    local = jsonl_utilisation["spark"]
    table = pq.read_table(tmp_path / "out" / "utilisation.parquet").to_pylist()
    key = lambda r: (r["cluster"], r["broker"], r["user"], r["client_id"], r["quota_key"])  # noqa: E731
    assert sorted(table, key=key) == sorted(
        pq.read_table(local / "utilisation.parquet").to_pylist(), key=key
    )
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert summary["rows"] == len(table) > 0
    assert summary["table"] == f"{out}/utilisation.parquet"
    assert (tmp_path / "out" / "report.md").read_text(encoding="utf-8").startswith("### quotaform")
    assert "<html" in (tmp_path / "out" / "report.html").read_text(encoding="utf-8")


def test_spark_submit_arguments_are_the_clis() -> None:
    assert submit_arguments(["utilisation", "m.yaml", "--usage", "u", "--out", "o"]) == [
        "analyze",
        "utilisation",
        "m.yaml",
        "--usage",
        "u",
        "--out",
        "o",
        "--engine",
        "spark",
    ]
    assert submit_arguments(["impact", "--engine", "spark"])[-2:] == ["--engine", "spark"]
    for bad in (
        [],
        ["collect"],
        ["utilisation", "--engine", "python"],
        ["utilisation", "--master", "local[2]"],
        ["recommend", "--remote=sc://h:1"],
    ):
        with pytest.raises(SystemExit) as exited:
            submit_arguments(bad)
        assert exited.value.code == 2, bad
