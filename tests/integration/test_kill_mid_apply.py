"""The small CI version of scripts/kill_mid_apply.py: the broker is SIGKILLed
during real applies, restarted on the same log dir, and every entity's
reported outcome is judged against Kafka's ConfigCommand; re-running apply
must converge. (The long series: see the script's docstring.)

The broker is the session's JMX broker, without client quotas at the start
(``jmx_broker``), killed and restarted here like any sandbox the script is
given by name; the script leaves it running, as it leaves every sandbox it
did not start. (A broker of its own would cost as much as one run.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from quotaform.sandbox import SandboxBroker, SandboxState, broker_status

# One worker of pytest-xdist holds the session's JMX broker and every module using it.
pytestmark = [pytest.mark.broker, pytest.mark.xdist_group("jmx")]

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "kill_mid_apply.py"


def test_killing_the_broker_mid_apply_never_misreports_and_reruns_converge(
    jmx_broker: SandboxBroker, tmp_path: Path
) -> None:
    out = tmp_path / "kill.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--runs",
            "2",
            "--entities",
            "2000",
            "--min-delay",
            "0",
            "--max-delay",
            "0.3",
            "--seed",
            "5",
            "--name",
            jmx_broker.name,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.exists(), proc.stderr[-3000:]
    summary = json.loads(out.read_text(encoding="utf-8"))["summary"]
    assert summary["runs"] == 2
    assert summary["misreported_entities"] == 0, proc.stderr[-3000:]
    assert summary["rerun_converged"] == 2, proc.stderr[-3000:]
    assert proc.returncode == 0
    # The script left the shared broker running (restarted on its own log dir).
    assert broker_status(name=jmx_broker.name).state is SandboxState.RUNNING
