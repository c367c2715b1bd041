"""Compare declared and live quotas: a pure function from two states to a :class:`Plan`.

No policy here: whether the plan may be applied (deletes allowed, protected
entities, the change budget) is judged beside it by
:func:`quotaform.plan.review.review_plan`.
"""

from __future__ import annotations

from quotaform.kafka.entity import Entity
from quotaform.plan.model import EntityChange, Plan
from quotaform.plan.state import DesiredState, LiveState

__all__ = ["compute_plan"]


def compute_plan(desired: DesiredState, live: LiveState) -> Plan:
    """The plan turning ``live`` into ``desired`` inside the manifests' scope.

    Inside the scope the manifests are the whole truth: a live entity no
    manifest declares becomes a delete. Entities outside the scope never
    appear (``live`` holds only in-scope entities; it counts the others).

    Returns:
        A :class:`Plan` with one change per entity (no-ops included), sorted
        by :meth:`Entity.sort_key`, and the manifests' warnings.
    """
    entities = desired.entities.keys() | live.entities.keys()
    changes = []
    for entity in sorted(entities, key=Entity.sort_key):
        declared = desired.entities.get(entity)
        changes.append(
            EntityChange.between(
                entity,
                live.entities.get(entity, {}),
                declared.quotas if declared else {},
                source=str(declared.source) if declared else None,
            )
        )
    return Plan(
        cluster=desired.cluster,
        cluster_id=live.cluster_id,
        changes=tuple(changes),
        unmanaged=live.unmanaged,
        unmanaged_by_shape=dict(live.unmanaged_by_shape),
        rpc_counts=dict(live.rpc_counts),
        warnings=desired.warnings,
        outside=dict(live.outside),
    )
