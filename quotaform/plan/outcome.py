"""What an apply did, as plain data: the overall :class:`ApplyStatus`, each
entity's :class:`EntityOutcome`, what the read-back found on each broker
(:class:`BrokerReadBack`), the :class:`ApplyResult` the executor
(:func:`quotaform.cluster.apply.apply_plan`) returns and the renderers and
formats read, without importing the executor.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from quotaform.kafka.brokers import BrokerNode
from quotaform.kafka.entity import Entity
from quotaform.kafka.units import same_quotas
from quotaform.plan.model import EntityChange

__all__ = [
    "APPLY_FORMAT_VERSION",
    "ApplyResult",
    "ApplyStatus",
    "BrokerReadBack",
    "BrokerState",
    "EntityOutcome",
    "EntityResult",
]

#: Version of the JSON apply result (``schemas/apply.schema.json``).
APPLY_FORMAT_VERSION = 1


class ApplyStatus(enum.Enum):
    """How an apply ended; the CLI maps each to an exit code (``quotaform.errors``)."""

    NOTHING_TO_DO = "nothing-to-do"
    APPLIED = "applied"
    """Every entity applied and the read-back matched (exit 0)."""
    REJECTED = "rejected"
    """The validate_only pre-check refused entities: nothing was applied (exit 1)."""
    NOTHING_APPLIED = "nothing-applied"
    """The connection was lost before any real alter left this process; a
    validate_only request never writes: nothing was applied (exit 1)."""
    PARTIAL = "partial"
    """At least one entity failed, is unknown, or was not sent after others
    were (exit 3)."""
    NOT_CONVERGED = "not-converged"
    """Every entity was applied, but the read-back still differed after the
    timeout (on the connection, or on some broker), or could not be read
    (exit 4)."""
    REFUSED = "refused"
    """The guard rails refused the plan before anything was sent (exit 1;
    decided by the caller, never by :func:`apply_plan`)."""
    CANCELLED = "cancelled"
    """Nobody typed ``yes`` (or no input was available): nothing sent (exit 1)."""
    STALE = "stale"
    """A saved plan's entities changed on the cluster since it was made:
    nothing sent (exit 5)."""


class EntityOutcome(enum.Enum):
    """What happened to one entity."""

    APPLIED = "applied"
    """The broker answered that it committed the alter."""
    FAILED = "failed"
    """The broker refused it, with an error code and message."""
    UNKNOWN = "unknown"
    """The alter was sent and no answer came: it may or may not have committed."""
    NOT_APPLIED = "not-applied"
    """Never sent for real: refused by, or stopped at, the validate_only
    pre-check, or not sent after the connection was lost."""


@dataclass(frozen=True, slots=True)
class EntityResult:
    """One entity's result: its planned change and what happened to it.

    Attributes:
        change: the planned change.
        outcome: applied / failed / unknown / not-applied.
        message: the broker's error (code and message) or why it was not
            sent, if any.
        live_after: quotas read back after the apply (``None`` = not read).
    """

    change: EntityChange
    outcome: EntityOutcome
    message: str | None = None
    live_after: Mapping[str, float] | None = None

    @property
    def converged(self) -> bool:
        """The read-back shows the planned quotas."""
        return self.live_after is not None and same_quotas(self.live_after, self.change.after)


class BrokerState(enum.Enum):
    """What the read-back found on one broker of a cluster of several."""

    MATCHED = "matched"
    """The broker shows every applied entity as planned."""
    LAGGING = "lagging"
    """The broker answered, but still showed some applied entities otherwise
    at the deadline (its copy of the metadata log lags)."""
    UNREACHABLE = "unreachable"
    """The broker did not answer its last describe within the read-back
    timeout (down, hung, not in the client's metadata, or too slow)."""
    FENCED = "fenced"
    """DescribeCluster lists the broker as fenced: it serves no clients and
    cannot be reached, so it was not read."""


@dataclass(frozen=True, slots=True)
class BrokerReadBack:
    """The read-back on one broker: the same strict describes sent to it by
    node id until it showed the plan or the read-back timeout passed.

    Attributes:
        broker: the broker as DescribeCluster listed it.
        state: matched / lagging / unreachable / fenced.
        differing: the applied entities it did not show as planned at the
            deadline (LAGGING), sorted.
        error: why its last describe failed (UNREACHABLE), else ``None``.
    """

    broker: BrokerNode
    state: BrokerState
    differing: tuple[Entity, ...] = ()
    error: str | None = None

    @property
    def matched(self) -> bool:
        """The broker shows the plan."""
        return self.state is BrokerState.MATCHED


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """The outcome of :func:`apply_plan`.

    Attributes:
        status: overall status.
        entities: one report per pending change, sorted by entity.
        rpc_counts: RPCs made by the apply (validate, alter, read-back).
        readback_seconds: time spent waiting for the read-back to match.
        readback_error: why the read-back could not be made (the cluster
            stopped answering), ``None`` when it was made.
        error: why nothing was applied (``NOTHING_APPLIED``), else ``None``.
        brokers: on a cluster of several brokers, the read-back on each, by
            node id (empty for one broker: the read-back through the
            connection is that broker's).
    """

    status: ApplyStatus
    entities: tuple[EntityResult, ...] = ()
    rpc_counts: Mapping[str, int] = field(default_factory=dict)
    readback_seconds: float = 0.0
    readback_error: str | None = None
    error: str | None = None
    brokers: tuple[BrokerReadBack, ...] = ()

    def by_outcome(self, outcome: EntityOutcome) -> tuple[EntityResult, ...]:
        """The reports with ``outcome``."""
        return tuple(r for r in self.entities if r.outcome is outcome)

    @property
    def unconfirmed_brokers(self) -> tuple[BrokerReadBack, ...]:
        """The brokers the read-back could not confirm (lagging, unreachable
        or fenced)."""
        return tuple(b for b in self.brokers if not b.matched)

    @property
    def uncertain(self) -> bool:
        """Whether what the cluster now holds is not fully known: an entity is
        unknown, or the read-back could not be made."""
        return bool(self.by_outcome(EntityOutcome.UNKNOWN)) or self.readback_error is not None
