"""The review of a plan, computed beside it: what every removed key falls back
to, and whether the plan may be applied as it stands.

:func:`review_plan` is pure. The plan stays plain data; apply, the renderers
and the saved-plan format read the :class:`PlanReview` next to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from quotaform.kafka.entity import Entity
from quotaform.kafka.removals import Fallback, fallback
from quotaform.kafka.units import same_quotas
from quotaform.plan.guards import GuardKind, Violation, check_guards
from quotaform.plan.model import KeyAction, Plan
from quotaform.plan.state import ChangeBudget, DesiredState

if TYPE_CHECKING:
    from quotaform.plan.explain import ProbeImpact

__all__ = ["PlanReview", "mismatched", "removal_fallbacks", "review_plan"]


@dataclass(frozen=True, slots=True)
class PlanReview:
    """The verdicts on one plan.

    Attributes:
        budget: the budget the plan was judged by (resolved: the flags over
            the manifests' ``spec.allowDeletes`` / ``spec.changeBudget``).
        fallbacks: for every removed key (key removals of updates, every key
            of a delete), what its clients get instead, by ``(entity, key)``,
            in plan order.
        violations: every reason to refuse the plan (deletes not allowed,
            protection, the change budget); apply refuses a plan with any.
        probes: what the plan does to each declared probe (``spec.probes``),
            in declaration order; an unaffected probe has no keys.
    """

    budget: ChangeBudget
    fallbacks: Mapping[tuple[Entity, str], Fallback]
    violations: tuple[Violation, ...] = ()
    probes: tuple[ProbeImpact, ...] = ()

    @property
    def deletes_allowed(self) -> bool:
        """Whether the budget allows deletes."""
        return bool(self.budget.allow_deletes)

    @property
    def refused(self) -> bool:
        """Whether apply must refuse the plan as it stands."""
        return bool(self.violations)

    @property
    def blocked_deletes(self) -> tuple[Entity, ...]:
        """The entities the plan deletes while deletes are not allowed."""
        return tuple(
            v.entity for v in self.violations if v.kind is GuardKind.DELETE and v.entity is not None
        )


def removal_fallbacks(
    plan: Plan, desired: DesiredState, in_scope: Callable[[Entity], bool] | None = None
) -> dict[tuple[Entity, str], Fallback]:
    """For every quota key ``plan`` removes: where its clients fall, per
    :func:`~quotaform.kafka.removals.fallback` on the state after the plan.
    When the plan saw the whole cluster (:attr:`Plan.sees_whole_cluster`)
    everything is known; otherwise ``in_scope`` (default: the manifests'
    scope) bounds what is. Ordered like the plan."""
    if plan.sees_whole_cluster:
        after, known = plan.after_entries(), None
    else:
        after, known = plan.after_state(), in_scope or desired.scope.contains
    return {
        (change.entity, kc.key): fallback(change.entity, kc.key, after, in_scope=known)
        for change in plan.changes
        for kc in change.key_changes
        if kc.action is KeyAction.REMOVE
    }


def review_plan(
    plan: Plan,
    desired: DesiredState,
    flags: ChangeBudget | None = None,
    *,
    in_scope: Callable[[Entity], bool] | None = None,
) -> PlanReview:
    """Judge ``plan`` (made from ``desired``) by the manifests' budget with
    ``flags`` (one run's ``--allow-*`` / ``--max-*``) over it.

    Args:
        in_scope: which entities the plan's after-state is complete for
            (what removed keys can be known to fall back to); default the
            manifests' scope.

    Returns:
        The fallbacks of removed keys, every guard-rail violation
        (:func:`~quotaform.plan.guards.check_guards`), deletes that are not
        allowed included, and the impact on the declared probes.
    """
    budget = (flags or ChangeBudget()).over(desired.budget).resolved()
    fallbacks = removal_fallbacks(plan, desired, in_scope)
    return PlanReview(
        budget=budget,
        fallbacks=fallbacks,
        violations=tuple(check_guards(plan, desired, budget, fallbacks)),
        probes=_probe_impacts(plan, desired),
    )


def _probe_impacts(plan: Plan, desired: DesiredState) -> tuple[ProbeImpact, ...]:
    """The impact on the declared probes; none declared, nothing to build
    (and :mod:`quotaform.plan.explain` is not imported)."""
    if not desired.probes:
        return ()
    from quotaform.plan.explain import probe_impacts

    return probe_impacts(desired.probes, plan.before_entries(), plan.after_entries())


def mismatched(plan: Plan, desired: DesiredState) -> tuple[Entity, ...]:
    """Entities where ``plan`` does not lead to what ``desired`` declares,
    sorted: a declared entity the plan leaves out or takes to other quotas, a
    planned entity outside the scope, or an undeclared one the plan does not
    delete. Empty for a plan made from ``desired`` (a saved plan whose file
    was edited, or made from other manifests, is not)."""
    planned = {c.entity: c for c in plan.changes}
    wrong: set[Entity] = set()
    for entity, declared in desired.entities.items():
        change = planned.get(entity)
        if change is None or not same_quotas(change.after, declared.quotas):
            wrong.add(entity)
    for entity, change in planned.items():
        if not desired.scope.contains(entity) or (entity not in desired.entities and change.after):
            wrong.add(entity)
    return tuple(sorted(wrong, key=Entity.sort_key))
