"""The storage policy's values (the Strimzi volume-usage proposal,
``../shared/seeds/003``): the policy, volume snapshots, the evaluation and
the scaling it gives a plan.

A leaf of the plan layer: plain frozen values over :mod:`quotaform.kafka`,
so the plan model and the desired state can hold them without importing the
rules in :mod:`quotaform.plan.storage` (which import the model).

Units: bytes (capacity, consumed, free, byte levels), percent of capacity
(``MinFreePercentage``), bytes/s (quota values), seconds (ages).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from quotaform.kafka.entity import Entity
from quotaform.kafka.units import format_bytes
from quotaform.plan.source import SourceLocation

__all__ = [
    "COMPUTED_FACTOR_DIGITS",
    "DEFAULT_PAUSE_RATE",
    "DEFAULT_STALE_AFTER_S",
    "DEFAULT_STEP",
    "NO_VOLUME_JUDGED",
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
    "applied_factor_text",
    "computed_factor_text",
    "volumes_factor_text",
]

#: Decimals of a computed factor (a volume's, a broker's, the evaluation's)
#: wherever one is shown; an applied factor is a multiple of the step
#: (0.05 by default) and shows two.
COMPUTED_FACTOR_DIGITS = 3


def applied_factor_text(factor: float) -> str:
    """The factor written into quotas, as every output shows it: ``0.50``."""
    return f"{factor:.2f}"


def computed_factor_text(factor: float) -> str:
    """A factor the volumes give (before the step and the hold), as every
    output shows it: ``0.505``."""
    return f"{factor:.{COMPUTED_FACTOR_DIGITS}f}"


#: Said instead of ``volumes give 0.000`` when no volume was judged.
NO_VOLUME_JUDGED = "no volume judged"


def volumes_factor_text(computed: float, *, judged: bool) -> str:
    """``volumes give 0.505``, or :data:`NO_VOLUME_JUDGED` when every broker
    was unknown (the factor is then ``onUnknown``'s, not the volumes')."""
    return f"volumes give {computed_factor_text(computed)}" if judged else NO_VOLUME_JUDGED


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
        return f"{self.type.value} {format_bytes(self.level)}"


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
    (then it is unknown, never fine). ``soft`` / ``hard`` are the record's
    own limits, kept for writing records back; :func:`evaluate` ignores them
    (the policy governs; a volume's own limits do override it)."""

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
    brokers have volume verdicts that count. ``reason`` is a whole
    statement: for a stale broker it says the snapshot's age and
    ``staleAfter``, for a missing one that there is no snapshot (so a
    renderer shows it instead of the age, not beside it)."""

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
            12GiB of 250GiB free, past its soft limit (THROTTLE 0.400)``
            (``None`` when OPEN with data).
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
    def judged(self) -> bool:
        """Whether any volume was judged (a fresh broker reported one); when
        none was, ``factor`` comes from ``onUnknown`` alone."""
        return any(b.volumes for b in self.brokers)

    @property
    def unknown(self) -> tuple[str, ...]:
        """Ids of the brokers that could not be judged."""
        return tuple(b.broker_id for b in self.brokers if b.status != "fresh")

    def ages(self) -> dict[str, float | None]:
        """``{broker id: snapshot age in seconds}`` (``None``: no snapshot)."""
        return {b.broker_id: b.age_s for b in self.brokers}


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
        judged: some volume was judged; ``False`` when every broker was
            unknown (``computed`` is then ``onUnknown``'s, not the volumes').
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
    judged: bool = True

    def declared(self) -> dict[Entity, float]:
        """``{entity: declared producer_byte_rate}`` of the scaled entities."""
        return {s.entity: s.declared for s in self.scaled}

    def holds(self, now: StorageScaling) -> bool:
        """Whether a plan made with this scaling may still be applied when the
        policy gives ``now``: the same state, and factors within one step."""
        return self.state is now.state and abs(self.factor - now.factor) <= self.step + 1e-9
