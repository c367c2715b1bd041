"""``quotaform analyze`` output an operator reads (issue 23): measured values
in units next to the quotas, plots with units, UTC times and the cluster,
histogram buckets as the README promises, one-line errors up front, and the
CLI's flags and placeholders."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from quotaform.analytics.jobs import BUCKET_LABELS, UsageSeries
from quotaform.analytics.report import histogram_figure, series_figure
from quotaform.cli.app import app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "analytics"
ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
MiB = 1024 * 1024


def _analyze(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["analyze", *args])
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def utilisation_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("util")
    code, output = _analyze(
        "utilisation", str(FIXTURES / "manifest.yaml"), "--usage", str(FIXTURES / "usage.jsonl"),
        "--out", str(out), "--engine", "python",
    )  # fmt: skip
    assert code == 0, output
    return out


# ----------------------------------------------------------------- 5: units in the tables


def test_report_tables_print_measured_values_in_units(utilisation_out: Path) -> None:
    markdown = (utilisation_out / "report.md").read_text(encoding="utf-8")
    alice = next(line for line in markdown.splitlines() if "client-id=ingest" in line)
    cells = [c.strip() for c in alice.strip("|").split("|")]
    assert cells[2] == "1MiB"  # the quota, exact
    assert cells[4] == "1.02MiB"  # p99 1069548 bytes/s, readable
    assert "1069548" not in markdown
    assert "| 200KiB |" in markdown and "| 20% |" in markdown
    html = (utilisation_out / "report.html").read_text(encoding="utf-8")
    assert "<td>1.02MiB</td>" in html and "1069548" not in html
    # The summary keeps the exact number.
    summary = json.loads((utilisation_out / "summary.json").read_text(encoding="utf-8"))
    assert any(row["p99"] == pytest.approx(1069548, rel=1e-3) for row in summary["top"])


def test_recommend_report_prints_peak_p99_in_units(tmp_path: Path) -> None:
    code, output = _analyze(
        "recommend", str(FIXTURES / "manifest.yaml"), "--usage", str(FIXTURES / "usage.jsonl"),
        "--out", str(tmp_path), "--engine", "python",
    )  # fmt: skip
    assert code == 0, output
    markdown = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "1.02MiB" in markdown and "1069548" not in markdown


# ----------------------------------------------------------------- 6: plots and buckets


def test_histogram_buckets_end_at_one_in_order(utilisation_out: Path) -> None:
    summary = json.loads((utilisation_out / "summary.json").read_text(encoding="utf-8"))
    assert list(summary["histogram"]) == list(BUCKET_LABELS)
    assert list(BUCKET_LABELS) == ["< 0.25", "< 0.5", "< 0.75", "< 0.9", "< 1", ">= 1", "unlimited"]
    # alice's ingest group runs at 102%: ">= 1", as the headline counts it.
    assert summary["histogram"][">= 1"] == summary["counts"]["over_quota"] == 1
    import jsonschema

    schema = json.loads((ROOT / "schemas" / "analyze.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(summary, schema)


def test_the_histogram_has_every_bucket_and_whole_counts() -> None:
    counts = {"< 0.5": 4, ">= 1": 1, "< 0.25": 1}
    figure = histogram_figure(counts, clusters=["prod-eu"])
    figure.canvas.draw()
    (axis,) = figure.axes
    assert [t.get_text() for t in axis.get_xticklabels()] == list(BUCKET_LABELS)
    assert all(float(t).is_integer() for t in axis.get_yticks())
    assert "prod-eu" in axis.get_title()


def _series(quota_key: str, values: list[float], quota: float | None) -> UsageSeries:
    t0 = datetime(2026, 11, 23, 10, tzinfo=UTC)
    return UsageSeries(
        title=f"prod-eu: user=alice, client-id=ingest @1 {quota_key}",
        cluster="prod-eu",
        quota_key=quota_key,
        quota=quota,
        points=tuple((t0 + timedelta(seconds=30 * i), v) for i, v in enumerate(values)),
    )


def test_the_usage_plot_has_units_zero_utc_and_the_cluster() -> None:
    figure = series_figure(_series("producer_byte_rate", [0.9 * MiB, 1.02 * MiB, 3 * MiB], MiB))
    figure.canvas.draw()
    (axis,) = figure.axes
    assert axis.get_ylabel() == "usage (bytes/s)"
    assert axis.get_ylim()[0] == 0
    ticks = [t.get_text() for t in axis.get_yticklabels() if t.get_text()]
    assert "1MiB" in ticks and all(t.endswith(("iB", "B")) for t in ticks), ticks
    assert axis.yaxis.get_offset_text().get_text() == ""  # no 1e6 offset
    assert "(UTC)" in axis.get_xlabel()
    xticks = [t.get_text() for t in axis.get_xticklabels() if t.get_text()]
    assert xticks and all(t.startswith("11-23 10:") for t in xticks), xticks
    assert axis.get_title().startswith("prod-eu: ")
    legend = axis.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [
        "usage (producer_byte_rate)",
        "quota 1MiB",
    ]
    # Below the plot, so it never hides the quota line.
    box = legend.get_window_extent()
    assert box.y1 <= axis.get_window_extent().y0


def test_the_usage_plot_of_a_percentage_starts_at_zero() -> None:
    figure = series_figure(_series("request_percentage", [20.0, 40.0], 50.0))
    figure.canvas.draw()
    (axis,) = figure.axes
    assert axis.get_ylabel() == "usage (%)"
    assert axis.get_ylim()[0] == 0
    assert any(t.get_text().endswith("%") for t in axis.get_yticklabels())
