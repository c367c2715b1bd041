"""``quotaform analyze`` output an operator reads (issue 23): measured values
in units next to the quotas, plots with units, UTC times and the cluster,
histogram buckets as docs/analytics.md promises, one-line errors up front, and the
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


# ----------------------------------------------------------------- 7: errors up front


def test_out_that_is_a_file_is_refused_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "afile"
    out.write_text("", encoding="utf-8")
    code, output = _analyze(
        "utilisation", str(FIXTURES / "manifest.yaml"), "--usage", str(FIXTURES / "usage.csv"),
        "--out", str(out), "--engine", "python",
    )  # fmt: skip
    assert code == 1
    assert f"--out {out} is a file: give a directory" in output
    assert "Traceback" not in output and "engine:" not in output  # before the analysis


def _manifest_dir(tmp_path: Path) -> Path:
    manifests = tmp_path / "recm"
    manifests.mkdir()
    text = (FIXTURES / "manifest.yaml").read_text(encoding="utf-8")
    (manifests / "manifest.yaml").write_text(text, encoding="utf-8")
    return manifests


def test_write_into_a_new_file_creates_it_and_keeps_untouched_lines(tmp_path: Path) -> None:
    manifests = _manifest_dir(tmp_path)
    before = (manifests / "manifest.yaml").read_text(encoding="utf-8")
    into = manifests / "recommended.yaml"
    code, output = _analyze(
        "recommend", str(manifests), "--usage", str(FIXTURES / "usage.csv"),
        "--out", str(tmp_path / "rec"), "--engine", "python", "--write-into", str(into),
    )  # fmt: skip
    assert code == 0, output
    created = into.read_text(encoding="utf-8")
    assert created.startswith("apiVersion: quotaform.io/v1\nkind: ClientQuotas\n")
    assert "metadata:\n  cluster: prod-eu\n" in created
    assert "- entity: {user: bob}" in created
    from quotaform.manifest import load_manifests

    assert load_manifests([manifests]).cluster == "prod-eu"  # the set still loads
    # 12: the edited file differs only on the edited values; the flow-style
    # scope line with single-key maps stays byte for byte.
    after = (manifests / "manifest.yaml").read_text(encoding="utf-8")
    changed = [
        (a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b
    ]
    assert [a.strip() for a, _ in changed] == [
        "values: {producer_byte_rate: 1MiB}",
        "values: {connection_creation_rate: 10}",
    ]
    assert (
        "  scope: [{shape: user}, {shape: client-id}, {shape: user+client-id}, {shape: ip}]\n"
        in after
    )


def test_write_into_outside_the_manifests_is_refused_before_the_analysis(tmp_path: Path) -> None:
    manifests = _manifest_dir(tmp_path)
    code, output = _analyze(
        "recommend", str(manifests), "--usage", str(FIXTURES / "usage.csv"),
        "--out", str(tmp_path / "rec"), "--engine", "python",
        "--write-into", str(tmp_path / "elsewhere" / "r.yaml"),
    )  # fmt: skip
    assert code == 1
    assert "is not read with the manifests given" in output
    assert not (tmp_path / "rec").exists()  # nothing ran


def test_flow_sequences_of_one_key_maps_keep_their_braces(tmp_path: Path) -> None:
    from quotaform.export.edit import ManifestFile

    for scope in (
        "[{shape: user}, {shape: client-id}]",
        "[shape: user, shape: client-id]",  # written without braces: kept so too
    ):
        path = tmp_path / "m.yaml"
        path.write_text(f"spec:\n  scope: {scope}\n", encoding="utf-8")
        manifest = ManifestFile.read(path)
        assert manifest.keeps_format
        assert manifest.text() == f"spec:\n  scope: {scope}\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-24", datetime(2026, 11, 24, tzinfo=UTC)),
        ("2026-11-24T10:00", datetime(2026, 11, 24, 10, tzinfo=UTC)),
        ("2026-11-24T10:00:00Z", datetime(2026, 11, 24, 10, tzinfo=UTC)),
        ("2026-11-24T12:00:00+02:00", datetime(2026, 11, 24, 10, tzinfo=UTC)),
    ],
)
def test_since_accepts_the_iso_forms(text: str, expected: datetime) -> None:
    from quotaform.cli.analyze import parse_time

    assert parse_time(text) == expected


def test_since_accepts_a_duration_ago_and_names_the_forms_when_wrong(tmp_path: Path) -> None:
    from quotaform.cli.analyze import parse_time

    since = parse_time("24h")
    ago = datetime.now(UTC) - since
    assert timedelta(hours=24) <= ago < timedelta(hours=24, minutes=1)
    code, output = _analyze(
        "utilisation", str(FIXTURES / "manifest.yaml"), "--usage", str(FIXTURES / "usage.csv"),
        "--out", str(tmp_path), "--since", "yesterday",
    )  # fmt: skip
    assert code == 1
    assert "'yesterday' is not a time: give 2026-11-24, 2026-11-24T10:00" in output
    assert "valid datetime" not in output


def test_every_bad_snapshot_line_is_reported_at_once(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    good = (FIXTURES / "snapshot.jsonl").read_text(encoding="utf-8").splitlines()[0]
    bad.write_text(
        "\n".join(
            [
                good,
                '{"format_version": 1, "cluster": "c", "entity": {"user": "a"}, '
                '"quotas": {"x": 1}}',
                '{"format_version": 2, "cluster": "", "entity": {"user": "a"}, '
                '"quotas": {"producer_byte_rate": "1MiB"}}',
                "nope",
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    code, output = _analyze(
        "utilisation", "--snapshot", str(bad), "--usage", str(FIXTURES / "usage.csv"),
        "--out", str(tmp_path / "o"),
    )  # fmt: skip
    assert code == 1
    for problem in (
        "bad.jsonl:2: quotas.x: not a quota key",
        "bad.jsonl:3: format_version: expected 1, got 2",
        "bad.jsonl:3: cluster: expected a non-empty string",
        "bad.jsonl:3: quotas.producer_byte_rate: expected a number, got '1MiB'",
        "bad.jsonl:4: not JSON",
    ):
        assert problem in output, output
    assert "5 problem(s)" in output


def test_a_java_stack_trace_becomes_one_line() -> None:
    from quotaform.sandbox.jmx import java_message

    trace = (
        "Trying to connect to JMX url: service:jmx:rmi:///jndi/rmi://127.0.0.1:1/jmxrmi\n"
        "java.io.IOException: Failed to retrieve RMIServer stub\n"
        "\tat java.management.rmi/javax.management.remote.rmi.RMIConnector.connect(X.java:370)\n"
        "Caused by: java.net.ConnectException: Connection refused\n"
        "\tat java.base/java.net.Socket.<init>(Socket.java:507)\n"
        "\t... 8 more\n"
    )
    assert java_message(trace) == "ConnectException: Connection refused"


def test_collect_on_a_closed_jmx_port_says_what_to_check(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import subprocess

    from quotaform.sandbox import jmx

    stderr = (
        "Could not connect to JMX url: service:jmx:rmi:///jndi/rmi://127.0.0.1:1/jmxrmi.\n"
        "java.io.IOException: Failed to retrieve RMIServer stub\n"
        "\tat java.base/java.net.Socket.<init>(Socket.java:507)\n"
        "Caused by: java.net.ConnectException: Connection refused\n"
        "\tat java.base/java.net.Socket.<init>(Socket.java:287)\n"
    )
    monkeypatch.setattr(
        jmx,
        "run_kafka_tool",
        lambda *a, **k: subprocess.CompletedProcess([], 1, stdout="", stderr=stderr),
    )
    code, output = _analyze(
        "collect", "--jmx-port", "1", "--out", str(tmp_path / "u.jsonl"),
        "--cluster-name", "demo", "--seconds", "0",
    )  # fmt: skip
    assert code == 1
    lines = [line for line in output.splitlines() if line.strip()]
    assert lines == [
        "Error: JmxTool could not connect to the JMX port 127.0.0.1:1 (loopback): "
        "ConnectException: Connection refused; check that the broker runs with JMX on that "
        "port (quotaform sandbox up --jmx prints it) and give it as --jmx-port"
    ]
    assert "\tat " not in output


# ----------------------------------------------------------------- 8: the live cluster's name


def test_a_live_cluster_without_a_profile_takes_its_name_from_the_usage(tmp_path: Path) -> None:
    from quotaform.analytics.request import AnalyzeRequest, Command
    from quotaform.analytics.sources.base import ReadOptions
    from quotaform.analytics.usage import LabelMap
    from quotaform.app.analyze import AnalyzeCommandRequest, _live_cluster_name

    def name(paths: tuple[Path, ...], default: str | None = None) -> str:
        read = ReadOptions(labels=LabelMap(default_cluster=default), cluster=default)
        analysis = AnalyzeRequest(Command.utilisation, tmp_path, usage=paths, read=read)
        return _live_cluster_name(AnalyzeCommandRequest(analysis))

    assert name((FIXTURES / "usage.jsonl",)) == "prod-eu"  # the one cluster it names
    assert name((FIXTURES / "usage.jsonl",), "analytics-demo") == "analytics-demo"
    two = tmp_path / "two.jsonl"
    line = (FIXTURES / "usage.jsonl").read_text(encoding="utf-8").splitlines()[0]
    two.write_text(line + "\n" + line.replace('"prod-eu"', '"prod-us"') + "\n", encoding="utf-8")
    assert name((two,), "prod-us") == "prod-us"
    # Several: refused before connecting, naming the option.
    code, output = _analyze(
        "utilisation", "--usage", str(two), "--out", str(tmp_path / "o"),
        "--bootstrap-server", "127.0.0.1:1",
    )  # fmt: skip
    assert code == 1
    assert "the usage names prod-eu, prod-us: give --default-cluster NAME" in output
    assert "cannot reach" not in output


# ----------------------------------------------------------------- 12: flags and help


def test_collect_takes_durations(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import quotaform.cli.analyze as cli_analyze

    seen = []

    from quotaform.analytics.sources.collector import Collected

    monkeypatch.setattr(
        cli_analyze, "run_collect", lambda r: seen.append(r) or Collected(0, "1", False)
    )
    code, output = _analyze(
        "collect", "--jmx-port", "9999", "--out", str(tmp_path / "u.jsonl"),
        "--cluster-name", "demo", "--seconds", "30s", "--interval", "2s",
    )  # fmt: skip
    assert code == 0, output
    assert (seen[0].seconds, seen[0].interval_s) == (30.0, 2.0)
    code, output = _analyze(
        "collect", "--jmx-port", "9999", "--out", str(tmp_path / "u.jsonl"),
        "--cluster-name", "demo", "--seconds", "1m", "--interval", "0.1",
    )  # fmt: skip
    assert code == 1 and "at least 0.2s" in output


def test_analyze_help_cuts_no_summary_and_names_placeholders() -> None:
    result = runner.invoke(app, ["analyze", "--help"], terminal_width=100)
    assert result.exit_code == 0
    commands = result.output.split("Commands:", 1)[1]
    assert "..." not in commands
    for command in ("utilisation", "impact", "recommend", "collect"):
        text = runner.invoke(app, ["analyze", command, "--help"], terminal_width=100).output
        assert "BROKER" not in text and "SINCE" not in text and "UNTIL" not in text, command
        if command != "collect":
            assert "--since TIME" in text and "--until TIME" in text
            assert "--snapshot, --quota-snapshot FILE" in text
        assert "--broker ID" in text


def test_quota_snapshot_is_the_same_option_as_snapshot(tmp_path: Path) -> None:
    code, output = _analyze(
        "utilisation", "--quota-snapshot", str(FIXTURES / "snapshot.jsonl"),
        "--usage", str(FIXTURES / "usage.csv"), "--out", str(tmp_path), "--engine", "python",
    )  # fmt: skip
    assert code == 0, output
    summary = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert summary["configurations"] == [f"prod-eu: snapshot {FIXTURES / 'snapshot.jsonl'}"]
