"""Storage-aware quotas, offline: the factor function (property tests), the
cluster-wide evaluation, scaling with hysteresis, the policy in manifests, the
snapshot format, drift and the saved plan's storage section."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quotaform.errors import ManifestError, StorageError
from quotaform.formats.plan import PlanDocument, plan_document, plan_from_document
from quotaform.formats.storage import read_snapshot_text, snapshot_record, status_document
from quotaform.kafka.entity import Entity
from quotaform.manifest import load_manifests
from quotaform.plan.diff import compute_plan
from quotaform.plan.drift import compute_drift
from quotaform.plan.review import review_plan
from quotaform.plan.state import LiveState
from quotaform.plan.storage import evaluate, scale_desired, scaled_value, volume_verdict
from quotaform.plan.storage_types import (
    BrokerSnapshot,
    Limit,
    LimitType,
    OnUnknown,
    StoragePolicy,
    StorageState,
    Volume,
)

from .builders import assert_plan_data_is_its_model

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
GiB = 1 << 30
CAP = 100 * GiB

LIMIT_PAIRS = [
    (Limit(LimitType.CONSUMED_BYTES, 70 * GiB), Limit(LimitType.CONSUMED_BYTES, 90 * GiB)),
    (Limit(LimitType.MIN_FREE_BYTES, 30 * GiB), Limit(LimitType.MIN_FREE_BYTES, 10 * GiB)),
    (Limit(LimitType.MIN_FREE_PERCENTAGE, 30), Limit(LimitType.MIN_FREE_PERCENTAGE, 10)),
]


@pytest.mark.parametrize(("soft", "hard"), LIMIT_PAIRS, ids=lambda v: str(v))
@given(a=st.integers(0, CAP), b=st.integers(0, CAP))
def test_the_factor_is_within_0_1_and_monotonic_in_consumed_space(
    soft: Limit, hard: Limit, a: int, b: int
) -> None:
    low, high = sorted((a, b))
    v_low = volume_verdict("1", Volume("/d", CAP, low), soft, hard)
    v_high = volume_verdict("1", Volume("/d", CAP, high), soft, hard)
    assert 0.0 <= v_high.factor <= v_low.factor <= 1.0
    order = {StorageState.OPEN: 0, StorageState.THROTTLE: 1, StorageState.PAUSE: 2}
    assert order[v_low.state] <= order[v_high.state]


@pytest.mark.parametrize(("soft", "hard"), LIMIT_PAIRS, ids=lambda v: str(v))
def test_one_under_the_soft_limit_and_pause_at_the_hard_limit(soft: Limit, hard: Limit) -> None:
    at = {"soft": 70 * GiB, "hard": 90 * GiB}  # every pair is reached at these consumed bytes
    under = volume_verdict("1", Volume("/d", CAP, at["soft"]), soft, hard)
    assert (under.state, under.factor) == (StorageState.OPEN, 1.0)
    mid = volume_verdict("1", Volume("/d", CAP, 80 * GiB), soft, hard)
    assert mid.state is StorageState.THROTTLE and mid.factor == pytest.approx(0.5)
    near = volume_verdict("1", Volume("/d", CAP, 88 * GiB), soft, hard)
    assert near.factor == pytest.approx(0.1)  # more throttling closer to the hard limit
    paused = volume_verdict("1", Volume("/d", CAP, at["hard"]), soft, hard)
    assert (paused.state, paused.factor, paused.binding) == (StorageState.PAUSE, 0.0, "hard")


def _snap(broker: str, consumed: int, age_s: float = 10.0, **kw: object) -> BrokerSnapshot:
    return BrokerSnapshot(
        broker,
        NOW - timedelta(seconds=age_s),
        (Volume("/d", CAP, consumed),),
        **kw,  # type: ignore[arg-type]
    )


POLICY = StoragePolicy(soft=LIMIT_PAIRS[1][0], hard=LIMIT_PAIRS[1][1], stale_after_s=60)


def test_the_most_restrictive_volume_of_the_cluster_wins() -> None:
    two_volumes = BrokerSnapshot(
        "2", NOW, (Volume("/a", CAP, 10 * GiB), Volume("/b", CAP, 85 * GiB))
    )
    result = evaluate(POLICY, [_snap("1", 75 * GiB), two_volumes], now=NOW, expected=["1", "2"])
    assert result.state is StorageState.THROTTLE
    assert result.factor == pytest.approx(0.25)  # /b on broker 2, not broker 1's 0.75
    assert "broker 2 volume /b" in (result.reason or "")
    paused = evaluate(POLICY, [_snap("1", 95 * GiB), two_volumes], now=NOW, expected=["1", "2"])
    assert (paused.state, paused.factor) == (StorageState.PAUSE, 0.0)


def test_a_stale_or_silent_broker_triggers_on_unknown() -> None:
    fresh = _snap("1", 10 * GiB)
    stale = _snap("2", 10 * GiB, age_s=600)
    result = evaluate(POLICY, [fresh, stale], now=NOW, expected=["1", "2", "3"])
    assert result.state is StorageState.PAUSE and result.lack_of_data
    assert result.unknown == ("2", "3")
    assert [b.status for b in result.brokers] == ["fresh", "stale", "missing"]
    opened = evaluate(
        StoragePolicy(
            soft=POLICY.soft, hard=POLICY.hard, stale_after_s=60, on_unknown=OnUnknown.OPEN
        ),
        [fresh, stale],
        now=NOW,
        expected=["1", "2", "3"],
    )
    assert opened.state is StorageState.OPEN and not opened.lack_of_data
    assert "onUnknown OPEN ignores" in (opened.reason or "")
    errored = evaluate(POLICY, [_snap("1", 0, error="log dir /d: KafkaStorageError")], now=NOW)
    assert errored.state is StorageState.PAUSE and errored.brokers[0].status == "error"


MANIFEST = """\
apiVersion: quotaform.io/v1
kind: ClientQuotas
metadata: {cluster: c}
spec:
  scope: [{shape: user}]
  storagePolicy:
    soft: {type: MinFreeBytes, level: 30GiB}
    hard: {type: MinFreeBytes, level: 10GiB}
    exempt: [{user: platform}]
    pauseRate: 2KiB
    hysteresis: 10%
  quotas:
    - entity: {user: a}
      values: {producer_byte_rate: 10MiB, consumer_byte_rate: 1MiB}
    - entity: {user: b}
      values: {producer_byte_rate: 1KiB}
    - entity: {user: platform}
      values: {producer_byte_rate: 100MiB}
"""


def _desired(tmp_path: Path, text: str = MANIFEST):  # type: ignore[no-untyped-def]
    path = tmp_path / "m.yaml"
    path.write_text(text, encoding="utf-8")
    return load_manifests([path])


def test_scaling_writes_declared_times_factor_and_leaves_exempt_entities(tmp_path: Path) -> None:
    desired = _desired(tmp_path)
    assert desired.storage is not None and desired.storage.step == pytest.approx(0.1)
    result = evaluate(desired.storage, [_snap("1", 76 * GiB)], now=NOW)  # factor 0.7
    scaled, scaling = scale_desired(desired, desired.storage, result, {})
    a, b, platform = (Entity.of(user=u) for u in ("a", "b", "platform"))
    assert scaling.state is StorageState.THROTTLE and scaling.factor == pytest.approx(0.7)
    assert scaled.entities[a].quotas == {
        "consumer_byte_rate": 1048576.0,
        "producer_byte_rate": float(int(10 * 1048576 * 0.7)),
    }
    assert (
        scaled.entities[b].quotas["producer_byte_rate"] == 1024.0
    )  # never below min(declared, pause)
    assert scaled.entities[platform].quotas["producer_byte_rate"] == 100 * 1048576.0
    assert scaling.exempt == (platform,)
    paused = evaluate(desired.storage, [_snap("1", 95 * GiB)], now=NOW)
    scaled, _ = scale_desired(desired, desired.storage, paused, {})
    assert scaled.entities[a].quotas["producer_byte_rate"] == 2048.0  # pauseRate
    assert scaled_value(1024.0, StorageState.PAUSE, 0.0, 2048.0) == 1024.0  # never above declared


def test_a_factor_within_one_step_of_the_live_one_is_held(tmp_path: Path) -> None:
    desired = _desired(tmp_path)
    assert desired.storage is not None
    a = Entity.of(user="a")
    live = {
        a: {"producer_byte_rate": float(int(10 * 1048576 * 0.7))},
        Entity.of(user="b"): {"producer_byte_rate": 1024.0},  # below the pause value: as declared
    }
    wandered = evaluate(desired.storage, [_snap("1", 77 * GiB)], now=NOW)  # 0.65 -> step 0.6
    _, scaling = scale_desired(desired, desired.storage, wandered, live)
    assert scaling.held and scaling.factor == pytest.approx(0.7)
    moved = evaluate(desired.storage, [_snap("1", 80 * GiB)], now=NOW)  # 0.5: two steps
    _, scaling = scale_desired(desired, desired.storage, moved, live)
    assert not scaling.held and scaling.factor == pytest.approx(0.5)


def test_drift_compares_with_the_scaled_values_and_reports_a_scale_to_apply(
    tmp_path: Path,
) -> None:
    desired = _desired(tmp_path)
    assert desired.storage is not None
    a, platform = Entity.of(user="a"), Entity.of(user="platform")
    declared = {e: dict(d.quotas) for e, d in desired.entities.items()}
    throttled = evaluate(desired.storage, [_snap("1", 80 * GiB)], now=NOW)
    live_scaled = LiveState(
        {**declared, a: {**declared[a], "producer_byte_rate": float(int(10 * 1048576 * 0.5))}}
    )
    scaled, scaling = scale_desired(desired, desired.storage, throttled, live_scaled)
    report = compute_drift(scaled, live_scaled, storage=scaling)
    assert report.in_sync and not report.scale_pending  # a scaled quota is not drift
    live_declared = LiveState(declared)  # written when OPEN; the factor moved since
    scaled, scaling = scale_desired(desired, desired.storage, throttled, live_declared)
    report = compute_drift(scaled, live_declared, storage=scaling)
    assert report.in_sync and [c.entity for c in report.scale_pending] == [a]
    hand_edited = LiveState({**declared, platform: {"producer_byte_rate": 5.0}})
    scaled, scaling = scale_desired(desired, desired.storage, throttled, hand_edited)
    report = compute_drift(scaled, hand_edited, storage=scaling)
    assert [c.entity for c in report.changed] == [platform]


def test_restoring_a_paused_quota_is_not_relaxing_and_round_trips_in_the_plan(
    tmp_path: Path,
) -> None:
    desired = _desired(tmp_path)
    assert desired.storage is not None
    paused_live = LiveState(
        {
            e: {**d.quotas, "producer_byte_rate": min(d.quotas["producer_byte_rate"], 2048.0)}
            if e != Entity.of(user="platform")
            else dict(d.quotas)
            for e, d in desired.entities.items()
        }
    )
    opened = evaluate(desired.storage, [_snap("1", 10 * GiB)], now=NOW)
    scaled, scaling = scale_desired(desired, desired.storage, opened, paused_live)
    plan = compute_plan(scaled, paused_live)
    from dataclasses import replace

    plan = replace(plan, storage=scaling)
    review = review_plan(plan, scaled)
    assert not review.violations  # 2KiB -> 10MiB is x5120, but it is the declared value
    doc = plan_document(plan, review)
    assert_plan_data_is_its_model(plan, review)
    again, _ = plan_from_document(PlanDocument.model_validate(json.loads(doc.model_dump_json())))
    assert again.storage is not None
    assert (again.storage.state, again.storage.factor) == (StorageState.OPEN, 1.0)
    assert again.storage.declared() == scaling.declared()


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (
            "soft: {type: MinFreeBytes, level: 1GiB}\n    hard: {type: MinFreeBytes, level: 5GiB}",
            "spec.storagePolicy: the soft limit (MinFreeBytes 1GiB) must be reached "
            "before the hard limit",
        ),
        (
            "soft: {type: FreeSpace, level: 1}\n    hard: {type: MinFreeBytes, level: 5GiB}",
            "spec.storagePolicy.soft.type",
        ),
        (
            "soft: {type: MinFreePercentage, level: 150%}\n"
            "    hard: {type: MinFreeBytes, level: 5GiB}",
            "within 0..100",
        ),
        (
            "soft: {type: MinFreeBytes, level: 9GiB}\n    hard: {type: MinFreeBytes, level: 5GiB}\n"
            "    appliesTo: [{user: nobody}]",
            'spec.storagePolicy.appliesTo[0]: user="nobody" is not declared with '
            "producer_byte_rate",
        ),
        (
            "soft: {type: MinFreeBytes, level: 9GiB}\n    hard: {type: MinFreeBytes, level: 5GiB}\n"
            "    staleAfter: soon",
            "is not a duration",
        ),
    ],
)
def test_a_bad_policy_names_the_file_line_and_field(
    tmp_path: Path, policy: str, message: str
) -> None:
    text = (
        "apiVersion: quotaform.io/v1\nkind: ClientQuotas\nmetadata: {cluster: c}\nspec:\n"
        "  scope: [{shape: user}]\n  storagePolicy:\n    " + policy + "\n  quotas:\n"
        "    - entity: {user: a}\n      values: {producer_byte_rate: 1MiB}\n"
    )
    with pytest.raises(ManifestError) as info:
        _desired(tmp_path, text)
    assert message in str(info.value)
    assert f"{tmp_path / 'm.yaml'}:" in str(info.value)


SEED_EXAMPLE = {
    "brokerId": "0",
    "snapshotAt": "2022-04-07T13:00:00Z",
    "hardLimit": {"type": "MinFreeBytes", "level": 1000000},
    "softLimit": {"type": "MinFreePercentage", "level": 5},
    "volumes": [{"volumeName": "/dev/sdd", "capacity": 107374182400, "consumed": 10737418240}],
}


def test_the_seeds_example_and_its_consumed_space_spelling_are_read() -> None:
    (snap,) = read_snapshot_text(json.dumps(SEED_EXAMPLE), "seed.json")
    assert snap.broker_id == "0" and snap.volumes[0].free == 107374182400 - 10737418240
    assert snap.soft == Limit(LimitType.MIN_FREE_PERCENTAGE, 5)
    text = json.dumps({**SEED_EXAMPLE, "hardLimit": {"type": "ConsumedSpace", "level": 9}})
    first, snap = read_snapshot_text(text + "\n" + text + "\n", "lines.jsonl")
    assert first == snap
    assert snap.hard == Limit(LimitType.CONSUMED_BYTES, 9)
    written = snapshot_record(snap, POLICY)
    assert written["hardLimit"] == {"type": "ConsumedBytes", "level": 9}  # the schema's spelling


def test_a_bad_snapshot_names_the_file_line_and_field() -> None:
    bad = {**SEED_EXAMPLE, "volumes": [{"volumeName": "/d", "capacity": -1, "consumed": 0}]}
    text = json.dumps(SEED_EXAMPLE) + "\n" + json.dumps(bad) + "\n"
    with pytest.raises(StorageError, match=r"^snaps.jsonl:2: volumes\.0\.capacity: "):
        list(read_snapshot_text(text, "snaps.jsonl"))
    with pytest.raises(StorageError, match=r"snaps.jsonl:1: \(json\)"):
        list(read_snapshot_text("{not json\n", "snaps.jsonl"))


def test_every_problem_of_a_bad_snapshot_is_named_with_its_line() -> None:
    bad = {
        **SEED_EXAMPLE,
        "brokerId": "",
        "softLimit": {"type": "Lots", "level": 5},
        "volumes": [{"volumeName": "/d", "capacity": -1}],
    }
    text = json.dumps(SEED_EXAMPLE) + "\n\n" + json.dumps(bad) + "\n"
    with pytest.raises(StorageError) as caught:
        list(read_snapshot_text(text, "snaps.jsonl"))
    assert str(caught.value).splitlines() == [
        'snaps.jsonl:3: brokerId: String should have at least 1 character (got "")',
        "snaps.jsonl:3: softLimit.type: Input should be 'ConsumedBytes', 'MinFreeBytes', "
        "'MinFreePercentage' or 'ConsumedSpace' (got \"Lots\")",
        "snaps.jsonl:3: volumes.0.capacity: Input should be greater than or equal to 0 (got -1)",
        "snaps.jsonl:3: volumes.0.consumed: Field required",
    ]


def test_the_status_document_keeps_the_contract_shape() -> None:
    result = evaluate(POLICY, [_snap("1", 80 * GiB)], now=NOW, expected=["1"])
    data = json.loads(status_document(POLICY, result).model_dump_json())
    assert {"format_version", "state", "factor", "brokers"} <= set(data)
    assert data["state"] == "THROTTLE" and data["factor"] == pytest.approx(0.5)
    (broker,) = data["brokers"]
    assert {"broker_id", "snapshot_at", "volumes"} <= set(broker)
    (volume,) = broker["volumes"]
    assert volume["capacity"] == CAP and isinstance(volume["free"], int)
    assert {"name", "capacity", "consumed", "free", "state", "factor"} <= set(volume)
    assert data["metrics"]["throttling_for_lack_of_data"] == 0
