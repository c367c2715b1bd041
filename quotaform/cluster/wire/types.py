"""Typed requests and results of the client-quota RPCs (KIP-546).

These are the values the wire layer takes and returns; they carry no
kafka-python objects, so planning code and tests can build them freely.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from quotaform.errors import BrokerError
from quotaform.kafka.entity import Entity

__all__ = [
    "AlterOutcome",
    "AlterResult",
    "FilterComponent",
    "MatchType",
    "QuotaAlteration",
    "record_count",
]


class MatchType(enum.IntEnum):
    """DescribeClientQuotas filter match types (``ClientQuotaFilterComponent``)."""

    EXACT = 0
    """The entity name equals ``match``."""
    DEFAULT = 1
    """The default entity of the type (``match`` must be null)."""
    ANY = 2
    """Any entity of the type, the default included (``MATCH_TYPE_SPECIFIED``)."""


@dataclass(frozen=True, slots=True)
class FilterComponent:
    """One filter component of a DescribeClientQuotas request.

    Build with :meth:`exact`, :meth:`default` or :meth:`any`. ``match`` is only
    set for EXACT; the broker rejects a match string with DEFAULT/ANY (42).
    """

    entity_type: str
    match_type: MatchType
    match: str | None = None

    @classmethod
    def exact(cls, entity_type: str, name: str) -> FilterComponent:
        """Entities whose ``entity_type`` part is named ``name``."""
        return cls(entity_type, MatchType.EXACT, name)

    @classmethod
    def default(cls, entity_type: str) -> FilterComponent:
        """Entities whose ``entity_type`` part is the default entity."""
        return cls(entity_type, MatchType.DEFAULT, None)

    @classmethod
    def any(cls, entity_type: str) -> FilterComponent:
        """Entities with any ``entity_type`` part, named or default."""
        return cls(entity_type, MatchType.ANY, None)


@dataclass(frozen=True, slots=True)
class QuotaAlteration:
    """The ops for one entity in an AlterClientQuotas request.

    ``ops`` maps quota key to the new quota value (float64 on the wire; bytes/s,
    %, mutations/s or connections/s by key) or to ``None`` to remove the key.
    Removing a key that is not set is accepted by the broker and writes nothing.
    """

    entity: Entity
    ops: Mapping[str, float | None]

    def __post_init__(self) -> None:
        if not self.ops:
            raise ValueError(f"alteration for {self.entity} has no ops")


def record_count(alteration: QuotaAlteration) -> int:
    """Metadata records the controller writes for ``alteration``: one per op.

    The controller refuses a request over 10,000 records as a whole
    (POLICY_VIOLATION, ``ClientQuotaControlManager``), so batches are counted in
    these units.
    """
    return len(alteration.ops)


class AlterOutcome(enum.Enum):
    """What happened to one entity of an AlterClientQuotas request.

    With ``validate_only`` APPLIED means "would be applied" (valid).
    """

    APPLIED = "applied"
    FAILED = "failed"
    UNKNOWN = "unknown"
    """The request was written but no answer arrived (timeout, lost
    connection): the alter may or may not have committed; describe the entity
    to learn which."""
    NOT_SENT = "not-sent"
    """The request never left this process (no connection, or the connection
    failed before it was written): nothing was applied."""


@dataclass(frozen=True, slots=True)
class AlterResult:
    """The result for one entity, matched by entity (never by position)."""

    entity: Entity
    outcome: AlterOutcome
    error: BrokerError | None = field(default=None)
