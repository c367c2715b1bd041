"""Operator-grade storage output (issue 23), offline from snapshot files:
the factor written leads and the computed one stands beside it with one
precision everywhere; bytes and durations in the manifests' units; the
markdown carries the policy, the scaled values, the cluster and the source;
an empty snapshot source is an error; `storage --help` cuts nothing."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from quotaform.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "storage"
GiB = 1 << 30
runner = CliRunner()


def _snapshots(tmp_path: Path, *, free: int, age_s: int = 1201) -> Path:
    """One broker, one 252 GiB volume with ``free`` bytes free, ``age_s`` old
    (the examples' policy: soft 20 % free, hard 50 GiB free, staleAfter 5m,
    so an age within staleAfter is given when the state should be judged)."""
    at = (datetime.now(UTC) - timedelta(seconds=age_s)).strftime("%Y-%m-%dT%H:%M:%SZ")
    capacity = 270553174016
    record = {
        "brokerId": "1",
        "snapshotAt": at,
        "hardLimit": {"type": "MinFreeBytes", "level": 50 * GiB},
        "softLimit": {"type": "MinFreePercentage", "level": 20},
        "volumes": [{"volumeName": "/data", "capacity": capacity, "consumed": capacity - free}],
    }
    path = tmp_path / "snaps.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return path


def _status(*args: str) -> str:
    result = runner.invoke(app, ["storage", "status", str(EXAMPLES), *args], env={"NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_status_leads_with_the_factor_written_and_reads_in_the_manifests_units(
    tmp_path: Path,
) -> None:
    # 53,901,000,704 bytes free of 270,553,174,016: between hard (50 GiB) and soft (20 %).
    text = _status("--snapshots", str(_snapshots(tmp_path, free=53901000704, age_s=90)))
    first = text.splitlines()[0]
    assert re.fullmatch(
        r"Storage policy: THROTTLE, factor 0\.\d0 \(volumes give 0\.\d{3}; .*\)", first
    ), first
    factors = re.findall(r"THROTTLE,? (?:factor )?(0\.\d+)", text)
    assert factors and all(len(f) in (4, 5) for f in factors), factors
    computed = {f for f in re.findall(r"0\.\d+", text) if len(f) == 5}
    assert len(computed) == 1, text  # the computed factor: one value, three decimals everywhere
    assert "Policy: soft MinFreePercentage 20%, hard MinFreeBytes 50GiB, staleAfter 5m," in text
    assert "pauseRate 1KiB" in text
    assert "free 50.2GiB" in text and "capacity 252GiB" in text
    assert "50.2GiB of 252GiB free" in text  # the reason, in the same units
    assert re.search(r"snapshot 1m3\ds old", text), text
    assert not re.search(r"\d,\d{3},\d{3}", text), text  # no raw byte counts
    assert " s old" not in text and " B," not in text
    assert 'user="svc-orders": producer_byte_rate declared 20MiB x 0.50 (THROTTLE)' in text
    assert 'Source: cluster "sandbox", volume usage from snapshots ' in text


def test_status_json_keeps_exact_numbers_and_says_both_factors(tmp_path: Path) -> None:
    doc = json.loads(
        _status("--snapshots", str(_snapshots(tmp_path, free=53901000704, age_s=90)), "-o", "json")
    )
    assert doc["brokers"][0]["volumes"][0]["free"] == 53901000704
    assert doc["computed_factor"] == doc["factor"] and 0.4 < doc["factor"] < 0.6
    assert doc["applied_factor"] in (0.45, 0.5, 0.55) and doc["applied_factor"] <= doc["factor"]
    assert doc["cluster"] == "sandbox" and doc["source"].startswith("snapshots ")


def test_status_markdown_has_the_policy_the_scaled_values_the_cluster_and_source(
    tmp_path: Path,
) -> None:
    md = _status(
        "--snapshots", str(_snapshots(tmp_path, free=53901000704, age_s=90)), "-o", "markdown"
    )
    assert "Policy: soft MinFreePercentage 20%, hard MinFreeBytes 50GiB, staleAfter 5m" in md
    assert '| `user="svc-orders"` | 20MiB | 0.50 | THROTTLE | 10MiB |' in md
    assert 'cluster "sandbox"' in md and "volume usage from snapshots" in md
    assert "**Storage policy: THROTTLE, factor 0." in md


def test_an_empty_snapshot_directory_is_an_error_not_a_pause(tmp_path: Path) -> None:
    empty = tmp_path / "none"
    empty.mkdir()
    result = runner.invoke(app, ["storage", "status", str(EXAMPLES), "--snapshots", str(empty)])
    assert result.exit_code == 1
    assert "no snapshot files" in result.output and "PAUSE" not in result.output
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n", encoding="utf-8")
    result = runner.invoke(app, ["storage", "status", str(EXAMPLES), "--snapshots", str(blank)])
    assert result.exit_code == 1 and "no snapshot record" in result.output


def test_storage_help_cuts_no_summary() -> None:
    result = runner.invoke(app, ["storage", "--help"])
    assert result.exit_code == 0
    commands = result.output[result.output.index("Commands:") :]
    assert "..." not in commands, commands
    watch = runner.invoke(app, ["storage", "watch", "--help"])
    assert "--create-topic" in watch.output


def test_a_stale_snapshot_says_its_age_as_a_duration(tmp_path: Path) -> None:
    text = _status("--snapshots", str(_snapshots(tmp_path, free=100 * GiB, age_s=1201)))
    assert re.search(r"snapshot 20m0\ds old \(staleAfter 5m\)", text), text
    assert "Storage policy: PAUSE, factor 0.00" in text  # onUnknown PAUSE
