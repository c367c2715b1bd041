"""Think, once the cluster is read: the steps of ``plan`` and ``drift`` after
:func:`quotaform.app.facts.gather_facts`, each a function of the manifests'
desired state and the :class:`~quotaform.plan.facts.ClusterFacts`.

Nothing here talks to a cluster or reads a file (an import contract of
``pyproject.toml`` keeps it so): the storage scaling, the diff, the guard
rails and the principal warnings are tested without a broker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from quotaform.plan.diff import compute_plan
from quotaform.plan.facts import ClusterFacts, VolumeReading
from quotaform.plan.model import Plan
from quotaform.plan.principals import SuperUser, principal_findings
from quotaform.plan.review import PlanReview, review_plan
from quotaform.plan.state import ChangeBudget, DesiredState
from quotaform.plan.storage_types import StorageEvaluation, StoragePolicy, StorageScaling

if TYPE_CHECKING:
    from quotaform.plan.drift import DriftReport

__all__ = [
    "PlanDecision",
    "decide_drift",
    "decide_plan",
    "evaluate_volumes",
    "scale_for_storage",
]


def evaluate_volumes(policy: StoragePolicy, reading: VolumeReading) -> StorageEvaluation:
    """The storage policy judged on the volume usage read."""
    from quotaform.plan.storage import evaluate  # only with a storage policy

    return evaluate(policy, reading.snapshots, now=reading.read_at, expected=reading.expected)


def scale_for_storage(
    desired: DesiredState, facts: ClusterFacts
) -> tuple[DesiredState, StorageScaling | None]:
    """``desired`` scaled by its storage policy (unchanged without one).

    Raises:
        ValueError: a storage policy is declared but no volumes were read.
    """
    if desired.storage is None:
        return desired, None
    if facts.volumes is None:
        raise ValueError("a storage policy is declared: gather the volumes with the facts")
    from quotaform.plan.storage import scale_desired

    evaluation = evaluate_volumes(desired.storage, facts.volumes)
    return scale_desired(desired, desired.storage, evaluation, facts.live)


@dataclass(frozen=True, slots=True)
class PlanDecision:
    """What :func:`decide_plan` gives.

    Attributes:
        plan: the plan, the principal warnings among its warnings.
        review: the guard rails' review of the plan.
        notes: what could not be checked, for ``Note:`` lines.
    """

    plan: Plan
    review: PlanReview
    notes: tuple[str, ...] = ()


def decide_plan(
    desired: DesiredState,
    facts: ClusterFacts,
    *,
    flags: ChangeBudget | None = None,
    super_users: Sequence[SuperUser] = (),
) -> PlanDecision:
    """The plan of ``desired`` against the cluster's facts: scale the
    declared ``producer_byte_rate`` values by the storage policy (when one is
    declared), diff, attach how the brokers enforce quotas, add the principal
    warnings (when the principals were read: ``super_users`` are those given
    by the profile and ``--super-user``), and review the plan against the
    guard rails (``flags`` over the manifests' budget)."""
    scaled, scaling = scale_for_storage(desired, facts)
    plan = compute_plan(scaled, facts.live)
    if facts.enforcement is not None:
        plan = replace(plan, enforcement=facts.enforcement)
    if scaling is not None:
        plan = replace(plan, storage=scaling)
    review = review_plan(plan, scaled, flags)
    notes: tuple[str, ...] = ()
    if facts.principals is not None:
        warnings, notes = principal_findings(
            desired, plan.after_entries(), facts.principals, super_users=super_users
        )
        if warnings:
            plan = replace(plan, warnings=(*plan.warnings, *warnings))
    return PlanDecision(plan, review, notes)


def decide_drift(desired: DesiredState, facts: ClusterFacts) -> DriftReport:
    """``quotaform drift``'s report: the live state against ``desired``
    scaled by its storage policy, with the probe view's enforcement."""
    from quotaform.plan.drift import compute_drift  # not loaded by plan

    scaled, scaling = scale_for_storage(desired, facts)
    return compute_drift(scaled, facts.live, storage=scaling, enforcement=facts.enforcement)
