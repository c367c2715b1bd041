"""The hostile-input corpus of scripts/hostile_inputs.py (issue 31), its
``--ci`` version, against the session broker: every reader of quotaform
(manifests, saved plans, profiles, --command-config, --prometheus-config,
quota and volume snapshots, usage in every layout, a live Prometheus
misbehaving on loopback) is fed nesting 100,000 deep, a 20 MB scalar,
invalid UTF-8 and a FIFO (a live Prometheus: a deep answer and a body that
stops half way). Every case must be refused (``Error:``, exit 1, no
traceback) or accepted with the output a correct read gives, within 20 s and
2 GiB: none may crash, print a traceback, run over time or memory, or read
wrongly. The whole corpus (917 cases: nesting 1k, 10k and 100k in every
placement, 200 MB scalars, a million keys, NUL bytes, BOM, CRLF, truncated
and empty files, HTML answers, directories, symlink loops, files rewritten
while read, the Spark engine) is ``scripts/hostile_inputs.py`` without
``--ci``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.broker

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "hostile_inputs.py"
FAILING = ("misread", "crashed", "traceback", "over-time", "over-memory")
READERS = (
    "manifests",
    "plan-file",
    "profiles",
    "command-config",
    "prometheus-config",
    "quota-snapshot",
    "volume-snapshot",
    "usage-jsonl",
    "usage-csv",
    "usage-prometheus",
    "usage-jmxtool",
    "usage-parquet",
    "prometheus-live",
)


@pytest.mark.timeout(900)
def test_every_hostile_input_is_refused_or_read_correctly(bootstrap: str, tmp_path: Path) -> None:
    out = tmp_path / "hostile.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--ci",
            "--bootstrap-server",
            bootstrap,
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=840,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert out.exists(), proc.stderr[-3000:]
    results = json.loads(out.read_text(encoding="utf-8"))
    bad_controls = [c for c in results["controls"] if not c["ok"]]
    assert bad_controls == [], bad_controls
    assert set(results["summary"]) == set(READERS)
    failed = [
        f"{r['reader']} {r['case']}: {r['command']}"
        f"{' (spark)' if r['engine'] == 'spark' else ''}: {r['outcome']}: {r['why']}"
        for r in results["cases"]
        if r["outcome"] in FAILING
    ]
    assert failed == [], "\n".join(failed)
    assert proc.returncode == 0, proc.stderr[-3000:]
