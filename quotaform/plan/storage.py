"""Storage-aware producer quotas: the volume-usage policy of the Strimzi
proposal (``../shared/seeds/003``), run from outside the broker.

Pure functions over plain data:

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

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from types import MappingProxyType

from quotaform.kafka.entity import Entity
from quotaform.kafka.units import same_value
from quotaform.plan.model import EntityChange
from quotaform.plan.state import DesiredEntity, DesiredState, LiveState, SourceLocation

__all__ = [
    "DEFAULT_PAUSE_RATE",
    "DEFAULT_STALE_AFTER_S",
    "DEFAULT_STEP",
    "SCALED_KEY",
    "BrokerSnapshot",
    "BrokerVerdict",
    "Limit",
    "LimitType",
    "OnUnknown",
    "ScaledKey",
    "StorageEvaluation",
    "StoragePolicy",
    "StorageScaling",
    "StorageState",
    "Volume",
    "VolumeVerdict",
    "evaluate",
    "rescale",
    "scale_desired",
    "scaled_value",
    "volume_verdict",
]

#: The quota key the policy scales (the seed throttles produce only).
SCALED_KEY = "producer_byte_rate"
#: ``pauseRate`` default: the ``producer_byte_rate`` written under PAUSE, bytes/s.
DEFAULT_PAUSE_RATE = 1024.0
#: ``hysteresis`` default: factors move in steps of this size (0.05 = 5 %).
DEFAULT_STEP = 0.05
#: ``staleAfter`` default, seconds.
DEFAULT_STALE_AFTER_S = 300.0


class LimitType(enum.StrEnum):
    """How a limit's level is read (the seed's "Limit Types")."""

    CONSUMED_BYTES = "ConsumedBytes"
    """Breached when the consumed bytes of a volume exceed the level (bytes).
    The seed's text calls it ``ConsumedSpace``; both are accepted."""
    MIN_FREE_BYTES = "MinFreeBytes"
    """Breached when the free bytes of a volume drop below the level (bytes)."""
    MIN_FREE_PERCENTAGE = "MinFreePercentage"
    """Breached when the free share of a volume drops below the level (% of capacity)."""

    @classmethod
    def parse(cls, text: str) -> LimitType:
        """A limit type by name; ``ConsumedSpace`` (the seed's text) is
        ``ConsumedBytes`` (its JSON Schema, the authority).

        Raises:
            ValueError: an unknown name.
        """
        if text == "ConsumedSpace":
            return cls.CONSUMED_BYTES
        return cls(text)


@dataclass(frozen=True, slots=True)
class Limit:
    """A soft or hard limit: ``type`` and ``level`` (bytes, or % for
    ``MinFreePercentage``)."""

    type: LimitType
    level: float

    def consumed_at(self, capacity: float) -> float:
        """The consumed bytes at which this limit is reached on a volume of
        ``capacity`` bytes."""
        if self.type is LimitType.CONSUMED_BYTES:
            return self.level
        if self.type is LimitType.MIN_FREE_BYTES:
            return capacity - self.level
        return capacity * (1.0 - self.level / 100.0)

    def __str__(self) -> str:
        if self.type is LimitType.MIN_FREE_PERCENTAGE:
            return f"{self.type.value} {self.level:g}%"
        return f"{self.type.value} {int(self.level):,} B"


class StorageState(enum.StrEnum):
    """The seed's states, most restrictive last."""

    OPEN = "OPEN"
    THROTTLE = "THROTTLE"
    PAUSE = "PAUSE"


class OnUnknown(enum.StrEnum):
    """What a broker or volume that cannot report does (the seed's fail-safe: PAUSE)."""

    PAUSE = "PAUSE"
    OPEN = "OPEN"


@dataclass(frozen=True, slots=True)
class StoragePolicy:
    """``spec.storagePolicy`` of a manifest set.

    Attributes:
        soft: where throttling starts.
        hard: where produce is paused.
        stale_after_s: a snapshot older than this (seconds) is unknown.
        on_unknown: what an unknown broker or volume does.
        applies_to: the declared entities whose ``producer_byte_rate`` is
            scaled; ``None`` = every declared entity with one.
        exempt: never scaled (the seed: "the quota plug-in and platform
            services are not throttled").
        pause_rate: the ``producer_byte_rate`` written under PAUSE, bytes/s
            (never above the declared value).
        step: the hysteresis step: factors are rounded down to multiples of
            it, and a written factor is kept while the new one is within one
            step of it and the state is unchanged.
        source: where the policy is declared.
    """

    soft: Limit
    hard: Limit
    stale_after_s: float = DEFAULT_STALE_AFTER_S
    on_unknown: OnUnknown = OnUnknown.PAUSE
    applies_to: tuple[Entity, ...] | None = None
    exempt: tuple[Entity, ...] = ()
    pause_rate: float = DEFAULT_PAUSE_RATE
    step: float = DEFAULT_STEP
    source: SourceLocation | None = None

    def scales(self, entity: Entity) -> bool:
        """Whether ``entity``'s ``producer_byte_rate`` is scaled."""
        if entity in self.exempt:
            return False
        return self.applies_to is None or entity in self.applies_to


@dataclass(frozen=True, slots=True)
class Volume:
    """One volume (log dir) of a broker: ``capacity`` and ``consumed`` in
    bytes; optional per-volume limits override the policy's (the seed's note 2)."""

    name: str
    capacity: int
    consumed: int
    soft: Limit | None = None
    hard: Limit | None = None

    @property
    def free(self) -> int:
        """Free bytes (capacity - consumed, at least 0)."""
        return max(0, self.capacity - self.consumed)


@dataclass(frozen=True, slots=True)
class BrokerSnapshot:
    """One broker's volume usage at ``snapshot_at`` (the seed's "Volume Metrics
    snapshot"); ``error`` when the broker or a log dir could not report
    (then it is unknown, never fine)."""

    broker_id: str
    snapshot_at: datetime
    volumes: tuple[Volume, ...]
    soft: Limit | None = None
    hard: Limit | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class VolumeVerdict:
    """One volume judged: its numbers, the limit that binds (``soft``, ``hard``
    or ``None``), the consumed bytes at each limit, the state and factor."""

    broker_id: str
    volume: Volume
    soft_at: float
    hard_at: float
    binding: str | None
    state: StorageState
    factor: float

    @property
    def label(self) -> str:
        """``broker 1 volume /var/lib/kafka``."""
        return f"broker {self.broker_id} volume {self.volume.name}"


@dataclass(frozen=True, slots=True)
class BrokerVerdict:
    """One broker judged. ``status``: ``fresh``, ``stale``, ``missing`` (no
    snapshot from a broker that should report) or ``error``; only ``fresh``
    brokers have volume verdicts that count."""

    broker_id: str
    status: str
    snapshot_at: datetime | None
    age_s: float | None
    volumes: tuple[VolumeVerdict, ...] = ()
    state: StorageState | None = None
    factor: float | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class StorageEvaluation:
    """The cluster's storage state.

    Attributes:
        state: OPEN, THROTTLE or PAUSE.
        factor: 0..1, the most restrictive volume's factor (0 under PAUSE;
            not rounded to the step).
        brokers: every broker judged, sorted by id.
        reason: what decides the state, e.g. ``broker 2 volume /data:
            12.0 GiB free, THROTTLE 0.40`` (``None`` when OPEN with data).
        lack_of_data: ``onUnknown`` decided (the seed's "throttling applied
            due to lack of data" gauge).
        expected_known: the brokers that should report were known (from the
            cluster); otherwise only the brokers that reported were judged.
        evaluated_at: the time the ages are measured from.
    """

    state: StorageState
    factor: float
    brokers: tuple[BrokerVerdict, ...]
    reason: str | None
    lack_of_data: bool
    expected_known: bool
    evaluated_at: datetime

    @property
    def unknown(self) -> tuple[str, ...]:
        """Ids of the brokers that could not be judged."""
        return tuple(b.broker_id for b in self.brokers if b.status != "fresh")

    def ages(self) -> dict[str, float | None]:
        """``{broker id: snapshot age in seconds}`` (``None``: no snapshot)."""
        return {b.broker_id: b.age_s for b in self.brokers}


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
    brokers: list[BrokerVerdict] = []
    for broker_id in ids:
        found = latest.get(broker_id)
        if found is None:
            brokers.append(
                BrokerVerdict(broker_id, "missing", None, None, reason="no snapshot from it")
            )
            continue
        snap = found
        age = max(0.0, (now - snap.snapshot_at).total_seconds())
        if snap.error is not None:
            brokers.append(
                BrokerVerdict(broker_id, "error", snap.snapshot_at, age, reason=snap.error)
            )
            continue
        if age > policy.stale_after_s:
            brokers.append(
                BrokerVerdict(
                    broker_id,
                    "stale",
                    snap.snapshot_at,
                    age,
                    reason=f"snapshot {age:.0f} s old (staleAfter {policy.stale_after_s:g} s)",
                )
            )
            continue
        if not snap.volumes:
            brokers.append(
                BrokerVerdict(
                    broker_id, "error", snap.snapshot_at, age, reason="no volumes reported"
                )
            )
            continue
        verdicts = tuple(
            volume_verdict(broker_id, v, policy.soft, policy.hard) for v in snap.volumes
        )
        worst = _worst(verdicts)
        assert worst is not None
        brokers.append(
            BrokerVerdict(
                broker_id, "fresh", snap.snapshot_at, age, verdicts, worst.state, worst.factor
            )
        )
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
        f"{verdict.label}: {volume.free:,} of {volume.capacity:,} bytes free, past its {limit} "
        f"limit ({verdict.state.value} {verdict.factor:.2f})"
    )


# ----------------------------------------------------------------- scaling


@dataclass(frozen=True, slots=True)
class ScaledKey:
    """One entity's scaled ``producer_byte_rate``: ``declared`` and
    ``written`` in bytes/s."""

    entity: Entity
    declared: float
    written: float
    source: str | None = None


@dataclass(frozen=True, slots=True)
class StorageScaling:
    """What the storage policy did to a plan's desired state.

    Attributes:
        state: the cluster state the written values follow.
        factor: the factor written (a multiple of the step; 0 under PAUSE).
        computed: the evaluation's own factor (before the step and the hold).
        held: the factor already live was kept (within one step, same state).
        reason: what decided the state (which broker and volume).
        ages: snapshot age per broker, seconds (``None``: no snapshot).
        lack_of_data: ``onUnknown`` decided.
        scaled: every scaled entity, sorted by entity.
        exempt: declared entities with ``producer_byte_rate`` left as declared.
        step: the policy's hysteresis step.
        pause_rate: the policy's ``pauseRate``, bytes/s.
    """

    state: StorageState
    factor: float
    computed: float
    held: bool
    reason: str | None
    ages: Mapping[str, float | None]
    lack_of_data: bool
    scaled: tuple[ScaledKey, ...]
    exempt: tuple[Entity, ...] = ()
    step: float = DEFAULT_STEP
    pause_rate: float = DEFAULT_PAUSE_RATE
    evaluated_at: datetime | None = None

    def declared(self) -> dict[Entity, float]:
        """``{entity: declared producer_byte_rate}`` of the scaled entities."""
        return {s.entity: s.declared for s in self.scaled}

    def only_scales(self, change: EntityChange, declared: Mapping[Entity, float]) -> bool:
        """Whether ``change`` touches nothing but a scaled ``producer_byte_rate``
        (``declared``: :meth:`declared`, computed once by the caller)."""
        return change.entity in declared and all(kc.key == SCALED_KEY for kc in change.key_changes)

    def holds(self, now: StorageScaling) -> bool:
        """Whether a plan made with this scaling may still be applied when the
        policy gives ``now``: the same state, and factors within one step."""
        return self.state is now.state and abs(self.factor - now.factor) <= self.step + 1e-9


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
