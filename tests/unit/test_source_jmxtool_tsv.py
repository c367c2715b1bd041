"""The ``jmxtool-tsv`` source (JmxTool ``--report-format tsv``): the same
samples as the JmxTool CSV of the same reads, on the local engine and
through the CLI, detected by its first line."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from typer.testing import CliRunner

from quotaform.analytics.local.reader import read_coded_usage
from quotaform.analytics.sources.base import ReadOptions
from quotaform.analytics.sources.registry import detect, read_usage
from quotaform.cli.app import app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "analytics"
JMX = ReadOptions(cluster="prod-eu", broker="1")


def test_the_tsv_report_reads_as_the_csv_of_the_same_reads() -> None:
    tsv = FIXTURES / "jmxtool.tsv"
    assert detect(tsv.name, tsv.read_bytes).name == "jmxtool-tsv"  # type: ignore[union-attr]
    rows, rejected = read_usage([tsv], options=JMX)
    csv_rows, csv_rejected = read_usage([FIXTURES / "jmxtool.csv"], options=JMX)
    assert list(map(repr, rows)) == list(map(repr, csv_rows)) and len(rows) == 10  # NaN too
    assert {r.client_id for r in rows} == {"in:gest*"}  # JMX quoting undone
    assert (rejected.count, csv_rejected.count) == (0, 0)
    usage, _ = read_coded_usage([tsv], clusters=["prod-eu"], options=JMX)
    assert usage.rows == len(rows)


def test_analyze_reads_a_tsv_report(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["analyze", "utilisation", str(FIXTURES / "manifest.yaml"), "--usage",
         str(FIXTURES / "jmxtool.tsv"), "--default-cluster", "prod-eu", "--broker", "1",
         "--out", str(tmp_path), "--engine", "python"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (row,) = pq.read_table(tmp_path / "utilisation.parquet").to_pylist()
    assert (row["broker"], row["samples"], row["censored"]) == ("1", 5, True)
