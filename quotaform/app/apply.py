"""``quotaform apply``: read the files, connect, take the apply lock, plan
(or judge a saved plan again), confirm, then the validate_only pre-check, the
alter and the read-back (:func:`quotaform.cluster.apply.apply_plan`).

:func:`run_apply` takes one :class:`ApplyRequest` and returns one
:class:`ApplyRun`; the plan is shown, the question asked and the progress
drawn through the request's callables. Exit codes are the CLI's
(:mod:`quotaform.errors`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from quotaform.app.common import ConnectionOptions, View, target
from quotaform.app.plan import plan_desired
from quotaform.app.volumes import VolumeSource, evaluate_storage
from quotaform.cluster.apply import apply_plan, check_not_stale
from quotaform.cluster.connect import connect
from quotaform.cluster.lock import HeldLock, apply_lock
from quotaform.cluster.profiles import ClusterTarget
from quotaform.cluster.wire.client import QuotaAdminClient
from quotaform.cluster.wire.connection import ConnectionSettings
from quotaform.errors import (
    ApplyCancelledError,
    GuardRefusedError,
    PlanFileError,
    QuotaformError,
    StalePlanError,
    StaleStorageError,
)
from quotaform.formats.planfile import is_plan_file, read_plan_file
from quotaform.kafka.entity import Entity
from quotaform.manifest import load_manifests
from quotaform.plan.differences import differences
from quotaform.plan.model import Plan
from quotaform.plan.outcome import ApplyResult, ApplyStatus
from quotaform.plan.review import PlanReview, mismatched, review_plan
from quotaform.plan.state import ChangeBudget, DesiredState, Scope
from quotaform.plan.storage import rescale, scale_desired
from quotaform.plan.storage_types import SCALED_KEY, StorageScaling
from quotaform.words import violation_line

__all__ = [
    "ApplyRequest",
    "ApplyRun",
    "check_storage_holds",
    "refuse_unless_allowed",
    "review_saved_plan",
    "run_apply",
]


def _not_shown(plan: Plan, review: PlanReview) -> None:
    """Show nothing (the default of :attr:`ApplyRequest.show`)."""


def _refuse(plan: Plan, review: PlanReview) -> None:
    """Approve nothing (the default of :attr:`ApplyRequest.confirm`)."""
    raise ApplyCancelledError("apply cancelled: nothing confirms it; nothing was applied")


@dataclass(frozen=True, slots=True)
class ApplyRequest:
    """One ``quotaform apply`` run.

    Attributes:
        targets: manifest files or directories; or a saved plan file followed
            by the manifests whose settings (protection, change budget) judge it.
        connection: where to connect.
        budget: the change budget the flags give (a flag not passed is ``None``).
        volumes: where the storage policy's volume usage comes from.
        auto_approve: apply without :attr:`confirm` (a saved plan never asks).
        readback_timeout_s: how long the read-back waits for the cluster to
            show the plan, seconds.
        lock_timeout_s: how long to wait for another apply's lock, seconds
            (0: fail at once).
        lock: take the cluster's apply lock (``--no-lock``: ``False``).
        show: shows the plan (and its review) before anything is asked or sent.
        confirm: asks for approval of a plan with changes; raises
            :class:`~quotaform.errors.ApplyCancelledError` when not given.
        view: warnings, notes, and the progress display while applying.
    """

    targets: tuple[Path, ...]
    connection: ConnectionOptions = field(default_factory=ConnectionOptions)
    budget: ChangeBudget = field(default_factory=ChangeBudget)
    volumes: VolumeSource = field(default_factory=VolumeSource)
    auto_approve: bool = False
    readback_timeout_s: float = 30.0
    lock_timeout_s: float = 0.0
    lock: bool = True
    show: Callable[[Plan, PlanReview], None] = _not_shown
    confirm: Callable[[Plan, PlanReview], None] = _refuse
    view: View = field(default_factory=View)


@dataclass(frozen=True, slots=True)
class ApplyRun:
    """How one apply ended.

    Attributes:
        plan, review: the plan applied (or refused) and its review.
        status: how it ended (``NOTHING_TO_DO`` when nothing was pending).
        result: the executor's per-entity result (``None``: nothing was sent).
        stopped: why nothing was sent (refused by the guard rails,
            cancelled, stale): the error the command ends with, else ``None``.
        lock_error: why the apply lock could not be released, else ``None``.
    """

    plan: Plan
    review: PlanReview
    status: ApplyStatus
    result: ApplyResult | None = None
    stopped: QuotaformError | None = None
    lock_error: str | None = None


class _Stop(Exception):
    """Ends the run early with a status and the error it stops on."""

    def __init__(self, plan: Plan, review: PlanReview, status: ApplyStatus, error: QuotaformError):
        super().__init__(str(error))
        self.run = ApplyRun(plan, review, status, stopped=error)


def run_apply(request: ApplyRequest) -> ApplyRun:
    """Apply manifests (plan, show, confirm) or a saved plan (read intact,
    for this cluster, not stale, judged again, storage factor still holding;
    never asked), under the cluster's apply lock.

    The files are read before connecting. A lock left held is said through
    ``view.warn`` on every path, errors included.

    Raises:
        ManifestError, PlanFileError, PlanKeyError: bad input (nothing sent).
        ClusterConfigError, ConnectionSettingsError, ClusterMismatchError,
            BrokerError, ApplyLockedError, StorageError: as the steps raise
            them (nothing sent, or as the executor reported).
    """
    first = request.targets[0]
    saved = is_plan_file(first)
    # The files are read before connecting: they say nothing about the cluster.
    saved_plan = read_plan_file(first)[0] if saved else None
    policy = request.targets[1:] if saved else request.targets
    options = request.connection
    desired = None
    if policy:
        for_cluster = options.cluster or (saved_plan.cluster if saved_plan else None)
        desired = load_manifests(policy, cluster=for_cluster)
    implied = saved_plan.cluster if saved_plan is not None else None
    if desired is not None:
        implied = implied or desired.cluster
    where = target(options, request.view, implied=implied, near=request.targets)
    held: HeldLock | None = None
    try:
        with (
            connect(where.settings, read_only=False, cluster_id=where.cluster_id) as client,
            apply_lock(
                client,
                where.settings,
                timeout_s=request.lock_timeout_s,
                enabled=request.lock,
            ) as held,
        ):
            plan, review = _plan_to_apply(saved_plan, first, desired, where, request, client)
            request.show(plan, review)
            result: ApplyResult | None = None
            if plan.summary.has_changes:
                _allow(plan, review, ask=not saved and not request.auto_approve, request=request)
                with request.view.progress() as on_progress:
                    result = apply_plan(
                        plan,
                        client,
                        on_progress=on_progress,
                        readback_timeout_s=request.readback_timeout_s,
                    )
    except _Stop as stop:
        _say_lock(held, request.view)
        return stop.run
    except BaseException:
        _say_lock(held, request.view)
        raise
    lock_error = _say_lock(held, request.view)
    status = result.status if result is not None else ApplyStatus.NOTHING_TO_DO
    return ApplyRun(plan, review, status, result, lock_error=lock_error)


def _plan_to_apply(
    saved_plan: Plan | None,
    first: Path,
    desired: DesiredState | None,
    where: ClusterTarget,
    request: ApplyRequest,
    client: QuotaAdminClient,
) -> tuple[Plan, PlanReview]:
    """The saved plan, judged again and checked not stale (its storage
    factor still holding), or the plan of the manifests, made now.

    Raises:
        _Stop: the saved plan is stale.
    """
    if saved_plan is None:
        assert desired is not None
        return plan_desired(
            desired,
            client,
            flags=request.budget,
            volumes=request.volumes,
            settings=where.settings,
        )
    try:
        review = _judge_saved(saved_plan, first, desired, where.cluster, request, client)
        check_storage_holds(
            saved_plan, desired, client, volumes=request.volumes, settings=where.settings
        )
    except StalePlanError as exc:
        stale = review_saved_plan(saved_plan, desired, request.budget)
        raise _Stop(saved_plan, stale, ApplyStatus.STALE, exc) from None
    return saved_plan, review


def _allow(plan: Plan, review: PlanReview, *, ask: bool, request: ApplyRequest) -> None:
    """Refuse a plan the guard rails refuse; with ``ask``, ask for the typed
    ``yes``.

    Raises:
        _Stop: refused, or cancelled.
    """
    try:
        refuse_unless_allowed(review)
        if ask:
            request.confirm(plan, review)
    except GuardRefusedError as exc:
        raise _Stop(plan, review, ApplyStatus.REFUSED, exc) from None
    except ApplyCancelledError as exc:
        raise _Stop(plan, review, ApplyStatus.CANCELLED, exc) from None


def _say_lock(held: HeldLock | None, view: View) -> str | None:
    """Why the lock could not be released (said through ``view.warn``: the
    next run would be blocked), else ``None``."""
    lock_error = held.release_error if held is not None else None
    if lock_error is not None:
        view.warn(lock_error)
    return lock_error


def _judge_saved(
    the_plan: Plan,
    planfile: Path,
    desired: DesiredState | None,
    cluster: str | None,
    request: ApplyRequest,
    client: QuotaAdminClient,
) -> PlanReview:
    """A saved plan (read intact, signed when a key is set), checked for this
    cluster and not stale, and judged again (by ``desired``, the manifests
    given after it, when given)."""
    if cluster is not None and the_plan.cluster != cluster:
        raise PlanFileError(
            f"{planfile} is a plan for cluster {the_plan.cluster!r}, not {cluster!r}"
        )
    check_not_stale(the_plan, client, client.cluster_id())
    if desired is None:
        request.view.note(
            "the manifests were not given, so spec.protect, preventDestroy and the "
            "manifests' change budget were not checked; pass them after the plan file "
            f"(quotaform apply {planfile} MANIFESTS...)"
        )
    return review_saved_plan(the_plan, desired, request.budget)


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
