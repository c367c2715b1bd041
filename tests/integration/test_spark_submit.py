"""``spark-submit`` of quotaform's job to a real Spark standalone cluster
(master and worker started from the pip ``pyspark`` package by the
``spark_cluster`` fixture), with ``file://`` URIs for the usage and the
outputs (issue 20, items 1, 2 and 4): the master, the worker and the
spark-submit command of docs/analytics.md run exactly as shown, its rows
equal to the local engine's; a bad input submitted to the session's cluster
is the CLI's exit code and one ``Error:`` line, never a traceback or a
silent exit 0."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.docblocks import doc_text, fenced_blocks, one_line

#: The standalone cluster is the session's, shared with tests/spark/test_spark_remote.py.
pytestmark = pytest.mark.xdist_group("spark")

ROOT = Path(__file__).resolve().parents[2]
KEY = ("cluster", "broker", "user", "client_id", "ip", "quota_key")


def _documented_submit_command() -> str:
    page = doc_text("docs/analytics.md")
    blocks = [b for b in fenced_blocks(page) if "spark-submit" in b]
    assert len(blocks) == 1, "one spark-submit block in docs/analytics.md"
    return one_line(blocks[0])


def _environment(master_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER", "SPARK_REMOTE")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["SPARK_MASTER_URL"] = master_url
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PYSPARK_PYTHON"] = sys.executable
    return env


def _rows(path: Path) -> list[dict[str, Any]]:
    rows = pq.read_table(path).to_pylist()
    return sorted(rows, key=lambda r: tuple(str(r[c]) for c in KEY))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding a copy of ``tests/fixtures/analytics`` (the documented paths)."""
    where = tmp_path_factory.mktemp("submit")
    shutil.copytree(ROOT / "tests/fixtures/analytics", where / "tests/fixtures/analytics")
    return where


def test_a_submitted_run_with_bad_input_fails_like_the_cli(
    spark_cluster: Any, scratch: Path
) -> None:
    command = [
        "spark-submit", "--master", spark_cluster.master_url,
        str(ROOT / "quotaform/cli/spark_submit.py"), "utilisation",
        "tests/fixtures/analytics/manifest.yaml", "--usage", f"file://{scratch}/no-such-usage",
        "--out", f"file://{scratch}/out/bad",
    ]  # fmt: skip
    done = subprocess.run(
        command, cwd=scratch, env=_environment(spark_cluster.master_url),
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]
    # The driver's stderr reaches spark-submit's stdout (PythonRunner merges them).
    errors = [line for line in done.stdout.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, done.stderr[-3000:]
    assert errors[0].startswith(
        f"Error: file://{scratch}/no-such-usage: cannot be listed by Spark ("
    )
    assert "Traceback" not in done.stdout + done.stderr
    assert not (scratch / "out/bad/utilisation.parquet").exists()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_documented_standalone_cluster_starts_and_takes_the_documented_submit(
    tmp_path: Path, scratch: Path
) -> None:
    """docs/analytics.md's master and worker, started exactly as shown (its
    port 7077 swapped for a free one), then its spark-submit line on them:
    ``SPARK_MASTER_URL`` is what the block exports (issue 32: the page used it
    without defining it)."""
    import contextlib
    import signal
    import time

    page = doc_text("docs/analytics.md")
    (block,) = [b for b in fenced_blocks(page) if "deploy.master.Master" in b]
    port = _free_port()
    start = block.replace("7077", str(port))
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER", "SPARK_REMOTE")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["PYSPARK_PYTHON"] = sys.executable
    env.pop("SPARK_MASTER_URL", None)
    # The block as shown, then the ids of the two processes it left running.
    started = subprocess.run(
        ["bash", "-c", start + "\njobs -p"], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    pids = [int(p) for p in started.stdout.split()]
    assert len(pids) == 2, started.stdout
    try:
        deadline = time.monotonic() + 240
        log = tmp_path / "worker.log"
        while "Successfully registered with master" not in (
            log.read_text(errors="replace") if log.exists() else ""
        ):
            assert time.monotonic() < deadline, (tmp_path / "master.log").read_text()[-2000:]
            time.sleep(1)
        submit = _documented_submit_command()
        done = subprocess.run(
            ["bash", "-c", f"{start.splitlines()[1]}\n{submit}"], cwd=scratch,
            env={**env, "SPARK_LOCAL_IP": "127.0.0.1"}, capture_output=True, text=True,
            timeout=900,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-3000:]
        assert f"Spark 4.3.0 on spark://127.0.0.1:{port}" in done.stdout, done.stdout[-2000:]
        _check_submitted(scratch, done.stdout, env)
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


def _check_submitted(scratch: Path, stdout: str, env: dict[str, str]) -> None:
    """The documented submit's outputs: the table where the command names
    it, the same rows as the local engine's, the summary and the report."""
    out = scratch / "out/submitted"
    assert f"-> file://{scratch}/out/submitted/utilisation.parquet" in stdout, stdout[-2000:]
    local = subprocess.run(
        [sys.executable, "-m", "quotaform", "analyze", "utilisation",
         "tests/fixtures/analytics/manifest.yaml",
         "--usage", "tests/fixtures/analytics/usage.jsonl",
         "--out", "out/local", "--engine", "python"],
        cwd=scratch, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert local.returncode == 0, local.stderr
    cluster_rows = _rows(out / "utilisation.parquet")
    assert cluster_rows == _rows(scratch / "out/local/utilisation.parquet")
    assert len(cluster_rows) > 5
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["engine"] == "spark" and summary["rows"] == len(cluster_rows)
    assert (out / "report.md").read_text(encoding="utf-8").startswith("### quotaform")
