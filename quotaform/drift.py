"""Drift: how the live cluster differs from the manifests, without changing it.

The comparison is the plan's (:func:`quotaform.diff.compute_plan`), read the
other way round: where the plan would update an entity the cluster has
*changed*, where it would create one the entity is *missing*, where it would
delete one it is *unexpected*; a no-op is in sync. Live entities outside the
scope are *unmanaged*: counted per entity shape, never listed or touched.

:func:`compute_drift` is pure. :func:`detect_drift` chains the cluster-id
check, reading the cluster with :func:`quotaform.live.read_live_state` (one
strict DescribeClientQuotas per entity shape) and comparing, for the
``drift`` command.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from quotaform.desired import DesiredState
from quotaform.diff import compute_plan
from quotaform.entity import Entity
from quotaform.live import LiveState, read_live_state
from quotaform.plan import Action, KeyAction, KeyChange, Quotas
from quotaform.wire import QuotaAdminClient
from quotaform.workflow import check_cluster

__all__ = [
    "DRIFT_FORMAT_VERSION",
    "DriftKind",
    "DriftReport",
    "EntityDrift",
    "UnmanagedCount",
    "compute_drift",
    "detect_drift",
]

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
class EntityDrift:
    """One in-scope entity that differs from the manifests.

    Attributes:
        entity: the entity.
        kind: changed / missing / unexpected.
        declared: ``{quota key: value}`` the manifests ask for, sorted by key
            (empty when unexpected).
        live: ``{quota key: value}`` the cluster holds, sorted by key (empty
            when missing). Values in the key's unit (bytes/s, %, mutations/s,
            connections/s).
        key_changes: the keys that differ, sorted by key, as apply would
            repair them: ``before`` is the live value, ``after`` the declared
            one (:meth:`DriftKind.of_key` names each key's drift).
        source: ``"path:line"`` of the declaration, ``None`` when unexpected.
    """

    entity: Entity
    kind: DriftKind
    declared: Quotas
    live: Quotas
    key_changes: tuple[KeyChange, ...]
    source: str | None = None


@dataclass(frozen=True, slots=True)
class UnmanagedCount:
    """Live entities outside the scope: left alone, only counted.

    Attributes:
        total: how many.
        by_shape: shape name (``user``, ``client-id``, ``user+client-id``,
            ``ip``) -> how many, every shape listed in :data:`ALL_SHAPES`
            order, zeros included; empty when only the total is known (a plain
            :class:`LiveState`).
    """

    total: int
    by_shape: Mapping[str, int] = field(default_factory=dict)


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
        rpc_counts: RPCs made to read the live state, by API name.
        warnings: the manifests' warnings (``path:line: field: message``).
    """

    cluster: str
    cluster_id: str | None
    changed: tuple[EntityDrift, ...]
    missing: tuple[EntityDrift, ...]
    unexpected: tuple[EntityDrift, ...]
    matching: int
    unmanaged: UnmanagedCount
    rpc_counts: Mapping[str, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def in_sync(self) -> bool:
        """True when nothing in the scope differs (unmanaged entities do not count)."""
        return not (self.changed or self.missing or self.unexpected)

    @property
    def in_scope(self) -> int:
        """Entities in the scope, declared or live."""
        return self.matching + len(self.changed) + len(self.missing) + len(self.unexpected)

    def of_kind(self, kind: DriftKind) -> tuple[EntityDrift, ...]:
        """The entities drifted in ``kind``'s way."""
        return {
            DriftKind.CHANGED: self.changed,
            DriftKind.MISSING: self.missing,
            DriftKind.UNEXPECTED: self.unexpected,
        }[kind]


def compute_drift(desired: DesiredState, live: LiveState) -> DriftReport:
    """Classify every in-scope entity as changed, missing, unexpected or in sync.

    Pure: the comparison is :func:`~quotaform.diff.compute_plan`'s, so drift
    and plan always agree (values compared as float64, keys per entity).

    Args:
        desired: the loaded manifests.
        live: the cluster's in-scope quotas and the unmanaged counts (per
            shape when :func:`~quotaform.live.read_live_state` described them).

    Returns:
        A :class:`DriftReport`; each list sorted by :meth:`Entity.sort_key`,
        each entity's quotas sorted by key.
    """
    plan = compute_plan(desired, live)
    found: dict[DriftKind, list[EntityDrift]] = {kind: [] for kind in DriftKind}
    matching = 0
    for change in plan.changes:
        kind = DriftKind.of_action(change.action)
        if kind is None:
            matching += 1
            continue
        found[kind].append(
            EntityDrift(
                entity=change.entity,
                kind=kind,
                declared=MappingProxyType(dict(sorted(change.after.items()))),
                live=MappingProxyType(dict(sorted(change.before.items()))),
                key_changes=change.key_changes,
                source=change.source,
            )
        )
    return DriftReport(
        cluster=desired.cluster,
        cluster_id=live.cluster_id,
        changed=tuple(found[DriftKind.CHANGED]),
        missing=tuple(found[DriftKind.MISSING]),
        unexpected=tuple(found[DriftKind.UNEXPECTED]),
        matching=matching,
        unmanaged=UnmanagedCount(live.unmanaged, MappingProxyType(dict(live.unmanaged_by_shape))),
        rpc_counts=MappingProxyType(dict(sorted(live.rpc_counts.items()))),
        # Only the manifests' own warnings: the plan's "deletes not allowed"
        # note is about apply, and drift never applies.
        warnings=desired.warnings,
    )


def detect_drift(desired: DesiredState, client: QuotaAdminClient) -> DriftReport:
    """Check the cluster id, read the live state and compare: ``quotaform drift``.

    ``client`` should be opened read-only (``connect(settings, read_only=True)``):
    nothing here alters. Load the manifests first (``load_manifests``), so bad
    manifests fail before any connection is made.

    Raises:
        ClusterMismatchError: the manifests' ``metadata.clusterId`` names
            another cluster.
        BrokerError: a describe failed.
    """
    cluster_id = check_cluster(desired, client)
    live = read_live_state(client, desired.scope, cluster_id=cluster_id)
    return compute_drift(desired, live)
