"""The steps the CLI runs, each a plain function: connect, check the cluster, plan.

Kept apart from the CLI so tests and other front ends drive the same code.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from quotaform.desired import DesiredState
from quotaform.diff import compute_plan
from quotaform.errors import QuotaformError
from quotaform.live import read_live_state
from quotaform.manifest import load_manifests
from quotaform.plan import Plan
from quotaform.wire import ConnectionSettings, QuotaAdminClient, open_admin

__all__ = ["ClusterMismatchError", "check_cluster", "connect", "make_plan"]


class ClusterMismatchError(QuotaformError):
    """The manifests name a cluster id and the connected cluster has another."""


def connect(settings: ConnectionSettings, *, read_only: bool) -> QuotaAdminClient:
    """Open a quota client (read-only for plan, validate and drift)."""
    return open_admin(settings, read_only=read_only)


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


def make_plan(
    paths: Sequence[str | Path],
    client: QuotaAdminClient,
    *,
    allow_deletes: bool = False,
) -> tuple[DesiredState, Plan]:
    """Load the manifests, read the live state in their scope and diff.

    Raises:
        ManifestError: invalid manifests (before any RPC).
        ClusterMismatchError: wrong cluster.
        BrokerError: the describe failed.
    """
    desired = load_manifests(paths)
    cluster_id = check_cluster(desired, client)
    live = read_live_state(client, desired.scope, cluster_id=cluster_id)
    return desired, compute_plan(desired, live, allow_deletes=allow_deletes)
