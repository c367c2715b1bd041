"""``quotaform plan``: load the manifests, connect read-only, read the live
state, scale by the storage policy, diff and review; with ``--out``, save the
plan file. Also every cluster the manifests name (``--all-clusters``).

:func:`run_plan` and :func:`plan_all_clusters` take one request and return
one result; :func:`plan_desired` is the step ``apply``, ``storage watch``
and tests share.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from quotaform.app.common import ConnectionOptions, View, load_and_target
from quotaform.app.principals import principal_warnings
from quotaform.app.volumes import VolumeSource, scale_for_storage
from quotaform.cluster.brokers import BrokerConfigs, read_broker_configs, read_quota_enforcement
from quotaform.cluster.connect import check_cluster, connect
from quotaform.cluster.principals import SUPER_USERS
from quotaform.cluster.profiles import ClusterProfiles, load_required_profiles, resolve_settings
from quotaform.cluster.read import read_live_state
from quotaform.cluster.wire.client import QuotaAdminClient
from quotaform.cluster.wire.connection import ConnectionSettings
from quotaform.errors import ClusterConfigError, GuardRefusedError, QuotaformError
from quotaform.manifest import load_manifests, manifest_clusters
from quotaform.plan.diff import compute_plan
from quotaform.plan.enforcement import QUOTA_CALLBACK_CONFIG
from quotaform.plan.model import Plan
from quotaform.plan.multicluster import ClusterPlan, MultiClusterPlan
from quotaform.plan.principals import SuperUser
from quotaform.plan.review import PlanReview, review_plan
from quotaform.plan.state import ChangeBudget, DesiredState

__all__ = [
    "AllClustersRequest",
    "PlanOutcome",
    "PlanRequest",
    "make_plan",
    "plan_all_clusters",
    "plan_clusters",
    "plan_desired",
    "run_plan",
]


def _not_shown(plan: Plan, review: PlanReview) -> None:
    """Show nothing (the default of :attr:`PlanRequest.show`)."""


@dataclass(frozen=True, slots=True)
class PlanRequest:
    """One ``quotaform plan`` run against one cluster.

    Attributes:
        manifests: manifest files or directories.
        connection: where to connect (``--cluster`` also picks the manifests'
            cluster).
        budget: the change budget the flags give (a flag not passed is ``None``).
        volumes: where the storage policy's volume usage comes from.
        out: ``--out FILE``: save the plan there (refused while a guard rail
            is broken; an empty ``QUOTAFORM_PLAN_KEY`` fails before any work).
        show: shows the plan and its review, before any verdict.
        view: warnings and messages.
        super_users: ``--super-user``: super user principals (``User:admin``),
            beside the cluster profile's ``superUsers``.
    """

    manifests: tuple[Path, ...]
    connection: ConnectionOptions = field(default_factory=ConnectionOptions)
    budget: ChangeBudget = field(default_factory=ChangeBudget)
    volumes: VolumeSource = field(default_factory=VolumeSource)
    out: Path | None = None
    show: Callable[[Plan, PlanReview], None] = _not_shown
    view: View = field(default_factory=View)
    super_users: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PlanOutcome:
    """What :func:`run_plan` produced: the manifests' desired state, the
    plan, its review, and where the plan was saved (``None``: not asked)."""

    desired: DesiredState
    plan: Plan
    review: PlanReview
    saved_to: Path | None = None


def run_plan(request: PlanRequest) -> PlanOutcome:
    """Plan one cluster: load, connect read-only, :func:`plan_desired`, add
    the warnings about principals
    (:func:`~quotaform.app.principals.principal_warnings`: SCRAM users, super
    users of the profile, ``--super-user`` and the brokers), show the plan
    through ``request.show``, then refuse a plan that breaks a guard rail,
    then save it when ``request.out`` is set.

    Raises:
        PlanKeyError: ``--out`` with an empty ``QUOTAFORM_PLAN_KEY`` (before
            any work).
        ManifestError, ClusterConfigError, ConnectionSettingsError: before
            connecting.
        ClusterMismatchError, BrokerError, StorageError: while planning.
        GuardRefusedError: the plan breaks guard rails (shown first; no file
            written).
    """
    if request.out is not None:
        from quotaform.formats.planfile import signing_key  # only plans saved to a file

        signing_key()  # an empty QUOTAFORM_PLAN_KEY fails before any work
    desired, where = load_and_target(request.manifests, request.connection, request.view)
    with connect(where.settings, read_only=True, cluster_id=where.cluster_id) as client:
        # how the brokers enforce quotas and their super users: one DescribeConfigs round
        configs = read_broker_configs(client, [QUOTA_CALLBACK_CONFIG, SUPER_USERS])
        plan, review = plan_desired(
            desired,
            client,
            flags=request.budget,
            volumes=request.volumes,
            settings=where.settings,
            broker_configs=configs,
        )
        at = f"superUsers at {where.super_users_source}"
        given = [SuperUser(p, at) for p in where.super_users]
        given += [SuperUser(p, "--super-user") for p in request.super_users]
        found = principal_warnings(
            desired, plan, client, super_users=given, view=request.view, broker_configs=configs
        )
    if found:
        plan = replace(plan, warnings=(*plan.warnings, *found))
    request.show(plan, review)
    if review.violations:
        raise GuardRefusedError(
            [],
            f"the plan breaks {len(review.violations)} guard rail(s) (listed above)"
            + ("; no plan file was written" if request.out is not None else ""),
        )
    if request.out is not None:
        from quotaform.formats.planfile import write_plan_file

        write_plan_file(plan, review, request.out)
        request.view.info(
            f"Saved the plan to {request.out}. Apply exactly this plan with: "
            f"quotaform apply {request.out}"
        )
    return PlanOutcome(desired, plan, review, request.out)


@dataclass(frozen=True, slots=True)
class AllClustersRequest:
    """``quotaform plan --all-clusters``: every cluster the manifests name,
    each through its profile.

    Attributes:
        manifests: manifest files or directories.
        config: ``--config FILE``, the profiles file (it must exist).
        budget: the change budget the flags give.
        timeout_s: ``--timeout`` in seconds.
    """

    manifests: tuple[Path, ...]
    config: Path | None = None
    budget: ChangeBudget = field(default_factory=ChangeBudget)
    timeout_s: float | None = None


def plan_all_clusters(request: AllClustersRequest) -> MultiClusterPlan:
    """:func:`plan_clusters` with the profiles file found near the manifests.

    Raises:
        ClusterConfigError: no profiles file, or as :func:`plan_clusters`.
    """
    profiles = load_required_profiles(request.config, near=request.manifests)
    return plan_clusters(
        request.manifests, profiles, flags=request.budget, timeout_s=request.timeout_s
    )


def plan_desired(
    desired: DesiredState,
    client: QuotaAdminClient,
    *,
    flags: ChangeBudget | None = None,
    volumes: VolumeSource | None = None,
    settings: ConnectionSettings | None = None,
    broker_configs: BrokerConfigs | None = None,
) -> tuple[Plan, PlanReview]:
    """Check the cluster, read the live state in ``desired``'s scope and how
    the brokers enforce quotas (DescribeCluster, DescribeConfigs), scale
    the declared ``producer_byte_rate`` values by the storage policy (when
    the manifests declare one; volume usage from ``volumes``, default the
    cluster's DescribeLogDirs), diff, and review the plan (``flags`` over the
    manifests' budget). ``broker_configs``: the brokers' DescribeConfigs
    answer with ``client.quota.callback.class`` among its names, when already
    read (``plan`` reads it with ``super.users``).

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
    enforcement = read_quota_enforcement(client, broker_configs)
    plan = replace(compute_plan(scaled, live), enforcement=enforcement)
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
