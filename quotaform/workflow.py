"""The steps the CLI runs, each a plain function: connect, check the cluster, plan.

Kept apart from the CLI so tests and other front ends drive the same code.
:func:`plan_clusters` runs the plan steps once per cluster of a manifest set
(``plan --all-clusters``); what it returns is aggregated and rendered by
:mod:`quotaform.multicluster`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from quotaform.clusters import ClusterConfigError, ClusterProfiles, resolve_settings
from quotaform.desired import DesiredState
from quotaform.diff import compute_plan
from quotaform.errors import QuotaformError
from quotaform.guards import GuardFlags
from quotaform.live import read_live_state
from quotaform.manifest import load_manifests, manifest_clusters
from quotaform.multicluster import ClusterPlan, MultiClusterPlan
from quotaform.plan import Plan
from quotaform.wire import ConnectionSettings, QuotaAdminClient, open_admin

__all__ = [
    "ClusterMismatchError",
    "check_cluster",
    "connect",
    "make_plan",
    "plan_clusters",
    "plan_desired",
]


class ClusterMismatchError(QuotaformError):
    """The manifests name a cluster id and the connected cluster has another."""


def connect(
    settings: ConnectionSettings, *, read_only: bool, cluster_id: str | None = None
) -> QuotaAdminClient:
    """Open a quota client (read-only for plan, validate and drift).

    Args:
        cluster_id: the id the cluster must have (a profile's ``clusterId``);
            ``None``: not checked here.

    Raises:
        ClusterMismatchError: the cluster has another id (the client is closed).
    """
    client = open_admin(settings, read_only=read_only)
    if cluster_id is None:
        return client
    try:
        actual = client.cluster_id()
        if actual != cluster_id:
            raise ClusterMismatchError(
                f"the cluster profile expects cluster id {cluster_id!r}, but "
                f"{settings.bootstrap_servers} belongs to cluster id {actual!r}: "
                "refusing to use the wrong cluster"
            )
    except BaseException:
        client.close()
        raise
    return client


def check_cluster(desired: DesiredState, client: QuotaAdminClient) -> str:
    """The connected cluster's id, after checking it against ``metadata.clusterId``.

    Raises:
        ClusterMismatchError: the manifests expect another cluster id.
    """
    cluster_id = client.cluster_id()
    if desired.cluster_id is not None and desired.cluster_id != cluster_id:
        raise ClusterMismatchError(
            f"the manifests are for cluster {desired.cluster!r} with id "
            f"{desired.cluster_id!r}, but the bootstrap server belongs to cluster id "
            f"{cluster_id!r}: refusing to plan against the wrong cluster"
        )
    return cluster_id


def plan_desired(
    desired: DesiredState,
    client: QuotaAdminClient,
    *,
    allow_deletes: bool = False,
    guard_flags: GuardFlags | None = None,
) -> Plan:
    """Check the cluster, read the live state in ``desired``'s scope and diff,
    checking the change budget (``guard_flags`` over ``spec.changeBudget``).

    Raises:
        ClusterMismatchError: wrong cluster.
        BrokerError: the describe failed.
    """
    cluster_id = check_cluster(desired, client)
    live = read_live_state(client, desired.scope, cluster_id=cluster_id)
    budget = (guard_flags or GuardFlags()).budget_for(desired)
    return compute_plan(desired, live, allow_deletes=allow_deletes, budget=budget)


def make_plan(
    paths: Sequence[str | Path],
    client: QuotaAdminClient,
    *,
    allow_deletes: bool = False,
    cluster: str | None = None,
    guard_flags: GuardFlags | None = None,
) -> tuple[DesiredState, Plan]:
    """Load the manifests (for ``cluster``, see :func:`load_manifests`), read the
    live state in their scope and diff.

    Raises:
        ManifestError: invalid manifests (before any RPC).
        ClusterMismatchError: wrong cluster.
        BrokerError: the describe failed.
    """
    desired = load_manifests(paths, cluster=cluster)
    return desired, plan_desired(
        desired, client, allow_deletes=allow_deletes, guard_flags=guard_flags
    )


def plan_clusters(
    paths: Sequence[str | Path],
    profiles: ClusterProfiles,
    *,
    allow_deletes: bool = False,
    guard_flags: GuardFlags | None = None,
    env: Mapping[str, str] | None = None,
) -> MultiClusterPlan:
    """Plan every cluster the manifests name, each with its profile and a
    read-only client, one after the other.

    A cluster whose manifests, connection or plan fails is recorded as failed
    (its error message) and the others still run.

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
            settings = resolve_settings(profile, env=env)
            with connect(settings, read_only=True, cluster_id=profile.cluster_id) as client:
                plan = plan_desired(
                    desired, client, allow_deletes=allow_deletes, guard_flags=guard_flags
                )
        except QuotaformError as exc:
            results.append(ClusterPlan(name, error=str(exc)))
        else:
            results.append(ClusterPlan(name, plan=plan))
    return MultiClusterPlan.build(results)
