"""The tampering series of scripts/tamper_plans.py, run in CI exactly as
docs/plan-and-apply.md shows it (it starts and stops its own sandbox broker): every forged
plan file is refused (non-zero exit, ``Error:`` lines, no traceback, no hang)
and Kafka's ConfigCommand shows the broker unchanged afterwards; the genuine
plan still applies."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.docblocks import doc_text

pytestmark = pytest.mark.broker

ROOT = Path(__file__).resolve().parents[2]
#: The command of docs/plan-and-apply.md, as shown there.
COMMAND = ".venv/bin/python scripts/tamper_plans.py --out tamper.json"


def test_every_tampered_plan_is_refused_and_the_broker_is_unchanged() -> None:
    assert COMMAND in doc_text("docs/plan-and-apply.md")
    out = ROOT / "tamper.json"
    out.unlink(missing_ok=True)
    try:
        proc = subprocess.run(
            ["bash", "-c", COMMAND], cwd=ROOT, capture_output=True, text=True, timeout=900
        )
        assert out.exists(), proc.stderr[-3000:]
        results = json.loads(out.read_text(encoding="utf-8"))
    finally:
        out.unlink(missing_ok=True)
    summary = results["summary"]
    assert summary["tampered"] >= 30
    failed = [t for t in results["tamperings"] if not (t["refused"] and t["broker_unchanged"])]
    assert failed == [], failed
    assert summary["hangs"] == 0 and summary["tracebacks"] == 0
    assert summary["genuine_plan_applied"] is True
    assert proc.returncode == 0, proc.stderr[-3000:]
    by_name = {t["tampering"]: t for t in results["tamperings"]}
    assert by_name["stale: the cluster moved since the plan"]["exit_code"] == 5
    assert (
        "plan.changes[0].key_changes[0].after: 2097152000 != 2097152"
        in (by_name["key_changes x1000, no manifests"]["error"])
    )
