"""The performance benchmark at a small size, so it cannot rot: it runs end
to end against the session broker and writes every figure. The figures are
not judged here (performance goals live in benchmarks/README.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_performance_benchmark_runs_at_a_small_size(bootstrap: str, tmp_path: Path) -> None:
    out = tmp_path / "performance.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "performance.py"),
            "--bootstrap-server",
            bootstrap,
            "--plan-sizes",
            "20",
            "--apply-sizes",
            "20",
            "--render-size",
            "50",
            "--repeat",
            "1",
            "--startup-runs",
            "3",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    startup = result["startup"]
    assert startup["quotaform_help"]["median_seconds"] > startup["python_c_pass"]["median_seconds"]
    assert any(row["module"].startswith("quotaform") for row in startup["help_imports"])
    assert any(row["module"].startswith("quotaform") for row in startup["plan_imports"])
    for kind in ("plan", "apply"):
        entry = result[kind]["20"]
        for side in ("floor", "quotaform"):
            assert entry[side]["median_seconds"] > 0
            assert entry[side]["peak_rss_mib"] > 5  # the measured process's own, not ours
        assert entry["ratio"] > 0
    assert result["render"]["entities"] == 50 and result["render"]["same_text"] is True
