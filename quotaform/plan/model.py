"""The plan: what apply would change, entity by entity and key by key (Terraform's model).

A :class:`Plan` is plain data: :func:`quotaform.plan.diff.compute_plan` makes
it, :func:`quotaform.plan.review.review_plan` judges it beside it, the
renderers print both, :func:`quotaform.cluster.apply.apply_plan` executes it.
:class:`EntityChange` is the one change type: plans, drift reports
(:mod:`quotaform.plan.drift`), stale saved plans and apply results all carry it.
Nothing here talks to Kafka or prints.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from quotaform.kafka.entity import SHAPE_NAMES, Entity
from quotaform.kafka.units import same_value
from quotaform.plan.enforcement import QuotaEnforcement
from quotaform.plan.storage_types import StorageScaling

__all__ = [
    "PLAN_FORMAT_VERSION",
    "Action",
    "EntityChange",
    "KeyAction",
    "KeyChange",
    "Plan",
    "PlanSummary",
    "Quotas",
    "diff_quotas",
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


def diff_quotas(before: Quotas, after: Quotas) -> tuple[KeyChange, ...]:
    """Per-key changes turning ``before`` into ``after``, sorted by quota key
    (values compared with :func:`~quotaform.kafka.units.same_value`)."""
    changes: list[KeyChange] = []
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        if old is None and new is not None:
            changes.append(KeyChange(key, KeyAction.ADD, None, float(new)))
        elif old is not None and new is None:
            changes.append(KeyChange(key, KeyAction.REMOVE, float(old), None))
        elif old is not None and new is not None and not same_value(old, new):
            changes.append(KeyChange(key, KeyAction.CHANGE, float(old), float(new)))
    return tuple(changes)


@dataclass(frozen=True, slots=True)
class EntityChange:
    """One entity's change from ``before`` to ``after``.

    In a plan ``before`` is live and ``after`` declared; in a drift report
    the same (apply would repair the drift that way); for a stale saved plan
    ``before`` is what the plan saw and ``after`` what the cluster holds now.

    Attributes:
        entity: the entity.
        action: create / update / delete / no-op.
        before: quotas before (empty for create), sorted by key.
        after: quotas after (empty for delete), sorted by key.
        key_changes: the keys that differ, sorted by key.
        source: ``"path:line"`` of the declaration, ``None`` when undeclared.
    """

    entity: Entity
    action: Action
    before: Quotas
    after: Quotas
    key_changes: tuple[KeyChange, ...]
    source: str | None = None

    @classmethod
    def between(
        cls, entity: Entity, before: Quotas, after: Quotas, *, source: str | None = None
    ) -> EntityChange:
        """The change turning ``before`` into ``after``, its action and key
        changes derived."""
        key_changes = diff_quotas(before, after)
        if not key_changes:
            action = Action.NO_OP
        elif not before:
            action = Action.CREATE
        elif not after:
            action = Action.DELETE
        else:
            action = Action.UPDATE
        return cls(
            entity=entity,
            action=action,
            before=dict(sorted(before.items())),
            after=dict(sorted(after.items())),
            key_changes=key_changes,
            source=source,
        )


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
    """The entity changes that turn one cluster's live state into the declared one.

    Attributes:
        cluster: the manifests' cluster name.
        cluster_id: the id of the cluster the live state was read from.
        changes: every in-scope entity, declared or live, sorted by entity
            (no-ops included so reviewers and read-back see the whole scope).
        unmanaged: live entities outside the scope, left alone.
        unmanaged_by_shape: the same per shape name (``user+client-id``),
            zeros included; empty when only the total is known.
        rpc_counts: RPCs made to read the live state, by API name.
        warnings: the manifests' warnings (``path:line: field: message``),
            then those ``plan`` adds once connected
            (:mod:`quotaform.plan.principals`: SCRAM users, super users).
        outside: ``{entity: quotas}`` of the live entities outside the scope
            (left alone; they take part in resolution, so explaining a plan
            needs them); empty when they were not read.
        storage: what the storage policy did to the declared values
            (:class:`~quotaform.plan.storage_types.StorageScaling`), ``None``
            without a policy.
        enforcement: how the cluster's brokers enforce quotas (how many, and
            any custom quota callback), read beside the live state; ``None``
            when not read. Informs the review (probes, fallbacks are default
            resolution); never steers apply.
    """

    cluster: str
    cluster_id: str | None
    changes: tuple[EntityChange, ...]
    unmanaged: int = 0
    unmanaged_by_shape: Mapping[str, int] = field(default_factory=dict)
    rpc_counts: Mapping[str, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    outside: Mapping[Entity, Quotas] = field(default_factory=dict)
    storage: StorageScaling | None = None
    enforcement: QuotaEnforcement | None = None

    @property
    def summary(self) -> PlanSummary:
        """Counts by action."""
        counts = dict.fromkeys(Action, 0)
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

    def after_state(self) -> dict[Entity, Quotas]:
        """``{entity: quotas}`` of the scope once the plan is applied (entities
        left without quotas omitted)."""
        return {c.entity: c.after for c in self.changes if c.after}

    @property
    def sees_whole_cluster(self) -> bool:
        """Whether every shape was described (so :attr:`outside` holds every
        live entity outside the scope and :meth:`after_entries` is complete)."""
        return set(self.unmanaged_by_shape) >= set(SHAPE_NAMES)

    def before_entries(self) -> dict[Entity, Quotas]:
        """The whole configuration the plan was made from: the scope's live
        quotas and :attr:`outside`."""
        return {**self.outside, **{c.entity: c.before for c in self.changes if c.before}}

    def after_entries(self) -> dict[Entity, Quotas]:
        """The whole configuration once the plan is applied: :meth:`after_state`
        and :attr:`outside`."""
        return {**self.outside, **self.after_state()}
