"""Read, then think: the one step that reads what a command needs of a
cluster into one :class:`~quotaform.plan.facts.ClusterFacts`.

After the cluster id check, the reads are independent of each other and go
out together through the one admin client (kafka-python's client runs its
I/O on one thread that serves concurrent callers): the live quotas (one
strict DescribeClientQuotas per shape), the brokers and their configuration
(DescribeCluster, DescribeConfigs: the quota callback and ``super.users``),
the SCRAM users (DescribeUserScramCredentials, when a declared quota names a
user) and the volume usage (DescribeLogDirs, snapshot files or the topic,
when a storage policy is declared). What is decided from them is
:mod:`quotaform.plan.decide`'s, and never reads again.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from quotaform.cluster.brokers import BrokerConfigs, read_broker_configs
from quotaform.cluster.connect import check_cluster, connect
from quotaform.cluster.principals import read_scram_users
from quotaform.cluster.read import describe_matching, read_live_state
from quotaform.cluster.wire.client import QuotaAdminClient
from quotaform.cluster.wire.connection import ConnectionSettings
from quotaform.plan.enforcement import QUOTA_CALLBACK_CONFIG, QuotaEnforcement
from quotaform.plan.facts import (
    SUPER_USERS,
    BrokerSuperUsers,
    ClusterFacts,
    PrincipalFacts,
    ScramUsers,
    VolumeSource,
)
from quotaform.plan.principals import named_user_entities
from quotaform.plan.state import DesiredState

if TYPE_CHECKING:
    from quotaform.cluster.profiles import ClusterTarget

__all__ = ["FactsWanted", "gather_facts", "read_facts"]


@dataclass(frozen=True, slots=True)
class FactsWanted:
    """Which facts beside the live quotas a command needs.

    Attributes:
        enforcement: the brokers and their quota callback (plan, explain,
            analyze, drift with probes).
        principals: the SCRAM users and the brokers' ``super.users`` (plan's
            warnings).
        volumes: where volume usage comes from, when the manifests declare a
            storage policy (default: the cluster's DescribeLogDirs).
    """

    enforcement: bool = True
    principals: bool = False
    volumes: VolumeSource | None = None


def read_facts(
    desired: DesiredState, where: ClusterTarget, wanted: FactsWanted | None = None
) -> ClusterFacts:
    """The read step of a plan: connect read-only to ``where`` (its cluster id,
    when the profile names one, checked on connecting), :func:`gather_facts`
    for ``desired``, close the connection.

    Raises:
        ConnectionSettingsError, BrokerError: the connection failed.
        ClusterMismatchError, BrokerError, StorageError: as :func:`gather_facts`.
    """
    with connect(where.settings, read_only=True, cluster_id=where.cluster_id) as client:
        return gather_facts(client, desired, wanted, settings=where.settings)


def gather_facts(
    client: QuotaAdminClient,
    desired: DesiredState | None,
    wanted: FactsWanted | None = None,
    *,
    settings: ConnectionSettings | None = None,
) -> ClusterFacts:
    """Every fact of the cluster ``wanted`` for ``desired``, read in one step.

    ``desired`` ``None``: every live entity of every shape, as
    ``kafka-configs --describe`` reads them (explain, analyze, monitor), no
    cluster id check. Otherwise the cluster id is checked first (nothing is
    read from a cluster the manifests do not name), then the live state in
    the manifests' scope (:func:`~quotaform.cluster.read.read_live_state`)
    and the other reads, side by side.

    Raises:
        ClusterMismatchError: the manifests name another cluster.
        BrokerError: a describe failed (DescribeCluster included).
        StorageError: volume usage could not be read.
    """
    wanted = wanted or FactsWanted()
    if desired is None:
        cluster_id = client.cluster_id()
        reads: dict[str, Callable[[], Any]] = {
            "live": lambda: describe_matching(client, None, cluster_id=cluster_id)
        }
    else:
        cluster_id = check_cluster(desired, client)
        reads = {"live": lambda: read_live_state(client, desired.scope, cluster_id=cluster_id)}
    names = [QUOTA_CALLBACK_CONFIG] if wanted.enforcement else []
    names += [SUPER_USERS] if wanted.principals else []
    if names:
        reads["configs"] = lambda: read_broker_configs(client, names)
    if wanted.principals and desired is not None and named_user_entities(desired):
        reads["scram"] = lambda: read_scram_users(client)
    if desired is not None and desired.storage is not None:
        from quotaform.app.volumes import read_volume_usage  # only with a storage policy

        source = wanted.volumes or VolumeSource()
        reads["volumes"] = lambda: read_volume_usage(source, client=client, settings=settings)
    got = _side_by_side(reads)
    configs: BrokerConfigs | None = got.get("configs")
    enforcement = None
    if wanted.enforcement and configs is not None:
        enforcement = QuotaEnforcement.from_configs(configs.brokers, configs.values, configs.errors)
    principals = None
    if wanted.principals and configs is not None:
        principals = _principals(configs, got.get("scram"))
    return ClusterFacts(
        live=got["live"], enforcement=enforcement, principals=principals, volumes=got.get("volumes")
    )


def _side_by_side(reads: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """Run ``reads`` at once; their results by name. A failed read raises its
    error (the first in ``reads``' order when several fail)."""
    if len(reads) == 1:
        ((name, read),) = reads.items()
        return {name: read()}
    with ThreadPoolExecutor(max_workers=len(reads), thread_name_prefix="facts") as pool:
        futures: dict[str, Future[Any]] = {n: pool.submit(r) for n, r in reads.items()}
    return {name: future.result() for name, future in futures.items()}


def _principals(configs: BrokerConfigs, scram: ScramUsers | None) -> PrincipalFacts:
    supers = BrokerSuperUsers.from_configs(configs.values, configs.hidden, configs.errors)
    return PrincipalFacts(scram, supers)
