"""The worked analytics example of docs/analytics.md, run exactly as shown (offline,
in a scratch directory holding a copy of `tests/fixtures/analytics/`): the
utilisation, the recommendation from a quota snapshot and `--write-into` a
new file of a manifest set, which then still validates. The last two lines
(`plan`, `impact --plan`) need a cluster and collected usage: they run in
`tests/integration/test_analytics_e2e.py`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.docblocks import fenced_block, shell_commands

ROOT = Path(__file__).resolve().parents[2]


def _worked_example() -> list[str]:
    return shell_commands(fenced_block("docs/analytics.md", after="## A worked example"))


def test_the_documented_worked_example_runs_as_shown(tmp_path: Path) -> None:
    commands = _worked_example()
    offline = commands[: next(i for i, c in enumerate(commands) if c.startswith("quotaform plan"))]
    assert len(offline) == 4, offline
    shutil.copytree(ROOT / "tests/fixtures/analytics", tmp_path / "tests/fixtures/analytics")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    for command in offline:
        done = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, (command, done.stderr[-2000:])
    assert (tmp_path / "out/util/utilisation.parquet").exists()
    assert (tmp_path / "out/rec-now/recommend.parquet").exists()
    written = (tmp_path / "recm/recommended.yaml").read_text(encoding="utf-8")
    assert "recommended by quotaform analyze" in written
    valid = subprocess.run(
        [sys.executable, "-m", "quotaform", "validate", "recm/"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert valid.returncode == 0, valid.stderr
