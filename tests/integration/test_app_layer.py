"""The application layer is a front end of its own: the README's library
example (``quotaform.app`` driven without the CLI) runs exactly as shown
against the sandbox broker, and gives the verdict ``quotaform drift`` gives."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.broker

ROOT = Path(__file__).resolve().parents[2]


def _readme_example() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    development = readme[readme.index("## Development") :]
    match = re.search(r"```python\n(.*?)```", development, re.S)
    assert match is not None, "README 'Development' shows no Python example"
    return match.group(1)


def test_the_readme_example_drives_the_app_layer_like_the_cli(bootstrap: str) -> None:
    code = _readme_example()
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
