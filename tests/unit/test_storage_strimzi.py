"""Storage-aware quotas as Strimzi users write them (issue 22): equal soft and
hard limits (the released plug-in's single limit), one rule for percentages
(``MinFreePercentage`` levels and ``hysteresis``), ISO-8601 durations, the
records' own limits, and text output that says what is true."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from quotaform.errors import ManifestError
from quotaform.formats.storage import VolumeSnapshotRecord, read_snapshot_text
from quotaform.manifest import load_manifests
from quotaform.manifest.models import parse_duration
from quotaform.plan.storage import evaluate, scale_desired
from quotaform.plan.storage_types import (
    BrokerSnapshot,
    Limit,
    LimitType,
    StoragePolicy,
    StorageState,
    Volume,
)
from quotaform.render.storage import scaling_headline, status_text
from quotaform.words import scaling_factor_text

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
GiB = 1 << 30
CAP = 100 * GiB


def _manifest(tmp_path: Path, policy: str) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(
        "apiVersion: quotaform.io/v1\nkind: ClientQuotas\nmetadata: {cluster: c}\nspec:\n"
        "  scope: [{shape: user}]\n  storagePolicy:\n"
        + "".join(f"    {line}\n" for line in policy.splitlines())
        + "  quotas:\n    - entity: {user: a}\n      values: {producer_byte_rate: 1MiB}\n",
        encoding="utf-8",
    )
    return path


def _policy(tmp_path: Path, policy: str) -> StoragePolicy:
    desired = load_manifests([_manifest(tmp_path, policy)])
    assert desired.storage is not None
    return desired.storage


def _refused(tmp_path: Path, policy: str) -> str:
    with pytest.raises(ManifestError) as info:
        load_manifests([_manifest(tmp_path, policy)])
    return str(info.value)


def _snap(consumed: int, age_s: float = 10.0) -> BrokerSnapshot:
    return BrokerSnapshot("1", NOW - timedelta(seconds=age_s), (Volume("/d", CAP, consumed),))


# ----------------------------------------------------------------- 1. soft = hard


def test_equal_soft_and_hard_limits_are_accepted_and_go_from_open_to_pause(
    tmp_path: Path,
) -> None:
    policy = _policy(
        tmp_path,
        "soft: {type: MinFreeBytes, level: 10GiB}\nhard: {type: MinFreeBytes, level: 10GiB}",
    )
    under = evaluate(policy, [_snap(80 * GiB)], now=NOW, expected=["1"])
    assert (under.state, under.factor) == (StorageState.OPEN, 1.0)
    at = evaluate(policy, [_snap(90 * GiB)], now=NOW, expected=["1"])
    assert (at.state, at.factor) == (StorageState.PAUSE, 0.0)
    message = _refused(
        tmp_path,
        "soft: {type: MinFreeBytes, level: 9GiB}\nhard: {type: MinFreeBytes, level: 10GiB}",
    )
    assert "the soft limit (MinFreeBytes 9GiB) must be reached before the hard limit" in message


# ----------------------------------------------------------------- 2. percentages


@pytest.mark.parametrize(("written", "percent"), [('"10%"', 10.0), ("10", 10.0), ("1", 1.0)])
def test_a_min_free_percentage_level_is_percent(
    tmp_path: Path, written: str, percent: float
) -> None:
    policy = _policy(
        tmp_path,
        f"soft: {{type: MinFreePercentage, level: {written}}}\n"
        "hard: {type: MinFreeBytes, level: 1GiB}",
    )
    assert policy.soft == Limit(LimitType.MIN_FREE_PERCENTAGE, percent)


def test_a_ratio_spelled_min_free_percentage_level_is_refused_at_its_line(
    tmp_path: Path,
) -> None:
    message = _refused(
        tmp_path,
        "soft: {type: MinFreePercentage, level: 0.1}\nhard: {type: MinFreeBytes, level: 1GiB}",
    )
    assert f"{tmp_path / 'm.yaml'}:7: spec.storagePolicy.soft.level: " in message
    assert '"10%"' in message and "0.1" in message


@pytest.mark.parametrize(("written", "step"), [('"5%"', 0.05), ("5", 0.05), ("50", 0.5)])
def test_hysteresis_follows_the_same_percent_rule(
    tmp_path: Path, written: str, step: float
) -> None:
    policy = _policy(
        tmp_path,
        "soft: {type: MinFreeBytes, level: 9GiB}\nhard: {type: MinFreeBytes, level: 5GiB}\n"
        f"hysteresis: {written}",
    )
    assert policy.step == pytest.approx(step)


def test_a_ratio_spelled_hysteresis_is_refused_at_its_line(tmp_path: Path) -> None:
    message = _refused(
        tmp_path,
        "soft: {type: MinFreeBytes, level: 9GiB}\nhard: {type: MinFreeBytes, level: 5GiB}\n"
        "hysteresis: 0.05",
    )
    assert f"{tmp_path / 'm.yaml'}:9: spec.storagePolicy.hysteresis: " in message
    assert '"5%"' in message


# ----------------------------------------------------------------- 3. ISO-8601


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("PT5M", 300.0), ("PT30S", 30.0), ("PT1H30M", 5400.0), ("PT0.5S", 0.5), ("P1D", 86400.0)],
)
def test_iso_8601_durations_are_read_next_to_short_ones(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds
    assert parse_duration(text.lower()) == seconds


@pytest.mark.parametrize("text", ["P", "PT", "PTM", "PT5", "P5M", "PT-5M", "PT0S"])
def test_iso_8601_nonsense_is_refused_clearly(text: str) -> None:
    with pytest.raises(ValueError, match="duration") as info:
        parse_duration(text)
    assert repr(text).strip("'") in str(info.value)


def test_stale_after_takes_an_iso_8601_duration(tmp_path: Path) -> None:
    policy = _policy(
        tmp_path,
        "soft: {type: MinFreeBytes, level: 9GiB}\nhard: {type: MinFreeBytes, level: 5GiB}\n"
        "staleAfter: PT5M",
    )
    assert policy.stale_after_s == 300.0


# ----------------------------------------------------------------- 4. records' limits


def test_the_records_own_limits_are_documented_as_ignored_and_are() -> None:
    schema = VolumeSnapshotRecord.model_json_schema(by_alias=True)
    for name in ("softLimit", "hardLimit"):
        description = schema["properties"][name].get("description", "")
        assert "ignored" in description and "storagePolicy" in description, name
    policy = StoragePolicy(
        soft=Limit(LimitType.MIN_FREE_BYTES, 30 * GiB), hard=Limit(LimitType.MIN_FREE_BYTES, GiB)
    )
    record = {
        "brokerId": "1",
        "snapshotAt": "2026-11-23T11:59:50Z",
        "softLimit": {"type": "MinFreeBytes", "level": 90 * GiB},  # would throttle
        "hardLimit": {"type": "MinFreeBytes", "level": 80 * GiB},  # would pause
        "volumes": [{"volumeName": "/d", "capacity": CAP, "consumed": 10 * GiB}],
    }
    snaps = list(read_snapshot_text(json.dumps(record), "s.json"))
    assert evaluate(policy, snaps, now=NOW).state is StorageState.OPEN


# ----------------------------------------------------------------- 5. text output

POLICY_YAML = (
    "soft: {type: MinFreeBytes, level: 30GiB}\nhard: {type: MinFreeBytes, level: 10GiB}\n"
    "staleAfter: 5m"
)


def test_a_stale_broker_says_its_age_once_and_no_volume_judged_is_said(tmp_path: Path) -> None:
    desired = load_manifests([_manifest(tmp_path, POLICY_YAML)])
    policy = desired.storage
    assert policy is not None
    evaluation = evaluate(policy, [_snap(10 * GiB, age_s=405)], now=NOW, expected=["1"])
    _, scaling = scale_desired(desired, policy, evaluation, {})
    text = status_text(policy, evaluation, scaling, cluster="c", source="snapshots s.json")
    assert "\nbroker 1: stale, snapshot 6m45s old (staleAfter 5m)\n" in text, text
    assert text.count("6m45s old") == 2, text  # the broker's line and the headline's reason
    assert "volumes give" not in text and "no volume judged" in scaling_headline(scaling)
    assert "no volume judged" in scaling_factor_text(scaling)
    judged = evaluate(policy, [_snap(80 * GiB)], now=NOW, expected=["1"])
    _, scaling = scale_desired(desired, policy, judged, {})
    assert "(volumes give 0.500;" in scaling_headline(scaling)


def test_a_missing_broker_does_not_say_no_snapshot_twice(tmp_path: Path) -> None:
    desired = load_manifests([_manifest(tmp_path, POLICY_YAML)])
    policy = desired.storage
    assert policy is not None
    evaluation = evaluate(policy, [], now=NOW, expected=["1"])
    _, scaling = scale_desired(desired, policy, evaluation, {})
    text = status_text(policy, evaluation, scaling, cluster="c", source="DescribeLogDirs")
    line = next(x for x in text.splitlines() if x.startswith("broker 1:"))
    assert line == "broker 1: missing, no snapshot from it", line
