"""Guard rails on a plan: protected entities, a change budget, and what a
removed quota falls back to.

Pure functions of a :class:`~quotaform.plan.Plan` and the
:class:`~quotaform.desired.DesiredState` it was made from. They return plain
data (:class:`GuardViolation`, :class:`Fallback`) for the renderers and the
CLI to show; nothing here prints, prompts or talks to Kafka.

Kafka's resolution (what a client gets, per quota key, most specific level
first; values of different levels are never merged within one key):

* user / client-id, for a connection of user ``u`` with client id ``c``:
  1 ``{user=u, client-id=c}``, 2 ``{user=u, client-id=<default>}``,
  3 ``{user=u}``, 4 ``{user=<default>, client-id=c}``,
  5 ``{user=<default>, client-id=<default>}``, 6 ``{user=<default>}``,
  7 ``{client-id=c}``, 8 ``{client-id=<default>}``, else unlimited.
* ip, for a connection from address ``a``: ``{ip=a}``, ``{ip=<default>}``,
  else unlimited.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from quotaform.desired import DesiredEntity, DesiredState, Scope
from quotaform.entity import CLIENT_ID, IP, USER, Entity
from quotaform.plan import Action, EntityChange, KeyAction, Plan
from quotaform.units import format_quota_value

__all__ = [
    "ALLOW_DEFAULT_REMOVAL",
    "ALLOW_MASS_DELETE",
    "ALLOW_RELAX",
    "DEFAULT_MAX_RELAX_FACTOR",
    "ChangeBudget",
    "Fallback",
    "GuardFlags",
    "GuardKind",
    "GuardViolation",
    "budget_from_manifest",
    "check_guards",
    "explain_removal",
    "removal_notes",
]

#: Command-line flags that allow a kind of violation.
ALLOW_MASS_DELETE = "--allow-mass-delete"
ALLOW_DEFAULT_REMOVAL = "--allow-default-removal"
ALLOW_RELAX = "--allow-relax"

#: Largest factor a quota may be raised by in one plan unless told otherwise.
DEFAULT_MAX_RELAX_FACTOR = 10.0


# ------------------------------------------------------------------ fallbacks

# Resolution levels as templates: each part is (entity type, variable), the
# variable "u" / "c" / "a" standing for the connection's user, client id or
# address, None for the default entity of that type.
_Template = tuple[tuple[str, str | None], ...]
_CLIENT_LEVELS: tuple[_Template, ...] = (
    ((USER, "u"), (CLIENT_ID, "c")),
    ((USER, "u"), (CLIENT_ID, None)),
    ((USER, "u"),),
    ((USER, None), (CLIENT_ID, "c")),
    ((USER, None), (CLIENT_ID, None)),
    ((USER, None),),
    ((CLIENT_ID, "c"),),
    ((CLIENT_ID, None),),
)
_IP_LEVELS: tuple[_Template, ...] = (((IP, "a"),), ((IP, None),))
_VARIABLE_TYPE = {"u": USER, "c": CLIENT_ID, "a": IP}
_PLURAL = {USER: "users", CLIENT_ID: "client ids", IP: "addresses"}


def _label(entity: Entity) -> str:
    # The plan's spelling (render.text.entity_label): JSON-quoted names, so a
    # user named "<default>" never reads as the default entity. Not imported
    # from render, which sits downstream of this module.
    return ", ".join(
        f"{t}=<default>" if n is None else f"{t}={json.dumps(n, ensure_ascii=False)}"
        for t, n in entity.parts
    )


@dataclass(frozen=True, slots=True)
class Fallback:
    """What clients get for a quota key once an entity's value for it is removed.

    Attributes:
        key: the quota key.
        entity: the entity whose value applies instead; ``None`` when no level
            sets the key: the clients are unlimited.
        value: that entity's value (units of ``key``); ``None`` when unlimited,
            or when ``entity`` is outside the manifests' scope, so its value
            is not known here (see :attr:`known`).
        varies_by: an entity type (``client-id``) when a level between the
            removed one and ``entity`` depends on that part of the connection:
            the answer then holds for connections whose name of that type has
            no quota of its own there; ``None`` when it holds for every
            affected connection.
    """

    key: str
    entity: Entity | None
    value: float | None
    varies_by: str | None = None

    @property
    def unlimited(self) -> bool:
        """No level sets the key: the clients are not throttled for it."""
        return self.entity is None

    @property
    def known(self) -> bool:
        """Whether the value is known (false: the fallback entity is outside the scope)."""
        return self.entity is None or self.value is not None

    def __str__(self) -> str:
        if self.entity is None:
            text = "unlimited"
        elif self.value is None:
            text = (
                f"falls back to {_label(self.entity)} if that sets it (outside the "
                "manifests' scope: not known here)"
            )
        else:
            value = format_quota_value(self.key, self.value)
            text = f"falls back to {_label(self.entity)} ({value})"
        if self.varies_by is not None:
            text += f" for {_PLURAL[self.varies_by]} without their own quota"
        return text

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: ``key``, ``entity`` (``{type: name or null}`` or null),
        ``value``, ``unlimited``, ``known``, ``varies_by``, ``text`` (``str()``)."""
        return {
            "key": self.key,
            "entity": self.entity.as_dict() if self.entity is not None else None,
            "value": self.value,
            "unlimited": self.unlimited,
            "known": self.known,
            "varies_by": self.varies_by,
            "text": str(self),
        }


def _level_of(entity: Entity) -> tuple[tuple[_Template, ...], int, dict[str, str]]:
    """The resolution ladder of ``entity``'s shape, its rung, and the names it
    binds (``{"u": "alice"}``)."""
    ladder = _IP_LEVELS if entity.types == (IP,) else _CLIENT_LEVELS
    for index, template in enumerate(ladder):
        if tuple(t for t, _ in template) != entity.types:
            continue
        if all((var is None) == (entity.name(t) is None) for t, var in template):
            bound = {
                var: name
                for (_, var), (_, name) in zip(template, entity.parts, strict=True)
                if var is not None and name is not None
            }
            return ladder, index, bound
    raise ValueError(f"{entity} is not a client-quota entity Kafka resolves")


def explain_removal(
    entity: Entity,
    key: str,
    after: Mapping[Entity, Mapping[str, float]],
    *,
    scope: Scope | None = None,
) -> Fallback:
    """What the clients of ``entity`` get for ``key`` once ``entity`` no longer sets it.

    Walks Kafka's resolution levels below ``entity``'s own (see the module
    docstring) and returns the first that sets ``key`` in ``after``, else
    unlimited.

    Approximation: the clients that used ``entity``'s value may differ in the
    parts ``entity`` leaves open. Removing a key from ``{user=u}`` affects
    every client id ``c`` of ``u`` without a more specific quota, and the
    next levels ``{user=<default>, client-id=c}`` and ``{client-id=c}``
    depend on ``c``. Such levels are skipped (as if ``c`` had no quota of its
    own there) and the answer says so (:attr:`Fallback.varies_by`). Walking
    down the ladder only the client id is ever unknown: every level that
    depends on the user lies above the levels that do not.

    Args:
        entity: the entity losing ``key`` (an update removing it, or a delete).
        key: the quota key.
        after: every in-scope entity's quotas once the plan is applied
            (entities with no quotas may be left out).
        scope: the manifests' scope. A level entity outside it is not in
            ``after`` whatever the cluster holds, so the walk stops there with
            an unknown value. ``None``: ``after`` holds every entity.

    Raises:
        ValueError: ``entity`` is not of a shape Kafka resolves.
    """
    ladder, index, bound = _level_of(entity)
    varies_by: str | None = None
    for template in ladder[index + 1 :]:
        unbound = [var for _, var in template if var is not None and var not in bound]
        if unbound:
            varies_by = varies_by or _VARIABLE_TYPE[unbound[0]]
            continue
        level = Entity.from_pairs((t, None if var is None else bound[var]) for t, var in template)
        quotas = after.get(level)
        if quotas is not None and key in quotas:
            return Fallback(key, level, float(quotas[key]), varies_by)
        if scope is not None and not scope.contains(level):
            return Fallback(key, level, None, varies_by)
    return Fallback(key, None, None, varies_by)


def _after_state(plan: Plan) -> dict[Entity, Mapping[str, float]]:
    return {c.entity: c.after for c in plan.changes if c.after}


def removal_notes(plan: Plan, desired: DesiredState) -> dict[tuple[Entity, str], Fallback]:
    """For every quota key the plan removes (key removals of updates, every key
    of a delete): what the entity's clients get instead, per
    :func:`explain_removal` on the state after the plan. Ordered like the plan:
    by entity, then key."""
    after = _after_state(plan)
    return {
        (change.entity, kc.key): explain_removal(change.entity, kc.key, after, scope=desired.scope)
        for change in plan.changes
        for kc in change.key_changes
        if kc.action is KeyAction.REMOVE
    }


# ------------------------------------------------------------------ budget


@dataclass(frozen=True, slots=True)
class ChangeBudget:
    """How much one plan may change before apply refuses it.

    The limits are policy (``spec.changeBudget``, or options); the ``allow_*``
    switches are one run's overrides (the ``--allow-*`` flags).

    Attributes:
        max_deletes: most entities one plan may delete; ``None``: no limit.
        max_delete_fraction: largest share (0 to 1) of the live in-scope
            entities one plan may delete; ``None``: no limit.
        allow_default_removal: allow deleting a default entity (any part
            ``<default>``) or removing a key from one.
        max_relax_factor: largest factor ``new / old`` by which a quota value
            may rise; a removed key rises to its :class:`Fallback` (unlimited
            or an unknown value always exceeds). ``None``: no limit.
        allow_mass_delete: allow exceeding the delete limits.
        allow_relax: allow exceeding ``max_relax_factor``.

    Protected entities (``spec.protect``, ``preventDestroy``) have no switch:
    the protection must be removed from the manifests first.
    """

    max_deletes: int | None = None
    max_delete_fraction: float | None = None
    allow_default_removal: bool = False
    max_relax_factor: float | None = DEFAULT_MAX_RELAX_FACTOR
    allow_mass_delete: bool = False
    allow_relax: bool = False


def budget_from_manifest(
    desired: DesiredState,
    *,
    max_deletes: int | None = None,
    max_delete_fraction: float | None = None,
    max_relax_factor: float | None = None,
    allow_mass_delete: bool = False,
    allow_default_removal: bool = False,
    allow_relax: bool = False,
) -> ChangeBudget:
    """The budget for a plan of ``desired``: each limit given here (``None`` =
    not given) overrides ``spec.changeBudget``, which overrides the defaults
    (no delete limits, :data:`DEFAULT_MAX_RELAX_FACTOR`)."""
    limits = desired.change_limits

    def pick(flag: Any, declared: Any, default: Any) -> Any:
        return flag if flag is not None else declared if declared is not None else default

    return ChangeBudget(
        max_deletes=pick(max_deletes, limits.max_deletes, None),
        max_delete_fraction=pick(max_delete_fraction, limits.max_delete_fraction, None),
        allow_default_removal=allow_default_removal,
        max_relax_factor=pick(max_relax_factor, limits.max_relax_factor, DEFAULT_MAX_RELAX_FACTOR),
        allow_mass_delete=allow_mass_delete,
        allow_relax=allow_relax,
    )


@dataclass(frozen=True, slots=True)
class GuardFlags:
    """The change-budget flags of ``plan`` / ``apply``; ``None`` = not given.

    :meth:`budget_for` combines them with a manifest set's ``spec.changeBudget``.
    """

    max_deletes: int | None = None
    max_delete_fraction: float | None = None
    max_relax_factor: float | None = None
    allow_mass_delete: bool = False
    allow_default_removal: bool = False
    allow_relax: bool = False

    def budget_for(self, desired: DesiredState) -> ChangeBudget:
        """The budget for a plan of ``desired`` (see :func:`budget_from_manifest`)."""
        return budget_from_manifest(
            desired,
            max_deletes=self.max_deletes,
            max_delete_fraction=self.max_delete_fraction,
            max_relax_factor=self.max_relax_factor,
            allow_mass_delete=self.allow_mass_delete,
            allow_default_removal=self.allow_default_removal,
            allow_relax=self.allow_relax,
        )


class GuardKind(enum.Enum):
    """Why a plan is refused."""

    PROTECTED = "protected"
    """Deletes an entity listed in ``spec.protect`` or marked ``preventDestroy``."""
    PREVENT_DESTROY = "prevent-destroy"
    """Removes a quota key of a ``preventDestroy`` entity."""
    MASS_DELETE = "mass-delete"
    """Deletes more entities than the budget allows."""
    DEFAULT_REMOVAL = "default-removal"
    """Deletes a default entity or removes one of its keys."""
    RELAX = "relax"
    """Raises a quota by more than the budget's factor (a removal included)."""


_ALLOW_FLAG: Mapping[GuardKind, str | None] = {
    GuardKind.PROTECTED: None,
    GuardKind.PREVENT_DESTROY: None,
    GuardKind.MASS_DELETE: ALLOW_MASS_DELETE,
    GuardKind.DEFAULT_REMOVAL: ALLOW_DEFAULT_REMOVAL,
    GuardKind.RELAX: ALLOW_RELAX,
}


@dataclass(frozen=True, slots=True)
class GuardViolation:
    """One reason to refuse a plan.

    Attributes:
        kind: what rule is broken.
        entity: the entity concerned; ``None`` for a whole-plan rule (mass delete).
        key: the quota key concerned, ``None`` for whole-entity rules.
        message: a readable sentence naming the entity, key and values.
        allow_flag: the command-line flag that allows it (``--allow-relax``), or
            ``None`` when nothing does (protection).
    """

    kind: GuardKind
    entity: Entity | None
    key: str | None
    message: str
    allow_flag: str | None

    def __str__(self) -> str:
        if self.allow_flag is None:
            return f"{self.message} (no flag overrides this)"
        return f"{self.message} (pass {self.allow_flag} to allow)"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: ``kind``, ``entity``, ``key``, ``message``, ``allow_flag``."""
        return {
            "kind": self.kind.value,
            "entity": self.entity.as_dict() if self.entity is not None else None,
            "key": self.key,
            "message": self.message,
            "allow_flag": self.allow_flag,
        }


def _violation(
    kind: GuardKind, entity: Entity | None, key: str | None, message: str
) -> GuardViolation:
    return GuardViolation(kind, entity, key, message, _ALLOW_FLAG[kind])


def _factor(ratio: float) -> str:
    return f"{ratio:,.0f}x" if ratio >= 1000 else f"{ratio:.3g}x"


def _mass_delete(plan: Plan, budget: ChangeBudget) -> list[GuardViolation]:
    if budget.allow_mass_delete:
        return []
    deletes = sum(1 for c in plan.changes if c.action is Action.DELETE)
    live = sum(1 for c in plan.changes if c.before)
    found = []
    if budget.max_deletes is not None and deletes > budget.max_deletes:
        found.append(
            _violation(
                GuardKind.MASS_DELETE,
                None,
                None,
                f"the plan deletes {deletes} entities, more than the budget of "
                f"{budget.max_deletes} (maxDeletes)",
            )
        )
    fraction = budget.max_delete_fraction
    if fraction is not None and live and deletes / live > fraction:
        found.append(
            _violation(
                GuardKind.MASS_DELETE,
                None,
                None,
                f"the plan deletes {deletes} of {live} live in-scope entities "
                f"({deletes / live:.0%}), more than the budget of {fraction:.0%} "
                "(maxDeleteFraction)",
            )
        )
    return found


def _declared_at(declared: DesiredEntity) -> str:
    if declared.shared_source is None:
        return str(declared.source)
    return f"{declared.source} over {declared.shared_source}"


def _protection(change: EntityChange, desired: DesiredState) -> list[GuardViolation]:
    label = _label(change.entity)
    if change.action is Action.DELETE and change.entity in desired.protected:
        where = desired.protected[change.entity]
        return [
            _violation(
                GuardKind.PROTECTED,
                change.entity,
                None,
                f"{label} is protected ({where}) and would be deleted: declare its quotas "
                "again, or remove the protection in a reviewed change first",
            )
        ]
    declared = desired.entities.get(change.entity)
    if declared is None or not declared.prevent_destroy:
        return []
    return [
        _violation(
            GuardKind.PREVENT_DESTROY,
            change.entity,
            kc.key,
            f"{label} has preventDestroy ({_declared_at(declared)}) and would lose {kc.key}: "
            "keep the key in the manifest, or drop preventDestroy in a reviewed change first",
        )
        for kc in change.key_changes
        if kc.action is KeyAction.REMOVE
    ]


def _default_removal(change: EntityChange) -> list[GuardViolation]:
    if not change.entity.is_default:
        return []
    label = _label(change.entity)
    if change.action is Action.DELETE:
        keys = ", ".join(sorted(change.before))
        return [
            _violation(
                GuardKind.DEFAULT_REMOVAL,
                change.entity,
                None,
                f"deleting the default entity {label} ({keys}): every client that "
                "relies on it falls back to a less specific level or is unlimited",
            )
        ]
    return [
        _violation(
            GuardKind.DEFAULT_REMOVAL,
            change.entity,
            kc.key,
            f"removing {kc.key} from the default entity {label}",
        )
        for kc in change.key_changes
        if kc.action is KeyAction.REMOVE
    ]


def _relax(
    change: EntityChange,
    factor: float,
    notes: Mapping[tuple[Entity, str], Fallback],
) -> list[GuardViolation]:
    label = _label(change.entity)
    found = []
    for kc in change.key_changes:
        if kc.before is None:
            continue  # an added key tightens or sets a first limit
        old = format_quota_value(kc.key, kc.before)
        if kc.action is KeyAction.CHANGE and kc.after is not None:
            ratio = kc.after / kc.before
            if ratio > factor:
                new = format_quota_value(kc.key, kc.after)
                found.append(
                    _violation(
                        GuardKind.RELAX,
                        change.entity,
                        kc.key,
                        f"{kc.key} of {label} rises from {old} to {new}: {_factor(ratio)}, "
                        f"more than the budget's {_factor(factor)} (maxRelaxFactor)",
                    )
                )
        elif kc.action is KeyAction.REMOVE:
            fallback = notes[(change.entity, kc.key)]
            if fallback.value is not None and fallback.value / kc.before <= factor:
                continue
            if fallback.value is not None:
                ratio = fallback.value / kc.before
                what = (
                    f"{fallback}: {_factor(ratio)}, more than the budget's {_factor(factor)} "
                    "(maxRelaxFactor)"
                )
            elif fallback.unlimited:
                what = f"its clients become {fallback}"
            else:
                what = f"{fallback}, so the rise cannot be checked"
            found.append(
                _violation(
                    GuardKind.RELAX,
                    change.entity,
                    kc.key,
                    f"removing {kc.key} ({old}) from {label}: {what}",
                )
            )
    return found


def check_guards(plan: Plan, desired: DesiredState, budget: ChangeBudget) -> list[GuardViolation]:
    """Every reason to refuse ``plan`` (empty: it may be applied).

    Checks, in this order: the delete budget (one violation per limit
    exceeded, ``entity=None``), then per entity in plan order: protection
    (``spec.protect`` / ``preventDestroy`` deletes, ``preventDestroy`` key
    removals; never allowed by a flag), default-entity deletes and key
    removals, and quota values raised by more than ``max_relax_factor``
    (changed values ``new / old``; removed keys against their
    :class:`Fallback`: unlimited, or an entity outside the scope, always
    exceeds). Added keys are not judged: they tighten or set a first limit
    for the entity (its clients may have had a looser one from a less
    specific level; that is not counted as relaxing).

    The delete share counts deletes against the live in-scope entities
    (changes with quotas before the plan). Deletes count whether or not the
    plan's deletes are allowed; :func:`quotaform.apply.check_deletes` judges
    that separately.
    """
    found = _mass_delete(plan, budget)
    # compute_plan stores them on the plan; a plan built by hand gets them here.
    notes = plan.fallbacks or removal_notes(plan, desired)
    factor = None if budget.allow_relax else budget.max_relax_factor
    for change in plan.changes:
        found += _protection(change, desired)
        if not budget.allow_default_removal:
            found += _default_removal(change)
        if factor is not None:
            found += _relax(change, factor, notes)
    return found
