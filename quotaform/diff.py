"""Compare declared and live quotas: a pure function from two states to a :class:`Plan`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from quotaform.desired import DesiredState
from quotaform.entity import Entity
from quotaform.guards import ChangeBudget, budget_from_manifest, check_guards, removal_notes
from quotaform.live import LiveState
from quotaform.plan import Action, EntityChange, KeyAction, KeyChange, Plan, Quotas

__all__ = ["compute_plan", "diff_entity"]


def _same(a: float, b: float) -> bool:
    # Values travel as float64, so 1048576 (YAML int) and 1048576.0 (wire) are
    # the same quota value; compare canonically as floats.
    return float(a) == float(b)


def diff_entity(before: Quotas, after: Quotas) -> tuple[KeyChange, ...]:
    """Per-key changes turning ``before`` into ``after``, sorted by quota key."""
    changes: list[KeyChange] = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old is None and new is not None:
            changes.append(KeyChange(key, KeyAction.ADD, None, float(new)))
        elif old is not None and new is None:
            changes.append(KeyChange(key, KeyAction.REMOVE, float(old), None))
        elif old is not None and new is not None and not _same(old, new):
            changes.append(KeyChange(key, KeyAction.CHANGE, float(old), float(new)))
    return tuple(changes)


def _action(before: Quotas, after: Quotas, key_changes: tuple[KeyChange, ...]) -> Action:
    if not key_changes:
        return Action.NO_OP
    if not before:
        return Action.CREATE
    if not after:
        return Action.DELETE
    return Action.UPDATE


def compute_plan(
    desired: DesiredState,
    live: LiveState,
    *,
    allow_deletes: bool = False,
    budget: ChangeBudget | None = None,
) -> Plan:
    """The plan turning ``live`` into ``desired`` inside the manifests' scope.

    Inside the scope the manifests are the whole truth: a live entity no
    manifest declares becomes a delete. Entities outside the scope never
    appear (``live`` holds only in-scope entities; it counts the others).

    Args:
        desired: the loaded manifests.
        live: the cluster's in-scope quotas.
        allow_deletes: the ``--allow-deletes`` flag; deletes are also allowed
            when the manifests say ``allowDeletes: true``.
        budget: the change budget to check (``quotaform.guards``); ``None``
            uses ``spec.changeBudget`` and the defaults.

    Returns:
        A :class:`Plan` with one change per entity (no-ops included), sorted
        by :meth:`Entity.sort_key`.
    """
    entities: set[Entity] = set(desired.entities) | set(live.entities)
    changes: list[EntityChange] = []
    for entity in sorted(entities, key=Entity.sort_key):
        declared = desired.entities.get(entity)
        before: Mapping[str, float] = dict(live.entities.get(entity, {}))
        after: Mapping[str, float] = dict(declared.quotas) if declared else {}
        key_changes = diff_entity(before, after)
        changes.append(
            EntityChange(
                entity=entity,
                action=_action(before, after, key_changes),
                before=before,
                after=after,
                key_changes=key_changes,
                source=f"{declared.source.path}:{declared.source.line}" if declared else None,
            )
        )
    deletes_allowed = allow_deletes or desired.allow_deletes
    warnings = list(desired.warnings)
    deletes = [c for c in changes if c.action is Action.DELETE]
    if deletes and not deletes_allowed:
        warnings.append(
            f"{len(deletes)} entit{'y' if len(deletes) == 1 else 'ies'} in scope would be "
            "deleted, but deletes are not allowed: apply will refuse "
            "(set spec.allowDeletes: true or pass --allow-deletes)"
        )
    plan = Plan(
        cluster=desired.cluster,
        cluster_id=live.cluster_id,
        changes=tuple(changes),
        deletes_allowed=deletes_allowed,
        unmanaged=live.unmanaged,
        rpc_counts=dict(live.rpc_counts),
        warnings=tuple(warnings),
    )
    # Fallbacks first: the guard rails judge removals by them.
    plan = replace(plan, fallbacks=removal_notes(plan, desired))
    budget = budget or budget_from_manifest(desired)
    return replace(plan, violations=tuple(check_guards(plan, desired, budget)))
