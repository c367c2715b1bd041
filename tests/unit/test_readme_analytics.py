"""The worked analytics example of docs/analytics.md, run exactly as shown (offline,
in a scratch directory holding a copy of `tests/fixtures/analytics/`): the
utilisation, the recommendation from a quota snapshot, `--write-into` a new
file of a manifest set, which then still validates, and the impact of that
edit against the snapshot. Every line runs: the page starts nothing it does
not say (issue 32: it used `plan --out`, which needs a cluster, and a
`usage/` directory it never made)."""

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
    offline = _worked_example()
    assert len(offline) == 5, offline
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
    import pyarrow.parquet as pq

    impact = pq.read_table(tmp_path / "out/impact/impact.parquet").to_pylist()
    assert impact, "the recommendations change some quota"
    # Only what changes is listed: no "2MiB -> 2MiB, level 2 -> 1".
    assert all(r["quota_before"] != r["quota_after"] for r in impact), impact
