"""``analyze --prometheus`` against a server that answers hostile or broken
content: one ``Error:`` line and exit 1 each, in bounded time, as a
subprocess (a crash or a hang shows as it would to a user)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.hostileserver import HostilePrometheus

MANIFEST = Path(__file__).resolve().parents[2] / "examples/prometheus/quotas.yaml"

#: answer -> what the one Error line says
EXPECTED = {
    "deep": "nested too deeply: more than 64 levels",
    "huge": "the answer is larger than 10 MiB, the limit for a Prometheus answer",
    "html200": "answered with text/html, not application/json",
    "short": "did not answer after 4 attempts",
    "slow": "was not complete by its deadline",
}


def _analyze(url: str, out: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    command = [
        sys.executable, "-m", "quotaform", "analyze", "utilisation", str(MANIFEST),
        "--prometheus", url, "--since", "10m", "--prometheus-timeout", "3s",
        "--max-usage-size", "10MiB", "--engine", "python", "--out", str(out),
    ]  # fmt: skip
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    return done, time.monotonic() - start


@pytest.mark.parametrize("answer", sorted(EXPECTED))
def test_a_hostile_prometheus_answer_is_one_error_line(tmp_path: Path, answer: str) -> None:
    with HostilePrometheus(answer, depth=100_000, size=50_000_000) as server:
        done, elapsed = _analyze(server.url, tmp_path / "out")
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert done.returncode == 1, done.stderr
    assert len(errors) == 1, done.stderr
    assert EXPECTED[answer] in errors[0], errors[0]
    assert server.url.removeprefix("http://") in errors[0], errors[0]
    assert "Traceback" not in done.stderr
    assert elapsed < 20, elapsed
