"""Every command that reads a saved plan (show, explain --plan, apply, analyze
impact --plan) meets a hostile plan file with one ``Error:`` line naming the
file, exit 1, in bounded time: no traceback, no hang, no raw control
characters from the file name."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

#: Each command as a user types it, the plan file's path in place of {plan}.
COMMANDS = [
    ["show", "{plan}"],
    ["explain", "--plan", "{plan}", "--user", "svc-a"],
    # Refused before any connection: nothing listens on port 1.
    ["apply", "{plan}", "--bootstrap-server", "127.0.0.1:1"],
    ["analyze", "impact", "--plan", "{plan}", "--usage", "{usage}", "--out", "{out}"],
]


def _run(args: list[str], plan: Path) -> subprocess.CompletedProcess[str]:
    usage = plan.parent / "usage.csv"
    usage.write_text("cluster,broker,timestamp,metric,user,client_id,ip,value\n")
    fill = {"{plan}": str(plan), "{usage}": str(usage), "{out}": str(plan.parent / "out")}
    argv = [fill.get(a, a) for a in args]
    env = {k: v for k, v in os.environ.items() if k != "QUOTAFORM_PLAN_KEY"}
    return subprocess.run(
        [sys.executable, "-m", "quotaform", *argv],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def _hostile(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"{kind}.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "deep":
        path.write_text('{"plan": ' + "[" * 100_000 + "]" * 100_000 + ', "checksum": "x"}')
    elif kind == "digits":
        path.write_text('{"plan": {"x": ' + "9" * 5000 + '}, "checksum": "x"}')
    elif kind == "newline-name":
        path = tmp_path / "plan\nError: nothing wrong.json"
        path.write_text('{"plan": {}, "checksum": "x"}')
    return path


EXPECTED = {
    "fifo": "not a regular file (a FIFO)",
    "deep": "nested too deeply",
    "digits": "a number of 5000 characters: too long",
    "newline-name": "plan\\u000aError: nothing wrong.json",
}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_hostile_plan_file_gets_one_error_line(
    tmp_path: Path, kind: str, command: list[str]
) -> None:
    plan = _hostile(tmp_path, kind)
    start = time.monotonic()
    done = _run(command, plan)
    elapsed = time.monotonic() - start
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    errors = [line for line in lines if line.startswith("Error:")]
    assert len(errors) == 1, done.stderr
    assert EXPECTED[kind] in errors[0], done.stderr
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    # The file name cannot forge a second line.
    assert not any(line.startswith("Error: nothing wrong") for line in lines)
    assert elapsed < 20, elapsed
