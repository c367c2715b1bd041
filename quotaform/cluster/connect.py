"""Open a quota client and make sure it is the cluster the caller means."""

from __future__ import annotations

import logging
import time

from quotaform.cluster.read import ClusterReader
from quotaform.cluster.wire.client import QuotaAdminClient
from quotaform.cluster.wire.connection import ConnectionSettings
from quotaform.cluster.wire.open import open_admin
from quotaform.errors import ClusterMismatchError
from quotaform.plan.state import DesiredState

_log = logging.getLogger(__name__)

__all__ = ["check_cluster", "connect"]


def connect(
    settings: ConnectionSettings, *, read_only: bool, cluster_id: str | None = None
) -> QuotaAdminClient:
    """Open a quota client (read-only for plan, validate and drift).

    Args:
        cluster_id: the id the cluster must have (a profile's ``clusterId``);
            ``None``: not checked here.

    Raises:
        ConnectionSettingsError: the cluster cannot be reached.
        ClusterMismatchError: the cluster has another id (the client is closed).
    """
    start = time.perf_counter()
    client = open_admin(settings, read_only=read_only)
    _log.info(
        "connected to %s (%s, %s) in %.3f s",
        settings.bootstrap_servers,
        settings.security_protocol,
        "read-only" if read_only else "read-write",
        time.perf_counter() - start,
    )
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


def check_cluster(desired: DesiredState, client: ClusterReader) -> str:
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
