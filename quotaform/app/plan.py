"""``quotaform plan``: load the manifests, connect read-only and read the
cluster's facts in one step, then decide (scale by the storage policy,
diff, review, principal warnings) without the cluster; with ``--out``, save
the plan file. Also every cluster the manifests name (``--all-clusters``).

:func:`run_plan` and :func:`plan_all_clusters` take one request and return
one result; :func:`plan_desired` is the step ``apply``, ``storage watch``
and tests share.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from quotaform.app.common import ConnectionOptions, View, load_and_target
from quotaform.app.facts import FactsWanted, gather_facts, read_facts
from quotaform.cluster.profiles import ClusterProfiles, load_required_profiles, profile_target
from quotaform.cluster.wire.client import QuotaAdminClient
from quotaform.cluster.wire.connection import ConnectionSettings
from quotaform.errors import ClusterConfigError, GuardRefusedError, QuotaformError
from quotaform.manifest import load_manifests, manifest_clusters
from quotaform.plan.decide import decide_plan
from quotaform.plan.facts import VolumeSource
from quotaform.plan.model import Plan
from quotaform.plan.principals import SuperUser
from quotaform.plan.review import PlanReview
from quotaform.plan.state import ChangeBudget, DesiredState

if TYPE_CHECKING:
    from quotaform.plan.multicluster import MultiClusterPlan

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
    """Plan one cluster: read, then think. Load the manifests and find the
    cluster; connect read-only and read every fact the plan needs at once
    (:func:`~quotaform.app.facts.gather_facts`: live quotas, the brokers'
    enforcement and ``super.users``, the SCRAM users, the volumes); close
    the connection; decide the plan, its review and the warnings about
    principals (:func:`~quotaform.plan.decide.decide_plan`; super users of
    the profile and ``--super-user`` beside the brokers'); show it through
    ``request.show``, then refuse a plan that breaks a guard rail, then save
    it when ``request.out`` is set.

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
    at = f"superUsers at {where.super_users_source}"
    given = [SuperUser(p, at) for p in where.super_users]
    given += [SuperUser(p, "--super-user") for p in request.super_users]
    facts = read_facts(desired, where, FactsWanted(principals=True, volumes=request.volumes))
    decided = decide_plan(desired, facts, flags=request.budget, super_users=given)
    for note in decided.notes:
        request.view.note(note)
    plan, review = decided.plan, decided.review
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
        connection: ``--config FILE`` (the profiles file; it must exist) and
            ``--timeout``; the options that select one cluster are refused.
        budget: the change budget the flags give.
        out: ``--out FILE``: refused (one plan file holds one cluster's plan).
        super_users: ``--super-user``: refused (each profile names its own).
    """

    manifests: tuple[Path, ...]
    connection: ConnectionOptions = field(default_factory=ConnectionOptions)
    budget: ChangeBudget = field(default_factory=ChangeBudget)
    out: Path | None = None
    super_users: tuple[str, ...] = ()


def plan_all_clusters(request: AllClustersRequest) -> MultiClusterPlan:
    """:func:`plan_clusters` through the profiles file (``--config``, else the
    one found near the manifests).

    Raises:
        ClusterConfigError: an option that selects one cluster (``--cluster``,
            ``--bootstrap-server``, ``--command-config``), ``--out`` or
            ``--super-user`` (before any work); no profiles file; or as
            :func:`plan_clusters`.
    """
    options = request.connection
    clash = options.flags_given() + (["--out"] if request.out is not None else [])
    clash += ["--super-user"] if request.super_users else []
    if clash:
        raise ClusterConfigError(
            f"--all-clusters connects through the cluster profiles: drop {', '.join(clash)}"
        )
    return plan_clusters(
        request.manifests, config=options.config, flags=request.budget, timeout_s=options.timeout_s
    )


def plan_desired(
    desired: DesiredState,
    client: QuotaAdminClient,
    *,
    flags: ChangeBudget | None = None,
    volumes: VolumeSource | None = None,
    settings: ConnectionSettings | None = None,
) -> tuple[Plan, PlanReview]:
    """Read the cluster's facts (:func:`~quotaform.app.facts.gather_facts`:
    the cluster id check, the live state in ``desired``'s scope, how the
    brokers enforce quotas, the volume usage from ``volumes`` when the
    manifests declare a storage policy), then decide the plan and its review
    (:func:`~quotaform.plan.decide.decide_plan`; ``flags`` over the
    manifests' budget). The step ``apply``, ``storage watch`` and
    ``--all-clusters`` share.

    Raises:
        ClusterMismatchError: wrong cluster.
        BrokerError: the describe failed.
        StorageError: volume usage could not be read.
    """
    facts = gather_facts(client, desired, FactsWanted(volumes=volumes), settings=settings)
    decided = decide_plan(desired, facts, flags=flags)
    return decided.plan, decided.review


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
    profiles: ClusterProfiles | None = None,
    *,
    config: Path | None = None,
    flags: ChangeBudget | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
) -> MultiClusterPlan:
    """Plan every cluster the manifests name, each with its profile and a
    read-only client, one after the other: the same read, then think, as
    :func:`run_plan` (:func:`~quotaform.app.facts.read_facts`, then
    :func:`~quotaform.plan.decide.decide_plan`).

    ``profiles`` ``None``: the profiles file ``config``, else the one found
    near the manifests (it must exist), read before the manifests.

    A cluster whose manifests, connection or plan fails is recorded as failed
    (its error message) and the others still run. ``timeout_s`` (``--timeout``)
    bounds each connection attempt and each RPC, in seconds.

    Raises:
        ManifestError: the set cannot be read at all.
        ClusterConfigError: no profiles file, or it is invalid; the set names
            no cluster, or a cluster without a profile (every such cluster
            named; nothing is connected).
    """
    from quotaform.plan.multicluster import ClusterPlan, MultiClusterPlan  # --all-clusters only

    if profiles is None:
        profiles = load_required_profiles(config, near=[Path(p) for p in paths])
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
            where = profile_target(profiles.get(name), env)
            where = replace(where, settings=where.settings.with_timeout(timeout_s))
            facts = read_facts(desired, where)
            decided = decide_plan(desired, facts, flags=flags)
        except QuotaformError as exc:
            results.append(ClusterPlan(name, error=str(exc)))
        else:
            results.append(ClusterPlan(name, plan=decided.plan, review=decided.review))
    return MultiClusterPlan.build(results)
