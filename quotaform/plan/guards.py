"""Guard rails on a plan: protected entities and the change budget.

Pure functions of a :class:`~quotaform.plan.model.Plan`, the
:class:`~quotaform.plan.state.DesiredState` it was made from and a resolved
:class:`~quotaform.plan.state.ChangeBudget`. They return :class:`Violation`
values that carry data (kind, entity, key, the numbers involved); the
renderers word them (``quotaform.words``). What a removed quota falls
back to comes from Kafka's resolution rules (:func:`quotaform.kafka.removals.fallback`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from quotaform.kafka.entity import Entity
from quotaform.kafka.removals import Fallback
from quotaform.plan.model import Action, EntityChange, KeyAction, Plan
from quotaform.plan.state import ChangeBudget, DesiredState
from quotaform.plan.storage_types import SCALED_KEY

__all__ = ["GuardKind", "Violation", "check_guards"]


class GuardKind(enum.Enum):
    """Why a plan is refused. Each kind but protection is one kind of risk
    with one permission that allows it (``ChangeBudget.allow_*``)."""

    DELETE = "delete"
    """Deletes an in-scope entity no manifest declares while deletes are not
    allowed (``allowDeletes`` / ``--allow-deletes``)."""
    PROTECTED = "protected"
    """Deletes an entity listed in ``spec.protect`` or marked ``preventDestroy``."""
    PREVENT_DESTROY = "prevent-destroy"
    """Removes a quota key of a ``preventDestroy`` entity."""
    MASS_DELETE = "mass-delete"
    """Deletes more entities than the budget allows."""
    DEFAULT_REMOVAL = "default-removal"
    """Deletes a default entity or removes one of its keys."""
    RELAX = "relax"
    """Raises a quota by more than the budget's factor, a key removal of an
    update included (a delete's removals are the delete's risk)."""

    @property
    def overridable(self) -> bool:
        """Whether a permission of the budget can allow it (protection: never)."""
        return self not in (GuardKind.PROTECTED, GuardKind.PREVENT_DESTROY)


@dataclass(frozen=True, slots=True)
class Violation:
    """One reason to refuse a plan, as data.

    Attributes:
        kind: which rule is broken.
        entity: the entity concerned; ``None`` for a whole-plan rule (mass delete).
        key: the quota key concerned, ``None`` for whole-entity rules.
        before: the quota value before the plan (relax, key removals).
        after: the value after a changed key (relax).
        fallback: for a removed key, what its clients get instead.
        limit: the budget's limit that is exceeded (a count, a fraction or a factor).
        limit_name: that limit's manifest name (``maxDeletes``,
            ``maxDeleteFraction``, ``maxRelaxFactor``).
        deletes: entities the plan deletes (mass delete).
        live: live in-scope entities (mass delete by fraction).
        declared_at: where a protection is declared (``path:line``, or
            ``path:line over path:line`` for an overlaid entity).
        removed_keys: the keys a deleted default entity had.
    """

    kind: GuardKind
    entity: Entity | None = None
    key: str | None = None
    before: float | None = None
    after: float | None = None
    fallback: Fallback | None = None
    limit: float | None = None
    limit_name: str | None = None
    deletes: int | None = None
    live: int | None = None
    declared_at: str | None = None
    removed_keys: tuple[str, ...] = ()

    @property
    def ratio(self) -> float | None:
        """``new / old`` of a relaxed key: the changed value, or the fallback's
        value for a removal; ``None`` when it cannot be computed (unlimited,
        unknown, or no values)."""
        new = (
            self.after
            if self.after is not None
            else (self.fallback.value if self.fallback is not None else None)
        )
        if new is None or not self.before:
            return None
        return new / self.before


def _mass_delete(plan: Plan, budget: ChangeBudget) -> list[Violation]:
    if budget.allow_mass_delete:
        return []
    deletes = sum(1 for c in plan.changes if c.action is Action.DELETE)
    live = sum(1 for c in plan.changes if c.before)
    found = []
    if budget.max_deletes is not None and deletes > budget.max_deletes:
        found.append(
            Violation(
                GuardKind.MASS_DELETE,
                limit=budget.max_deletes,
                limit_name="maxDeletes",
                deletes=deletes,
            )
        )
    fraction = budget.max_delete_fraction
    if fraction is not None and live and deletes / live > fraction:
        found.append(
            Violation(
                GuardKind.MASS_DELETE,
                limit=fraction,
                limit_name="maxDeleteFraction",
                deletes=deletes,
                live=live,
            )
        )
    return found


def _protection(change: EntityChange, desired: DesiredState) -> list[Violation]:
    if change.action is Action.DELETE and change.entity in desired.protected:
        where = str(desired.protected[change.entity])
        return [Violation(GuardKind.PROTECTED, change.entity, declared_at=where)]
    declared = desired.entities.get(change.entity)
    if declared is None or not declared.prevent_destroy:
        return []
    where = str(declared.source)
    if declared.shared_source is not None:
        where = f"{where} over {declared.shared_source}"
    return [
        Violation(GuardKind.PREVENT_DESTROY, change.entity, kc.key, declared_at=where)
        for kc in change.key_changes
        if kc.action is KeyAction.REMOVE
    ]


def _default_removal(change: EntityChange) -> list[Violation]:
    if not change.entity.is_default:
        return []
    if change.action is Action.DELETE:
        return [
            Violation(
                GuardKind.DEFAULT_REMOVAL,
                change.entity,
                removed_keys=tuple(sorted(change.before)),
            )
        ]
    return [
        Violation(GuardKind.DEFAULT_REMOVAL, change.entity, kc.key, before=kc.before)
        for kc in change.key_changes
        if kc.action is KeyAction.REMOVE
    ]


def _relax(
    change: EntityChange,
    factor: float,
    fallbacks: Mapping[tuple[Entity, str], Fallback],
    declared: Mapping[Entity, float],
) -> list[Violation]:
    if change.action is Action.DELETE:
        return []  # the delete permission covers what its keys fall back to
    found = []
    for kc in change.key_changes:
        if kc.before is None:
            continue  # an added key tightens or sets a first limit
        if kc.action is KeyAction.CHANGE and kc.after is not None:
            restoring = kc.key == SCALED_KEY and kc.after <= declared.get(change.entity, -1.0)
            if kc.after / kc.before > factor and not restoring:
                found.append(
                    Violation(
                        GuardKind.RELAX,
                        change.entity,
                        kc.key,
                        before=kc.before,
                        after=kc.after,
                        limit=factor,
                        limit_name="maxRelaxFactor",
                    )
                )
        elif kc.action is KeyAction.REMOVE:
            to = fallbacks[(change.entity, kc.key)]
            if to.value is not None and to.value / kc.before <= factor:
                continue
            found.append(
                Violation(
                    GuardKind.RELAX,
                    change.entity,
                    kc.key,
                    before=kc.before,
                    fallback=to,
                    limit=factor,
                    limit_name="maxRelaxFactor",
                )
            )
    return found


def check_guards(
    plan: Plan,
    desired: DesiredState,
    budget: ChangeBudget,
    fallbacks: Mapping[tuple[Entity, str], Fallback],
) -> list[Violation]:
    """Every guard-rail reason to refuse ``plan`` (empty: none).

    Checks, in this order: the delete budget (one violation per limit
    exceeded, ``entity=None``), then per entity in plan order: a delete
    while deletes are not allowed, protection
    (``spec.protect`` / ``preventDestroy`` deletes, ``preventDestroy`` key
    removals; never allowed by a permission), default-entity deletes and key
    removals, and quota values raised by more than ``max_relax_factor``
    (changed values ``new / old``; keys an update removes against their
    :class:`~quotaform.kafka.removals.Fallback`: unlimited, or an entity
    outside the scope, always exceeds; a delete's keys are the delete's risk,
    not relaxing; a storage-scaled ``producer_byte_rate`` raised back up to at
    most its declared value is the policy easing, not relaxing). Added keys
    are not judged: they tighten or set a first limit for the entity. Every
    missing permission is reported at once.

    Args:
        budget: a resolved budget (:meth:`ChangeBudget.resolved`).
        fallbacks: what every removed key falls back to, by (entity, key).

    The delete share counts deletes against the live in-scope entities
    (changes with quotas before the plan), whether or not deletes are allowed.
    """
    found = _mass_delete(plan, budget)
    factor = None if budget.allow_relax else budget.max_relax_factor
    # A storage-scaled quota raised back toward its declared value is the
    # policy easing (the reviewed declaration), not a relaxation.
    declared = plan.storage.declared() if plan.storage is not None else {}
    for change in plan.changes:
        if change.action is Action.DELETE and not budget.allow_deletes:
            found.append(Violation(GuardKind.DELETE, change.entity))
        found += _protection(change, desired)
        if not budget.allow_default_removal:
            found += _default_removal(change)
        if factor is not None:
            found += _relax(change, factor, fallbacks, declared)
    return found
