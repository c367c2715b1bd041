"""The application layer is a front end of its own: the library example of
docs/architecture.md (``quotaform.app`` driven without the CLI) runs exactly as shown
against the sandbox broker, and gives the verdict ``quotaform drift`` gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docblocks import fenced_block

pytestmark = pytest.mark.broker

ROOT = Path(__file__).resolve().parents[2]


def _documented_example() -> str:
    return fenced_block("docs/architecture.md", after="## A second front end", language="python")


def test_the_documented_example_drives_the_app_layer_like_the_cli(bootstrap: str) -> None:
    code = _documented_example()
    assert "from quotaform.app.drift import DriftRequest, run_drift" in code
    env = {**os.environ, "QUOTAFORM_BOOTSTRAP_SERVER": bootstrap}
    library = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert library.returncode == 0, library.stderr[-3000:]
    cli = subprocess.run(
        [sys.executable, "-m", "quotaform", "drift", "examples/manifests", "-o", "json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode in (0, 2), cli.stderr[-3000:]
    report = json.loads(cli.stdout)
    expected = "in sync" if report["in_sync"] else f"drift: {len(report['changed'])} changed"
    assert library.stdout.strip() == expected
