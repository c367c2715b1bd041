"""The plan: what apply would change, entity by entity and key by key (Terraform's model).

A :class:`Plan` is plain data: :func:`quotaform.diff.compute_plan` makes it,
the renderers (:mod:`quotaform.render`) print it, :func:`quotaform.apply.apply_plan`
executes it. Nothing here talks to Kafka or prints.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from quotaform.entity import Entity
from quotaform.wire.types import QuotaAlteration

if TYPE_CHECKING:
    from quotaform.guards import Fallback, GuardViolation

__all__ = [
    "PLAN_FORMAT_VERSION",
    "Action",
    "EntityChange",
    "KeyAction",
    "KeyChange",
    "Plan",
    "PlanSummary",
]

#: Version of the JSON plan format (``schemas/plan.schema.json``).
PLAN_FORMAT_VERSION = 1

Quotas = Mapping[str, float]
"""``{quota key: quota value}``; units by key (bytes/s, %, mutations/s, connections/s)."""


class Action(enum.Enum):
    """What apply does to one entity."""

    CREATE = "create"
    """The entity has no quotas live; every declared key is added."""
    UPDATE = "update"
    """Some keys are added, changed or removed; one alter entry, never delete + create."""
    DELETE = "delete"
    """Every key is removed, so the entity disappears (needs deletes allowed)."""
    NO_OP = "no-op"
    """Live equals declared."""

    @property
    def symbol(self) -> str:
        """``+`` create, ``~`` update, ``-`` delete, blank for no-op."""
        return {"create": "+", "update": "~", "delete": "-", "no-op": " "}[self.value]


class KeyAction(enum.Enum):
    """What apply does to one quota key of an entity."""

    ADD = "add"
    CHANGE = "change"
    REMOVE = "remove"


@dataclass(frozen=True, slots=True)
class KeyChange:
    """One quota key's change; ``before`` is ``None`` for add, ``after`` for remove."""

    key: str
    action: KeyAction
    before: float | None
    after: float | None


@dataclass(frozen=True, slots=True)
class EntityChange:
    """One entity's change.

    Attributes:
        entity: the entity.
        action: create / update / delete / no-op.
        before: live quotas (empty for create).
        after: declared quotas (empty for delete).
        key_changes: the keys that differ, sorted by key.
        source: ``"path:line"`` of the declaration, ``None`` for a delete.
    """

    entity: Entity
    action: Action
    before: Quotas
    after: Quotas
    key_changes: tuple[KeyChange, ...]
    source: str | None = None

    def alteration(self) -> QuotaAlteration | None:
        """The AlterClientQuotas entry carrying only the changed keys and the
        removals, or ``None`` for a no-op."""
        if not self.key_changes:
            return None
        return QuotaAlteration(self.entity, {kc.key: kc.after for kc in self.key_changes})


@dataclass(frozen=True, slots=True)
class PlanSummary:
    """Counts of entity changes by action."""

    create: int
    update: int
    delete: int
    no_op: int

    @property
    def has_changes(self) -> bool:
        """True when apply would send anything."""
        return bool(self.create or self.update or self.delete)


@dataclass(frozen=True, slots=True)
class Plan:
    """A reviewable set of entity changes for one cluster.

    Attributes:
        cluster: the manifests' cluster name.
        cluster_id: the id of the cluster the live state was read from.
        changes: every in-scope entity, declared or live, sorted by entity
            (no-ops included so reviewers and read-back see the whole scope).
        deletes_allowed: the manifests or a flag allow deletes.
        unmanaged: live entities outside the scope, left alone.
        rpc_counts: RPCs made to read the live state, by API name.
        warnings: notes for the reviewer (manifest warnings, blocked deletes).
        violations: guard-rail violations (``quotaform.guards``): protected
            entities, the change budget; apply refuses a plan with any.
        fallbacks: for every removed key, what its clients get instead
            (a default entity's value, or unlimited): ``{(entity, key): Fallback}``.
    """

    cluster: str
    cluster_id: str | None
    changes: tuple[EntityChange, ...]
    deletes_allowed: bool
    unmanaged: int = 0
    rpc_counts: Mapping[str, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    violations: tuple[GuardViolation, ...] = ()
    fallbacks: Mapping[tuple[Entity, str], Fallback] = field(default_factory=dict)

    @property
    def summary(self) -> PlanSummary:
        """Counts by action."""
        counts = {a: 0 for a in Action}
        for change in self.changes:
            counts[change.action] += 1
        return PlanSummary(
            create=counts[Action.CREATE],
            update=counts[Action.UPDATE],
            delete=counts[Action.DELETE],
            no_op=counts[Action.NO_OP],
        )

    @property
    def pending(self) -> tuple[EntityChange, ...]:
        """The changes apply would send (everything but no-ops)."""
        return tuple(c for c in self.changes if c.action is not Action.NO_OP)

    @property
    def blocked_deletes(self) -> tuple[EntityChange, ...]:
        """Deletes apply must refuse because deletes are not allowed (protected
        entities are judged by the guard rails: :attr:`violations`)."""
        return tuple(
            c for c in self.changes if c.action is Action.DELETE and not self.deletes_allowed
        )
