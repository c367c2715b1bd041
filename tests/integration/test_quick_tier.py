"""``bash scripts/test --quick``, the README's pre-push tier, run exactly as
the README shows it (issue 35), with pytest told to collect only (the quick
tier's tests are the unit and conformance tests this suite runs anyway): the
bootstrap, ruff, mypy and the import contracts run for real and pass, and the
tests it selects need no broker, no Spark JVM and no Prometheus."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.docblocks import fenced_block

ROOT = Path(__file__).resolve().parents[2]


def test_the_quick_tier_runs_as_the_readme_shows_it() -> None:
    block = fenced_block("README.md", after="Before a push")
    assert block.strip() == "bash scripts/test --quick"
    # mypy shares the suite's cache: scripts/test runs it under a lock
    # (.mypy.lock), so this run waits for the suite's own and reads its cache.
    env = {**os.environ, "PYTEST_ADDOPTS": "--collect-only -q"}
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run(
        ["bash", "-e", "-c", block], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=600, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    collected = re.findall(r"^(tests/[^:\s]+)::", done.stdout, flags=re.M)
    modules = set(collected)
    assert len(collected) > 1000, done.stdout[-2000:]
    assert all(m.startswith(("tests/unit/", "tests/conformance/")) for m in modules), sorted(
        m for m in modules if not m.startswith(("tests/unit/", "tests/conformance/"))
    )
    # The markers the tier leaves out select nothing it runs.
    deselected = re.search(r"(\d+)/(\d+) tests collected \((\d+) deselected\)", done.stdout)
    assert deselected is not None and int(deselected.group(3)) > 0, done.stdout[-500:]
    assert "Contracts: " in output and " broken" in output and "0 broken" in output, output[-2000:]
    assert "Success: no issues found" in output  # mypy
    assert "All checks passed!" in output  # ruff


pytestmark = pytest.mark.timeout(900)
