"""docs/analytics.md "Trying it on a sandbox broker" run as shown (issue 32):
``quotaform sandbox up --exporter`` puts the JMX exporter agent on a sandbox
broker, ``python -m quotaform.sandbox.prometheus --sandbox NAME`` runs a real
Prometheus scraping it, and ``analyze utilisation --prometheus`` reads back
the usage of a client this test drives (kafka-python, client id
``carol-app``, on loopback), at the quota the manifest gives it. The sandbox
name is the page's with this session's pid appended."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest

from tests.docblocks import fenced_block

pytestmark = [pytest.mark.broker, pytest.mark.prometheus]

ROOT = Path(__file__).resolve().parents[2]
HEADING = "### Trying it on a sandbox broker"
NAME = f"pytest-metrics-{os.getpid()}"


def _env() -> dict[str, str]:
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUOTAFORM_")}
    return {**env, "PATH": path, "PYTHONPATH": pythonpath}


def _shown(block: str) -> str:
    return block.replace("--name metrics", f"--name {NAME}").replace(
        "--sandbox metrics", f"--sandbox {NAME}"
    )


def _stop_prometheus() -> None:
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if "quotaform.sandbox.prometheus" in cmdline and NAME in cmdline:
            proc.terminate()
            proc.wait(20)


@pytest.fixture
def workdir(tmp_path: Path, prometheus_binary: Path) -> Iterator[Path]:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    try:
        yield tmp_path
    finally:
        _stop_prometheus()
        subprocess.run(
            [sys.executable, "-m", "quotaform", "sandbox", "down", "--name", NAME],
            env=_env(), capture_output=True, timeout=120, check=False,
        )  # fmt: skip


def _produce(bootstrap: str, seconds: float) -> int:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="carol-app", linger_ms=5)
    sent, payload, end = 0, b"x" * 20_000, time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            producer.send("usage-check", payload)
            sent += len(payload)
            time.sleep(0.1)  # about 200 KB/s, under carol-app's 512 KiB/s
        producer.flush(30)
    finally:
        producer.close(10)
    return sent


def test_the_documented_sandbox_prometheus_reads_a_clients_usage(workdir: Path) -> None:
    setup = _shown(fenced_block("docs/analytics.md", after=HEADING))
    # Output to files, not pipes: the background Prometheus keeps its
    # inherited descriptors open after bash exits.
    out, err = workdir / "setup.out", workdir / "setup.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        done = subprocess.run(
            ["bash", "-e", "-c",
             f"{setup}\necho \"$QUOTAFORM_BOOTSTRAP_SERVER\" > bootstrap.txt"],
            cwd=workdir, env=_env(), stdout=stdout, stderr=stderr, timeout=600,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    said = out.read_text(encoding="utf-8") + err.read_text(encoding="utf-8")
    assert done.returncode == 0, said[-3000:]
    assert "Prometheus exporter: http://127.0.0.1:" in said, said[-2000:]
    bootstrap = (workdir / "bootstrap.txt").read_text(encoding="utf-8").strip()
    url_file = workdir / "prometheus.url"
    deadline = time.monotonic() + 120
    while not url_file.read_text(encoding="utf-8").strip() and time.monotonic() < deadline:
        time.sleep(0.2)
    url = url_file.read_text(encoding="utf-8").strip()
    assert url.startswith("http://127.0.0.1:"), url
    status = subprocess.run(
        [sys.executable, "-m", "quotaform", "sandbox", "status", "--name", NAME],
        env=_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert ", exporter http://127.0.0.1:" in status.stdout, status.stdout

    assert _produce(bootstrap, 14.0) > 1_000_000
    time.sleep(4)  # two more scrapes of the rate after the last send
    read = fenced_block("docs/analytics.md", after="back:")
    assert read.startswith("quotaform analyze utilisation examples/prometheus/quotas.yaml")
    done = subprocess.run(
        ["bash", "-e", "-c", read], cwd=workdir, env=_env(), capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    rows = pq.read_table(workdir / "out" / "live" / "utilisation.parquet").to_pylist()
    carol = [
        r for r in rows if r["client_id"] == "carol-app" and r["quota_key"] == "producer_byte_rate"
    ]
    assert len(carol) == 1, rows
    assert carol[0]["quota_value"] == 512 * 1024 and carol[0]["level"] == 8, carol
    assert 50_000 < carol[0]["p50"] < 512 * 1024, carol
    summary = json.loads((workdir / "out" / "live" / "summary.json").read_text(encoding="utf-8"))
    assert summary["rows"] >= 1


def test_the_built_prometheus_says_its_version(prometheus_binary: Path) -> None:
    # A bare `go install` left it empty: "prometheus, version  (branch: , revision: )".
    from quotaform.sandbox.prometheus import PROMETHEUS_VERSION

    done = subprocess.run(
        [str(prometheus_binary), "--version"], capture_output=True, text=True, timeout=60
    )
    first = (done.stdout + done.stderr).splitlines()[0]
    assert first.startswith(f"prometheus, version {PROMETHEUS_VERSION.removeprefix('v')} ("), first
