"""The steps the commands run, each a plain function over the layers below:
load manifests, connect, read the live state, plan and review, refuse, detect
drift, plan every cluster.

Kept apart from the CLI so tests and other front ends drive the same code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from quotaform.cluster.connect import check_cluster, connect
from quotaform.cluster.profiles import ClusterProfiles, resolve_settings
from quotaform.cluster.read import ClusterReader, read_live_state
from quotaform.cluster.wire.client import QuotaAdminClient
from quotaform.cluster.wire.connection import ConnectionSettings
from quotaform.errors import (
    ClusterConfigError,
    GuardRefusedError,
    PlanFileError,
    QuotaformError,
    StaleStorageError,
)
from quotaform.kafka.entity import Entity
from quotaform.manifest import load_manifests, manifest_clusters
from quotaform.plan.diff import compute_plan
from quotaform.plan.differences import differences
from quotaform.plan.drift import DriftReport, compute_drift
from quotaform.plan.model import EntityChange, Plan
from quotaform.plan.multicluster import ClusterPlan, MultiClusterPlan
from quotaform.plan.review import PlanReview, mismatched, review_plan
from quotaform.plan.state import ChangeBudget, DesiredState, Scope
from quotaform.plan.storage import SCALED_KEY, StorageScaling, rescale, scale_desired
from quotaform.render.words import violation_line
from quotaform.storage import VolumeSource, evaluate_storage, scale_for_storage

__all__ = [
    "check_storage_holds",
    "detect_drift",
    "make_plan",
    "plan_clusters",
    "plan_desired",
    "refuse_unless_allowed",
    "review_saved_plan",
    "storage_only",
]


def plan_desired(
    desired: DesiredState,
    client: QuotaAdminClient,
    *,
    flags: ChangeBudget | None = None,
    volumes: VolumeSource | None = None,
    settings: ConnectionSettings | None = None,
) -> tuple[Plan, PlanReview]:
    """Check the cluster, read the live state in ``desired``'s scope, scale
    the declared ``producer_byte_rate`` values by the storage policy (when
    the manifests declare one; volume usage from ``volumes``, default the
    cluster's DescribeLogDirs), diff, and review the plan (``flags`` over the
    manifests' budget).

    Raises:
        ClusterMismatchError: wrong cluster.
        BrokerError: the describe failed.
        StorageError: volume usage could not be read.
    """
    cluster_id = check_cluster(desired, client)
    live = read_live_state(client, desired.scope, cluster_id=cluster_id)
    scaled, scaling = scale_for_storage(
        desired, live, volumes or VolumeSource(), client=client, settings=settings
    )
    plan = compute_plan(scaled, live)
    if scaling is not None:
        plan = replace(plan, storage=scaling)
    return plan, review_plan(plan, scaled, flags)


def make_plan(
    paths: Sequence[str | Path],
    client: QuotaAdminClient,
    *,
    cluster: str | None = None,
    flags: ChangeBudget | None = None,
    volumes: VolumeSource | None = None,
    settings: ConnectionSettings | None = None,
) -> tuple[DesiredState, Plan, PlanReview]:
    """Load the manifests (for ``cluster``, see
    :func:`~quotaform.manifest.load_manifests`), then :func:`plan_desired`.

    Raises:
        ManifestError: invalid manifests (before any RPC).
        ClusterMismatchError: wrong cluster.
        BrokerError: the describe failed.
    """
    desired = load_manifests(paths, cluster=cluster)
    plan, review = plan_desired(desired, client, flags=flags, volumes=volumes, settings=settings)
    return desired, plan, review


def refuse_unless_allowed(review: PlanReview) -> None:
    """Refuse a plan apply must not run, before anything is sent.

    Raises:
        GuardRefusedError: listing every violation (deletes not allowed,
            protection, the budget) and the flag allowing each.
    """
    if review.violations:
        raise GuardRefusedError([violation_line(v) for v in review.violations])


def review_saved_plan(
    plan: Plan, desired: DesiredState | None, flags: ChangeBudget | None = None
) -> PlanReview:
    """Judge a saved plan again, trusting nothing its file says about
    permissions or verdicts: by ``desired`` (the manifests given to apply)
    with the apply run's ``flags`` over them; without manifests, by the
    flags over the defaults (deletes not allowed, relax factor 10), with the
    plan's own entities as all that is known (a removed key that falls back
    outside them counts as unknown, so as relaxing beyond any factor).

    Raises:
        PlanFileError: the plan does not match ``desired`` (the file was
            edited, or made from other manifests), naming the entities.
    """
    if desired is None:
        stand_in = DesiredState.build(
            cluster=plan.cluster, cluster_id=plan.cluster_id, scope=Scope(()), entities=[]
        )
        planned = {c.entity for c in plan.changes}
        return review_plan(plan, stand_in, flags, in_scope=planned.__contains__)
    if desired.storage is not None and plan.storage is not None:
        desired, _ = rescale(desired, desired.storage, plan.storage.state, plan.storage.factor)
    wrong = mismatched(plan, desired)
    if wrong:
        names = "; ".join(e.label() for e in wrong[:10])
        more = f" and {len(wrong) - 10} more" if len(wrong) > 10 else ""
        raise PlanFileError(
            f"the saved plan does not match the manifests for {len(wrong)} "
            f"entit{'y' if len(wrong) == 1 else 'ies'} ({names}{more}): the file was edited "
            f"or made from other manifests ({'; '.join(_against_manifests(plan, desired, wrong))}"
            "); refusing it. Plan again."
        )
    return review_plan(plan, desired, flags)


def _against_manifests(
    plan: Plan, desired: DesiredState, wrong: Sequence[Entity], limit: int = 10
) -> list[str]:
    """Each way the plan's ``after`` differs from what the manifests declare
    for the ``wrong`` entities, as ``plan.changes[i].after.KEY: in the plan !=
    declared`` (``(absent)`` where one side has nothing)."""
    index = {c.entity: i for i, c in enumerate(plan.changes)}
    lines: list[str] = []
    for entity in wrong:
        declared = desired.entities.get(entity)
        expected = dict(declared.quotas) if declared is not None else {}
        i = index.get(entity)
        if i is None:
            lines.append(f"{entity.label()}: declared, but not in the plan")
            continue
        if not desired.scope.contains(entity):
            lines.append(f"plan.changes[{i}]: {entity.label()} is outside the manifests' scope")
            continue
        lines += differences(dict(plan.changes[i].after), expected, root=f"plan.changes[{i}].after")
    return lines[:limit] + ([f"... and {len(lines) - limit} more"] if len(lines) > limit else [])


def check_storage_holds(
    plan: Plan,
    desired: DesiredState | None,
    client: QuotaAdminClient,
    *,
    volumes: VolumeSource | None = None,
    settings: ConnectionSettings | None = None,
) -> StorageScaling | None:
    """For ``apply PLANFILE``: the storage scaling now, when the saved plan was
    scaled; refuses the plan when its state or factor no longer holds.

    Raises:
        StalePlanError: the state changed, or the factor moved by more than
            one hysteresis step since the plan was made (nothing applied).
        StorageError: volume usage could not be read.
    """
    if plan.storage is None:
        return None
    if desired is None or desired.storage is None:
        raise PlanFileError(
            "the saved plan was scaled by a storage policy: give apply the manifests too "
            "(apply PLANFILE PATH...), so the factor can be checked before anything is sent"
        )
    policy = desired.storage
    # As if the plan's values were live: the hold rule judges the move from them.
    live = {s.entity: {SCALED_KEY: s.written} for s in plan.storage.scaled}
    evaluation = evaluate_storage(
        policy, volumes or VolumeSource(), client=client, settings=settings
    )
    _, now = scale_desired(desired, policy, evaluation, live)
    if not plan.storage.holds(now):
        raise StaleStorageError(
            f"the storage factor no longer holds: the plan was made for {plan.storage.state.value} "
            f"{plan.storage.factor:.2f}, volume usage now gives {now.state.value} "
            f"{now.factor:.2f} ({now.reason or 'every volume within its soft limit'}); "
            "nothing applied. Plan again."
        )
    return now


def storage_only(plan: Plan) -> tuple[Plan, tuple[EntityChange, ...]]:
    """Split ``plan`` for ``storage watch``: the plan of the storage scalings
    alone (changes whose only key change is a scaled ``producer_byte_rate``),
    and every other pending change (left for a reviewed ``apply``)."""
    storage = plan.storage
    declared = storage.declared() if storage is not None else {}
    mine, others = [], []
    for change in plan.pending:
        if storage is not None and storage.only_scales(change, declared):
            mine.append(change)
        else:
            others.append(change)
    return replace(plan, changes=tuple(mine)), tuple(others)


def detect_drift(
    desired: DesiredState,
    client: ClusterReader,
    *,
    volumes: VolumeSource | None = None,
    settings: ConnectionSettings | None = None,
) -> DriftReport:
    """Check the cluster id, read the live state and compare: ``quotaform drift``.
    With a storage policy, live is compared with the declared values times
    the current factor: a scaled quota is not drift, and a scale still to
    apply is reported as such (``DriftReport.scale_pending``).

    ``client`` should be opened read-only: nothing here alters. Load the
    manifests first, so bad manifests fail before any connection is made.

    Raises:
        ClusterMismatchError: the manifests' ``metadata.clusterId`` names
            another cluster.
        BrokerError: a describe failed.
    """
    cluster_id = check_cluster(desired, client)
    live = read_live_state(client, desired.scope, cluster_id=cluster_id)
    scaled, scaling = scale_for_storage(
        desired,
        live,
        volumes or VolumeSource(),
        client=client,  # type: ignore[arg-type]
        settings=settings,
    )
    return compute_drift(scaled, live, storage=scaling)


def plan_clusters(
    paths: Sequence[str | Path],
    profiles: ClusterProfiles,
    *,
    flags: ChangeBudget | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
) -> MultiClusterPlan:
    """Plan every cluster the manifests name, each with its profile and a
    read-only client, one after the other.

    A cluster whose manifests, connection or plan fails is recorded as failed
    (its error message) and the others still run. ``timeout_s`` (``--timeout``)
    bounds each connection attempt and each RPC, in seconds.

    Raises:
        ManifestError: the set cannot be read at all.
        ClusterConfigError: the set names no cluster, or a cluster without a
            profile (every such cluster named; nothing is connected).
    """
    names = manifest_clusters(paths)
    if not names:
        raise ClusterConfigError(
            "the manifests name no cluster: --all-clusters plans the clusters named by "
            "metadata.cluster or metadata.clusters"
        )
    missing = [n for n in names if n not in profiles.profiles]
    if missing:
        raise ClusterConfigError(
            f"{profiles.path}: no profile for cluster(s) {', '.join(missing)} named by the "
            f"manifests (profiles: {', '.join(profiles.names) or 'none'})"
        )
    results = []
    for name in names:
        try:
            desired = load_manifests(paths, cluster=name)
            profile = profiles.get(name)
            settings = resolve_settings(profile, env=env).with_timeout(timeout_s)
            with connect(settings, read_only=True, cluster_id=profile.cluster_id) as client:
                plan, review = plan_desired(desired, client, flags=flags)
        except QuotaformError as exc:
            results.append(ClusterPlan(name, error=str(exc)))
        else:
            results.append(ClusterPlan(name, plan=plan, review=review))
    return MultiClusterPlan.build(results)
