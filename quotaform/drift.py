"""Drift: how the live cluster differs from the manifests, without changing it.

The comparison is the plan's (:func:`quotaform.diff.compute_plan`), read the
other way round: where the plan would update an entity the cluster has
*changed*, where it would create one the entity is *missing*, where it would
delete one it is *unexpected*; a no-op is in sync. Live entities outside the
scope are *unmanaged*: counted per entity shape, never listed or touched.

:func:`compute_drift` is pure. :func:`read_drift_state` reads the cluster (one
strict DescribeClientQuotas per entity shape) through an injected reader, and
:func:`detect_drift` chains the cluster-id check, reading and comparing for
the ``drift`` command.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from quotaform.desired import DesiredState, Scope, shape_name
from quotaform.diff import compute_plan
from quotaform.entity import Entity
from quotaform.live import ALL_SHAPES, LiveState, QuotaReader, shape_filter
from quotaform.plan import Action, KeyAction, KeyChange, Quotas
from quotaform.wire import QuotaAdminClient
from quotaform.workflow import check_cluster

__all__ = [
    "DRIFT_FORMAT_VERSION",
    "DriftKind",
    "DriftReport",
    "EntityDrift",
    "LiveStateByShape",
    "UnmanagedCount",
    "compute_drift",
    "detect_drift",
    "read_drift_state",
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
class LiveStateByShape(LiveState):
    """A :class:`LiveState` that also counts unmanaged entities per shape.

    Attributes:
        unmanaged_by_shape: shape name -> live entities of that shape outside
            the scope, every shape of :data:`ALL_SHAPES` in that order; the
            values add up to :attr:`unmanaged`.

    Raises:
        ValueError: (on construction) the per-shape counts do not add up to
            ``unmanaged``.
    """

    unmanaged_by_shape: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.unmanaged_by_shape and sum(self.unmanaged_by_shape.values()) != self.unmanaged:
            raise ValueError(
                f"unmanaged_by_shape adds up to {sum(self.unmanaged_by_shape.values())}, "
                f"not unmanaged={self.unmanaged}"
            )


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
        live: the cluster's in-scope quotas; a :class:`LiveStateByShape`
            (from :func:`read_drift_state`) also gives the unmanaged count per
            shape, a plain :class:`LiveState` only the total.

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
    by_shape = live.unmanaged_by_shape if isinstance(live, LiveStateByShape) else {}
    return DriftReport(
        cluster=desired.cluster,
        cluster_id=live.cluster_id,
        changed=tuple(found[DriftKind.CHANGED]),
        missing=tuple(found[DriftKind.MISSING]),
        unexpected=tuple(found[DriftKind.UNEXPECTED]),
        matching=matching,
        unmanaged=UnmanagedCount(live.unmanaged, MappingProxyType(dict(by_shape))),
        rpc_counts=MappingProxyType(dict(sorted(live.rpc_counts.items()))),
        # Only the manifests' own warnings: the plan's "deletes not allowed"
        # note is about apply, and drift never applies.
        warnings=desired.warnings,
    )


def read_drift_state(
    reader: QuotaReader, scope: Scope, *, cluster_id: str | None = None
) -> LiveStateByShape:
    """Describe every entity shape once, strictly, and split by scope per shape.

    Four DescribeClientQuotas calls (one per shape of :data:`ALL_SHAPES`),
    whatever the scope owns, so the unmanaged count covers the whole cluster.
    Prefix rules are applied client-side (Kafka has no prefix match). Never
    alters: a read-only client is enough.

    Args:
        reader: the describe half of a quota client.
        scope: what the manifests own.
        cluster_id: recorded in the result when the caller knows it.

    Returns:
        The in-scope entities with their quotas, the unmanaged total and its
        split per shape name, and the RPCs made
        (``{"DescribeClientQuotas": 4}``).

    Raises:
        BrokerError: from the wire layer (AuthorizationError when the principal
            lacks DESCRIBE_CONFIGS on CLUSTER).
    """
    before = sum(reader.rpc_counts.values())
    entities: dict[Entity, Mapping[str, float]] = {}
    by_shape: dict[str, int] = {}
    for shape in ALL_SHAPES:
        outside = 0
        described = reader.describe_client_quotas(shape_filter(shape), strict=True)
        for entity, quotas in described.items():
            if scope.contains(entity):
                entities[entity] = quotas
            else:
                outside += 1
        by_shape[shape_name(shape)] = outside
    rpcs = sum(reader.rpc_counts.values()) - before
    return LiveStateByShape(
        entities=entities,
        unmanaged=sum(by_shape.values()),
        cluster_id=cluster_id,
        rpc_counts={"DescribeClientQuotas": rpcs},
        unmanaged_by_shape=MappingProxyType(by_shape),
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
    live = read_drift_state(client, desired.scope, cluster_id=cluster_id)
    return compute_drift(desired, live)
