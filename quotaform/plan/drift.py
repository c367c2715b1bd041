"""Drift: how the live cluster differs from the manifests, as a view over a plan.

A drift report reads the plan's changes the other way round: where the plan
would update an entity the cluster has *changed*, where it would create one the
entity is *missing*, where it would delete one it is *unexpected*; a no-op is
in sync. Live entities outside the scope are *unmanaged*: counted per entity
shape, never listed or touched. The entries are the plan's own
:class:`~quotaform.plan.model.EntityChange` values (``before`` = live,
``after`` = declared), so drift and plan always agree.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from quotaform.kafka.entity import Entity
from quotaform.plan.diff import compute_plan
from quotaform.plan.enforcement import QuotaEnforcement
from quotaform.plan.explain import ProbeImpact, probe_impacts
from quotaform.plan.model import Action, EntityChange, KeyAction, Plan
from quotaform.plan.state import DesiredState, LiveState, Probe
from quotaform.plan.storage import only_scales
from quotaform.plan.storage_types import StorageScaling

__all__ = ["DRIFT_FORMAT_VERSION", "DriftKind", "DriftReport", "compute_drift", "drift_of"]

#: Version of the JSON drift report (``drift --output json``).
DRIFT_FORMAT_VERSION = 1


class DriftKind(enum.Enum):
    """How an in-scope entity, or one of its quota keys, differs from the manifests."""

    CHANGED = "changed"
    """Declared and live, with different values."""
    MISSING = "missing"
    """Declared, not live."""
    UNEXPECTED = "unexpected"
    """Live in the scope, not declared."""

    @classmethod
    def of_action(cls, action: Action) -> DriftKind | None:
        """The drift a plan action repairs: update -> changed, create -> missing,
        delete -> unexpected, no-op -> ``None`` (in sync)."""
        return _BY_ACTION.get(action)

    @classmethod
    def of_key(cls, action: KeyAction) -> DriftKind:
        """The drift of one quota key: change -> changed, add (declared, not
        live) -> missing, remove (live, not declared) -> unexpected."""
        return _BY_KEY_ACTION[action]


_BY_ACTION = {
    Action.UPDATE: DriftKind.CHANGED,
    Action.CREATE: DriftKind.MISSING,
    Action.DELETE: DriftKind.UNEXPECTED,
}
_BY_KEY_ACTION = {
    KeyAction.CHANGE: DriftKind.CHANGED,
    KeyAction.ADD: DriftKind.MISSING,
    KeyAction.REMOVE: DriftKind.UNEXPECTED,
}


@dataclass(frozen=True, slots=True)
class DriftReport:
    """How one cluster differs from its manifests, inside and outside the scope.

    Attributes:
        cluster: the manifests' cluster name.
        cluster_id: the id of the cluster the live state was read from.
        changed: declared and live, values differ; sorted by entity.
        missing: declared, not live; sorted by entity.
        unexpected: live in the scope, not declared; sorted by entity.
        matching: in-scope entities whose live quotas equal the declared ones.
        unmanaged: live entities outside the scope (left alone).
        unmanaged_by_shape: the same per shape name, zeros included; empty
            when unknown.
        rpc_counts: RPCs made to read the live state, by API name.
        warnings: the manifests' warnings (``path:line: field: message``).
        probes: the declared probes, each with the keys whose effective quota,
            source or quota group differs between what the manifests declare
            (``before``) and what the cluster holds (``after``).
        storage: the storage policy's scaling the declared values were
            compared after (``None`` without a policy).
        scale_pending: entities whose only difference is a scaled
            ``producer_byte_rate`` live at an earlier factor: a scale still to
            apply (``apply`` or ``storage watch`` writes it), not drift.
        enforcement: how the brokers enforce quotas (how many brokers, and
            any custom quota callback), read when probes are declared; ``None``
            when not read.

    In every entry ``before`` is the live value and ``after`` the declared one.
    """

    cluster: str
    cluster_id: str | None
    changed: tuple[EntityChange, ...]
    missing: tuple[EntityChange, ...]
    unexpected: tuple[EntityChange, ...]
    matching: int
    unmanaged: int = 0
    unmanaged_by_shape: Mapping[str, int] = field(default_factory=dict)
    rpc_counts: Mapping[str, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    probes: tuple[ProbeImpact, ...] = ()
    storage: StorageScaling | None = None
    scale_pending: tuple[EntityChange, ...] = ()
    enforcement: QuotaEnforcement | None = None

    @property
    def in_sync(self) -> bool:
        """True when nothing in the scope differs (unmanaged entities do not count)."""
        return not (self.changed or self.missing or self.unexpected)

    @property
    def in_scope(self) -> int:
        """Entities in the scope, declared or live."""
        return self.matching + len(self.changed) + len(self.missing) + len(self.unexpected)

    def of_kind(self, kind: DriftKind) -> tuple[EntityChange, ...]:
        """The entities drifted in ``kind``'s way."""
        return {
            DriftKind.CHANGED: self.changed,
            DriftKind.MISSING: self.missing,
            DriftKind.UNEXPECTED: self.unexpected,
        }[kind]


def drift_of(plan: Plan, probes: Iterable[Probe] = ()) -> DriftReport:
    """The drift a plan would repair: each pending change classified by
    :meth:`DriftKind.of_action`, no-ops counted as matching; ``probes`` judged
    declared (the plan's after-state) against live (its before-state)."""
    found: dict[DriftKind, list[EntityChange]] = {kind: [] for kind in DriftKind}
    matching = 0
    pending: list[EntityChange] = []
    declared = plan.storage.declared() if plan.storage is not None else {}
    for change in plan.changes:
        kind = DriftKind.of_action(change.action)
        if kind is None:
            matching += 1
        elif plan.storage is not None and _scale_pending(change, plan.storage, declared):
            pending.append(change)
        else:
            found[kind].append(change)
    return DriftReport(
        cluster=plan.cluster,
        cluster_id=plan.cluster_id,
        changed=tuple(found[DriftKind.CHANGED]),
        missing=tuple(found[DriftKind.MISSING]),
        unexpected=tuple(found[DriftKind.UNEXPECTED]),
        matching=matching,
        unmanaged=plan.unmanaged,
        unmanaged_by_shape=dict(plan.unmanaged_by_shape),
        rpc_counts=dict(sorted(plan.rpc_counts.items())),
        warnings=plan.warnings,
        probes=probe_impacts(probes, plan.after_entries(), plan.before_entries()),
        storage=plan.storage,
        scale_pending=tuple(pending),
        enforcement=plan.enforcement,
    )


def compute_drift(
    desired: DesiredState,
    live: LiveState,
    *,
    storage: StorageScaling | None = None,
    enforcement: QuotaEnforcement | None = None,
) -> DriftReport:
    """Classify every in-scope entity as changed, missing, unexpected or in
    sync: :func:`drift_of` the plan :func:`~quotaform.plan.diff.compute_plan`
    makes (values compared as float64, keys per entity). With ``storage``
    (``desired`` already scaled), an entity whose only difference is a scaled
    ``producer_byte_rate`` that is live at a value the policy can write
    (between the pause value and the declared one) is a scale still to
    apply, not drift. ``enforcement``: how the brokers enforce the quotas
    (:class:`~quotaform.plan.enforcement.QuotaEnforcement`), for the probe view."""
    plan = replace(compute_plan(desired, live), storage=storage, enforcement=enforcement)
    return drift_of(plan, desired.probes)


def _scale_pending(
    change: EntityChange, storage: StorageScaling, declared: Mapping[Entity, float]
) -> bool:
    """A scaled ``producer_byte_rate`` live at a value the policy can write
    (between the pause value and the declared one): a scale to apply."""
    if change.action is not Action.UPDATE or not only_scales(change, declared):
        return False
    top = declared[change.entity]
    floor = min(top, storage.pause_rate)
    return all(
        kc.before is not None and floor - 1e-6 <= kc.before <= top + 1e-6
        for kc in change.key_changes
    )
