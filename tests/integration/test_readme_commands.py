"""The README's main commands, run exactly as shown against the session's
sandbox broker (in a scratch directory holding a copy of
``examples/manifests/``, the broker's quotas wiped before and after): a plan
saved and reviewed as markdown, shown offline, applied from the file; drift
then finds the cluster in sync; explain answers from the manifests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docblocks import ROOT, fenced_block, shell_commands

pytestmark = pytest.mark.broker


def _run(command: str, cwd: Path, bootstrap: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QUOTAFORM_BOOTSTRAP_SERVER": bootstrap, "NO_COLOR": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_readme_main_commands_run_as_shown(
    bootstrap: str,
    clean: None,
    tmp_path: Path,
) -> None:
    plan, show, apply = shell_commands(fenced_block("README.md", after="## The main commands"))
    (drift,) = shell_commands(fenced_block("README.md", after="Notice what changed"))
    (explain,) = shell_commands(fenced_block("README.md", after="Ask which quota"))
    shutil.copytree(ROOT / "examples" / "manifests", tmp_path / "examples" / "manifests")

    planned = _run(plan, tmp_path, bootstrap)
    assert planned.returncode == 0, planned.stderr[-3000:]
    review = (tmp_path / "plan.md").read_text(encoding="utf-8")
    assert "to create" in review and "svc-payments-api" in review, review[:2000]

    shown = _run(show, tmp_path, bootstrap)
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert "svc-payments-api" in shown.stdout

    applied = _run(apply, tmp_path, bootstrap)
    assert applied.returncode == 0, applied.stderr[-3000:]

    drifted = _run(drift, tmp_path, bootstrap)
    assert drifted.returncode == 0, drifted.stderr[-3000:]
    report = json.loads(drifted.stdout)
    assert report["in_sync"] is True, report

    explained = _run(explain, tmp_path, bootstrap)
    assert explained.returncode == 0, explained.stderr[-3000:]
    assert 'user="svc-payments-api", client-id="payments-api"' in explained.stdout
    assert "producer_byte_rate" in explained.stdout
