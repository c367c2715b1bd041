"""Storage-aware producer quotas: the rules of the volume-usage policy of the Strimzi
proposal (``../shared/seeds/003``), run from outside the broker.

Pure functions over the values of :mod:`quotaform.plan.storage_types`:

* :func:`volume_verdict`: one volume against a soft and a hard limit: state
  ``OPEN`` (factor 1) while the soft limit complies, ``THROTTLE`` between the
  limits with the share of the soft-to-hard distance that remains as the
  factor (more throttling closer to the hard limit), ``PAUSE`` (factor 0) at
  or past the hard limit.
* :func:`evaluate`: cluster-wide, the most restrictive volume of every broker
  wins (PAUSE if **any** volume breaches its hard limit); a broker without a
  fresh snapshot triggers the policy's ``onUnknown``.
* :func:`scale_desired`: the declared ``producer_byte_rate`` values times the
  factor (``pauseRate`` under PAUSE, since the broker rejects 0), with a
  hysteresis step so quotas do not flap; the plan, apply and drift use the
  result like any declared state.

Units: bytes (capacity, consumed, free, byte levels), percent of capacity
(``MinFreePercentage``), bytes/s (quota values), seconds (ages).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from types import MappingProxyType

from quotaform.kafka.entity import Entity
from quotaform.kafka.units import format_bytes, format_duration, same_value
from quotaform.plan.model import Action, EntityChange, KeyAction
from quotaform.plan.state import DesiredEntity, DesiredState, LiveState
from quotaform.plan.storage_types import (
    SCALED_KEY,
    BrokerSnapshot,
    BrokerVerdict,
    Limit,
    OnUnknown,
    ScaledKey,
    StorageEvaluation,
    StoragePolicy,
    StorageScaling,
    StorageState,
    Volume,
    VolumeVerdict,
    computed_factor_text,
)

__all__ = [
    "evaluate",
    "only_scales",
    "rescale",
    "scale_desired",
    "scaled_value",
    "volume_verdict",
]


def volume_verdict(broker_id: str, volume: Volume, soft: Limit, hard: Limit) -> VolumeVerdict:
    """Judge one volume (a volume's own limits override ``soft`` / ``hard``).

    Each limit becomes the consumed bytes at which it is reached on this
    volume (:meth:`Limit.consumed_at`). Consumed at or past the hard one:
    PAUSE, factor 0. Past the soft one: THROTTLE with factor ``(hard_at -
    consumed) / (hard_at - soft_at)``, in (0, 1]; when the limits leave no
    room between them (``hard_at <= soft_at``) the volume goes from OPEN to
    PAUSE directly. Otherwise OPEN, factor 1. Monotonic: more consumed never
    gives a larger factor.
    """
    soft = volume.soft or soft
    hard = volume.hard or hard
    soft_at = soft.consumed_at(volume.capacity)
    hard_at = hard.consumed_at(volume.capacity)
    used = float(volume.consumed)
    if used >= hard_at:
        return VolumeVerdict(broker_id, volume, soft_at, hard_at, "hard", StorageState.PAUSE, 0.0)
    if used > soft_at and hard_at > soft_at:
        factor = min(1.0, max(0.0, (hard_at - used) / (hard_at - soft_at)))
        return VolumeVerdict(
            broker_id, volume, soft_at, hard_at, "soft", StorageState.THROTTLE, factor
        )
    return VolumeVerdict(broker_id, volume, soft_at, hard_at, None, StorageState.OPEN, 1.0)


_ORDER = {StorageState.OPEN: 0, StorageState.THROTTLE: 1, StorageState.PAUSE: 2}


def _worst(verdicts: Iterable[VolumeVerdict]) -> VolumeVerdict | None:
    return min(verdicts, key=lambda v: (-_ORDER[v.state], v.factor), default=None)


def _broker_verdict(
    policy: StoragePolicy, broker_id: str, snap: BrokerSnapshot | None, now: datetime
) -> BrokerVerdict:
    """One broker judged on its latest snapshot (``None``: it sent none):
    missing, error, stale, or fresh with its volumes' verdicts."""
    if snap is None:
        return BrokerVerdict(broker_id, "missing", None, None, reason="no snapshot from it")
    age = max(0.0, (now - snap.snapshot_at).total_seconds())
    if snap.error is not None:
        return BrokerVerdict(broker_id, "error", snap.snapshot_at, age, reason=snap.error)
    if age > policy.stale_after_s:
        return BrokerVerdict(
            broker_id,
            "stale",
            snap.snapshot_at,
            age,
            reason=f"snapshot {format_duration(age)} old "
            f"(staleAfter {format_duration(policy.stale_after_s)})",
        )
    if not snap.volumes:
        return BrokerVerdict(
            broker_id, "error", snap.snapshot_at, age, reason="no volumes reported"
        )
    verdicts = tuple(volume_verdict(broker_id, v, policy.soft, policy.hard) for v in snap.volumes)
    worst = _worst(verdicts)
    assert worst is not None
    return BrokerVerdict(
        broker_id, "fresh", snap.snapshot_at, age, verdicts, worst.state, worst.factor
    )


def evaluate(
    policy: StoragePolicy,
    snapshots: Iterable[BrokerSnapshot],
    *,
    now: datetime,
    expected: Sequence[str] | None = None,
) -> StorageEvaluation:
    """The cluster-wide state from the brokers' latest snapshots.

    Args:
        snapshots: the latest snapshot per broker (a later one for the same
            broker replaces an earlier one).
        now: the time ages are measured from (timezone-aware).
        expected: the brokers that should report (DescribeCluster); ``None``
            when unknown (only the brokers that reported are judged).

    Returns:
        The most restrictive volume of every fresh broker decides (PAUSE if
        any volume is at its hard limit); any broker that is stale (older
        than ``policy.stale_after_s``), missing, or reported an error makes
        the state ``policy.on_unknown`` (PAUSE: factor 0; OPEN: the known
        brokers decide) with ``lack_of_data`` set when that changed the state.
    """
    latest: dict[str, BrokerSnapshot] = {}
    for snap in snapshots:
        kept = latest.get(snap.broker_id)
        if kept is None or snap.snapshot_at >= kept.snapshot_at:
            latest[snap.broker_id] = snap
    ids = sorted(set(latest) | set(expected or ()), key=_broker_order)
    brokers = [_broker_verdict(policy, b, latest.get(b), now) for b in ids]
    worst = _worst(v for b in brokers for v in b.volumes)
    unknown = [b for b in brokers if b.status != "fresh"]
    if worst is None:
        state, factor = StorageState.OPEN, 1.0
        reason = None
    else:
        state, factor = worst.state, worst.factor
        reason = None if state is StorageState.OPEN else _why(worst)
    lack = False
    if unknown or not brokers:
        what = (
            "; ".join(f"broker {b.broker_id}: {b.reason}" for b in unknown)
            if unknown
            else "no broker reported"
        )
        if policy.on_unknown is OnUnknown.PAUSE:
            lack = state is not StorageState.PAUSE
            state, factor = StorageState.PAUSE, 0.0
            reason = f"onUnknown PAUSE: {what}" + (f"; {reason}" if reason else "")
        elif not brokers:
            reason = f"onUnknown OPEN: {what}"
        else:
            reason = (f"{reason}; " if reason else "") + f"onUnknown OPEN ignores {what}"
    return StorageEvaluation(
        state=state,
        factor=factor,
        brokers=tuple(brokers),
        reason=reason,
        lack_of_data=lack,
        expected_known=expected is not None,
        evaluated_at=now,
    )


def _broker_order(broker_id: str) -> tuple[int, int | str]:
    return (0, int(broker_id)) if broker_id.isdigit() else (1, broker_id)


def _why(verdict: VolumeVerdict) -> str:
    volume = verdict.volume
    limit = "hard" if verdict.state is StorageState.PAUSE else "soft"
    return (
        f"{verdict.label}: {format_bytes(volume.free)} of {format_bytes(volume.capacity)} free, "
        f"past its {limit} limit ({verdict.state.value} {computed_factor_text(verdict.factor)})"
    )


def only_scales(change: EntityChange, declared: Mapping[Entity, float]) -> bool:
    """Whether ``change`` is a rescale and nothing else: an update of an
    existing entity whose only key change moves a live ``producer_byte_rate``
    of a scaled entity (``declared``: :meth:`StorageScaling.declared`,
    computed once by the caller). Creating an entity, or adding the key to
    one, is not a rescale: it is left for a reviewed apply."""
    return (
        change.action is Action.UPDATE
        and change.entity in declared
        and all(kc.key == SCALED_KEY and kc.action is KeyAction.CHANGE for kc in change.key_changes)
    )


def scaled_value(declared: float, state: StorageState, factor: float, pause_rate: float) -> float:
    """The ``producer_byte_rate`` written for ``declared`` bytes/s: unchanged
    when OPEN; ``min(declared, pause_rate)`` under PAUSE; otherwise
    ``declared x factor`` rounded down to whole bytes/s (a LONG quota), never
    below the pause value and never above ``declared``."""
    floor_rate = min(declared, pause_rate)
    if state is StorageState.OPEN:
        return declared
    if state is StorageState.PAUSE:
        return floor_rate
    return float(max(floor_rate, min(declared, math.floor(declared * factor))))


def _stepped(factor: float, step: float) -> float:
    """``factor`` rounded down to a multiple of ``step`` (1 stays 1)."""
    if factor >= 1.0:
        return 1.0
    return round(math.floor(factor / step + 1e-9) * step, 6)


def _live_factor(
    declared: Mapping[Entity, float],
    live: Mapping[Entity, Mapping[str, float]],
    policy: StoragePolicy,
) -> tuple[StorageState, float] | None:
    """The state and factor the live quotas were written with, if every
    scaled entity agrees on one; ``None`` otherwise."""
    if not declared:
        return None
    values = {e: live.get(e, {}).get(SCALED_KEY) for e in declared}
    if any(v is None for v in values.values()):
        return None
    candidates: list[tuple[StorageState, float]] = [
        (StorageState.OPEN, 1.0),
        (StorageState.PAUSE, 0.0),
    ]
    biggest = max(declared, key=lambda e: declared[e])
    ratio = (values[biggest] or 0.0) / declared[biggest]
    stepped = round(round(ratio / policy.step) * policy.step, 6)
    if 0.0 < stepped < 1.0:
        candidates.append((StorageState.THROTTLE, stepped))
    for state, factor in candidates:
        if all(
            same_value(values[e] or 0.0, scaled_value(d, state, factor, policy.pause_rate))
            for e, d in declared.items()
        ):
            return state, factor
    return None


def scale_desired(
    desired: DesiredState,
    policy: StoragePolicy,
    evaluation: StorageEvaluation,
    live: LiveState | Mapping[Entity, Mapping[str, float]],
) -> tuple[DesiredState, StorageScaling]:
    """``desired`` with every scaled ``producer_byte_rate`` replaced by its
    written value (:func:`scaled_value`), and the record of what was scaled.

    The factor written is the evaluation's rounded down to the step; when
    the live quotas were written with the same state and a factor within one
    step of it, the live factor is kept (``held``), so a factor wandering
    inside one step never rewrites quotas.
    """
    entries = live.entities if isinstance(live, LiveState) else live
    declared = {
        e: d.quotas[SCALED_KEY]
        for e, d in desired.entities.items()
        if SCALED_KEY in d.quotas and policy.scales(e)
    }
    exempt = tuple(
        e for e, d in desired.entities.items() if SCALED_KEY in d.quotas and not policy.scales(e)
    )
    state = evaluation.state
    factor = {StorageState.OPEN: 1.0, StorageState.PAUSE: 0.0}.get(
        state, _stepped(evaluation.factor, policy.step)
    )
    if state is StorageState.THROTTLE and factor <= 0.0:
        factor = 0.0  # below the first step: the pause value, still THROTTLE
    held = False
    applied = _live_factor(declared, entries, policy)
    if (
        applied is not None
        and state is StorageState.THROTTLE
        and applied[0] is StorageState.THROTTLE
        and abs(applied[1] - factor) <= policy.step + 1e-9
    ):
        held = not same_value(applied[1], factor)
        factor = applied[1]
    scaled_state, scaled = rescale(desired, policy, state, factor)
    scaling = StorageScaling(
        state=state,
        factor=factor,
        computed=evaluation.factor,
        held=held,
        reason=evaluation.reason,
        ages=evaluation.ages(),
        lack_of_data=evaluation.lack_of_data,
        scaled=scaled,
        exempt=exempt,
        step=policy.step,
        pause_rate=policy.pause_rate,
        evaluated_at=evaluation.evaluated_at,
        judged=evaluation.judged,
    )
    return scaled_state, scaling


def rescale(
    desired: DesiredState, policy: StoragePolicy, state: StorageState, factor: float
) -> tuple[DesiredState, tuple[ScaledKey, ...]]:
    """``desired`` with every scaled ``producer_byte_rate`` written for
    ``state`` and ``factor`` (:func:`scaled_value`), and the scaled keys."""
    scaled: list[ScaledKey] = []
    entities: list[DesiredEntity] = []
    for entity, wanted in desired.entities.items():
        if SCALED_KEY in wanted.quotas and policy.scales(entity):
            declared = wanted.quotas[SCALED_KEY]
            written = scaled_value(declared, state, factor, policy.pause_rate)
            scaled.append(ScaledKey(entity, declared, written, str(wanted.source)))
            wanted = replace(wanted, quotas={**wanted.quotas, SCALED_KEY: written})
        entities.append(wanted)
    return replace(desired, entities=_frozen(entities)), tuple(scaled)


def _frozen(entities: list[DesiredEntity]) -> Mapping[Entity, DesiredEntity]:
    return MappingProxyType({d.entity: d for d in entities})
