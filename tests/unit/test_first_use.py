"""Issue 32's first-use defects on the local engine and the CLI, each as a
new user met it (the Spark side of the same defects: tests/spark/test_first_use_spark.py)."""

from __future__ import annotations

import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from quotaform.analytics.model import USAGE_COLUMNS
from quotaform.cli.app import app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "analytics"
runner = CliRunner()
T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)


def _analyze(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["analyze", *args])
    return result.exit_code, result.output


def _usage_frame(rows: int = 10) -> pd.DataFrame:
    """Usage as most people write it: pandas, a tz-aware time, an integer broker."""
    return pd.DataFrame(
        {
            "cluster": ["prod-eu"] * rows,
            "broker": [1] * rows,
            "timestamp": [T0 + timedelta(seconds=15 * i) for i in range(rows)],
            "metric": ["produce-byte-rate"] * rows,
            "user": ["alice"] * rows,
            "client_id": ["ingest"] * rows,
            "ip": [None] * rows,
            "value": [1000.0 + i for i in range(rows)],
        }
    )[list(USAGE_COLUMNS)]


def test_an_integer_broker_is_a_broker_not_a_missing_one(tmp_path: Path) -> None:
    # Was: "no usable usage row: 10 rejected (broker: 10); first: usage.parquet:1:
    # broker: missing or empty" on the local engine, while Spark read 10 rows.
    parquet = tmp_path / "usage.parquet"
    _usage_frame().to_parquet(parquet)
    assert str(pq.read_schema(parquet).field("broker").type) == "int64"
    jsonl = tmp_path / "usage.jsonl"
    with jsonl.open("w", encoding="utf-8") as fh:
        for record in _usage_frame().to_dict("records"):
            fh.write(json.dumps({**record, "timestamp": record["timestamp"].isoformat()}) + "\n")
    assert '"broker": 1,' in jsonl.read_text(encoding="utf-8")
    for path in (parquet, jsonl):
        out = tmp_path / f"out-{path.suffix[1:]}"
        code, output = _analyze(
            "utilisation", str(FIXTURES / "manifest.yaml"), "--usage", str(path),
            "--out", str(out), "--engine", "python",
        )  # fmt: skip
        assert code == 0, output
        (row,) = pq.read_table(out / "utilisation.parquet").to_pylist()
        assert (row["broker"], row["samples"], row["user"]) == ("1", 10, "alice")


def test_a_parquet_file_whose_rows_are_all_out_of_range_says_so(tmp_path: Path) -> None:
    # Was: "no quota usage series in the usage: no series at all. The exporter
    # rules export no client-quota metrics (Strimzi's ...)" for a Parquet file.
    path = tmp_path / "usage.parquet"
    _usage_frame().to_parquet(path)
    code, output = _analyze(
        "utilisation", str(FIXTURES / "manifest.yaml"), "--usage", str(path),
        "--out", str(tmp_path / "out"), "--engine", "python", "--since", "2026-11-24",
    )  # fmt: skip
    assert code == 1
    assert "no usable usage row in the time range (--since / --until)" in output
    assert "exporter" not in output and "Strimzi" not in output


class _FakeJmx:
    """JmxTool's readings of a sandbox broker (node 1): its app-info MBean and
    one quota group."""

    def __init__(self, ids: tuple[str, ...] = ("1",)) -> None:
        self.ids = ids

    def __call__(self, port: int, patterns: object, attributes: object) -> dict[str, object]:
        from quotaform.sandbox.jmx import MBeanReading

        if any("app-info" in p for p in patterns):  # type: ignore[attr-defined]
            return {
                f"kafka.server:type=app-info,id={i}": MBeanReading(
                    f"kafka.server:type=app-info,id={i}",
                    "kafka.server",
                    {"type": "app-info", "id": i},
                    {"start-time-ms": 1.0},
                )
                for i in self.ids
            }
        name = "kafka.server:type=Produce,user=alice,client-id=ingest"
        return {
            name: MBeanReading(
                name,
                "kafka.server",
                {"type": "Produce", "user": "alice", "client-id": "ingest"},
                {"byte-rate": 1024.0, "throttle-time": 0.0},
            )
        }


def test_collect_without_broker_labels_the_samples_with_the_brokers_node_id(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Was: every sample labelled broker "0" (the sandbox broker is node 1), silently.
    import quotaform.app.collect as collect_module

    monkeypatch.setattr(collect_module, "read_mbeans", _FakeJmx())
    out = tmp_path / "usage.jsonl"
    result = runner.invoke(
        app,
        ["analyze", "collect", "--jmx-port", "9999", "--cluster-name", "demo", "--out", str(out),
         "--seconds", "0"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    brokers = {json.loads(line)["broker"] for line in out.read_text().splitlines()}
    assert brokers == {"1"}
    assert "Note: the samples are broker '1': its node id, read from the broker" in result.stderr
    # --broker still names it, and then nothing is read or said.
    result = runner.invoke(
        app,
        ["analyze", "collect", "--jmx-port", "9999", "--cluster-name", "demo", "--out", str(out),
         "--seconds", "0", "--broker", "7"],
    )  # fmt: skip
    assert result.exit_code == 0 and "Note:" not in result.stderr
    assert json.loads(out.read_text().splitlines()[-1])["broker"] == "7"


def test_collect_refuses_to_guess_between_two_node_ids(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import quotaform.app.collect as collect_module

    monkeypatch.setattr(collect_module, "read_mbeans", _FakeJmx(("1", "2")))
    result = runner.invoke(
        app,
        ["analyze", "collect", "--jmx-port", "9999", "--cluster-name", "demo", "--out",
         str(tmp_path / "u.jsonl"), "--seconds", "0"],
    )  # fmt: skip
    assert result.exit_code == 1
    assert "app-info MBeans name ids 1, 2: give --broker ID" in result.stderr


@pytest.fixture
def exporter_url() -> Iterator[str]:
    """A JMX exporter's /metrics endpoint: every path answers its text format."""
    text = (
        b"# HELP kafka_server_produce_byte_rate byte-rate\n"
        b"# TYPE kafka_server_produce_byte_rate gauge\n"
        b'kafka_server_produce_byte_rate{user="alice",client_id="ingest",} 1024.0\n'
    )

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

        do_POST = do_GET

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_prometheus_pointed_at_the_exporter_names_the_url_not_a_saved_file(
    exporter_url: str, tmp_path: Path
) -> None:
    # Was: "out/prometheus/query-0001.json: neither a Prometheus query_range answer ..."
    code, output = _analyze(
        "utilisation", str(FIXTURES / "manifest.yaml"), "--prometheus", exporter_url,
        "--since", "5m", "--step", "5s", "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert code == 1
    (line,) = [line for line in output.splitlines() if line.startswith("Error:")]
    assert exporter_url in line
    assert "answered with text/plain" in line and "not the Prometheus HTTP API" in line
    assert "query-0001.json" not in output


def test_recommend_writes_no_entity_equal_to_the_quota_the_group_already_gets(
    tmp_path: Path,
) -> None:
    # Was: {user: alice, client-id: reporting} written at 2MiB, the level-2
    # quota it already got; impact then listed "2MiB -> 2MiB, level 2 -> 1".
    shutil.copy(FIXTURES / "manifest.yaml", tmp_path / "manifest.yaml")
    code, output = _analyze(
        "recommend", str(tmp_path), "--usage", str(FIXTURES / "usage.csv"),
        "--out", str(tmp_path / "rec"), "--write-into", str(tmp_path / "recommended.yaml"),
        "--engine", "python",
    )  # fmt: skip
    assert code == 0, output
    rows = pq.read_table(tmp_path / "rec" / "recommend.parquet").to_pylist()
    same = [r for r in rows if r["quota_value"] == r["recommended"]]
    assert any(r["client_id"] == "reporting" for r in same), rows  # the fixture's case
    written = (tmp_path / "recommended.yaml").read_text(encoding="utf-8")
    assert "reporting" not in written
    code, output = _analyze(
        "impact", str(tmp_path), "--snapshot", str(FIXTURES / "snapshot.jsonl"),
        "--usage", str(FIXTURES / "usage.csv"), "--out", str(tmp_path / "impact"),
        "--engine", "python",
    )  # fmt: skip
    assert code == 0, output
    changed = pq.read_table(tmp_path / "impact" / "impact.parquet").to_pylist()
    assert not [r for r in changed if r["quota_before"] == r["quota_after"]], changed
