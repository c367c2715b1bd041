"""Plans of several clusters as one report (``plan --all-clusters``).

Pure aggregation: :func:`quotaform.app.plan.plan_clusters` makes the plans;
this module counts them (the CLI picks the exit code:
:func:`quotaform.errors.plan_exit_code`). The renderers
(``quotaform.render.multicluster``, ``quotaform.formats.multicluster``) print it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from quotaform.plan.model import Plan
from quotaform.plan.review import PlanReview

__all__ = ["ClusterPlan", "MultiClusterPlan"]


@dataclass(frozen=True, slots=True)
class ClusterPlan:
    """One cluster's outcome: its plan and review, or why there is none.

    Exactly one of ``plan`` and ``error`` is set; ``review`` goes with ``plan``.
    """

    cluster: str
    plan: Plan | None = None
    review: PlanReview | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        if (self.plan is None) == (self.error is None):
            raise ValueError("give exactly one of plan and error")
        if (self.plan is None) != (self.review is None):
            raise ValueError("a plan comes with its review")

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def has_changes(self) -> bool:
        return self.plan is not None and self.plan.summary.has_changes


@dataclass(frozen=True, slots=True)
class MultiClusterPlan:
    """Every cluster's outcome, sorted by cluster name."""

    clusters: tuple[ClusterPlan, ...]

    @classmethod
    def build(cls, clusters: Iterable[ClusterPlan]) -> MultiClusterPlan:
        """Sorted by name.

        Raises:
            ValueError: a cluster is given twice.
        """
        ordered = tuple(sorted(clusters, key=lambda c: c.cluster))
        names = [c.cluster for c in ordered]
        if len(set(names)) != len(names):
            raise ValueError(f"a cluster is given twice: {names}")
        return cls(ordered)

    @property
    def with_changes(self) -> int:
        return sum(c.has_changes for c in self.clusters)

    @property
    def in_sync(self) -> int:
        return sum(not c.failed and not c.has_changes for c in self.clusters)

    @property
    def failed(self) -> int:
        return sum(c.failed for c in self.clusters)
