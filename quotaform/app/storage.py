"""``quotaform storage status|snapshot|watch``: storage-aware producer quotas
(the Strimzi volume-usage policy, run from outside the broker).

Each command takes one request and returns one result: :func:`run_status`
(the policy's state and factor, read-only), :func:`run_snapshot` (Volume
Metrics records, optionally published), :func:`run_watch` (re-evaluate every
interval and apply the storage scalings alone, logging through the request).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from quotaform.app.common import ConnectionOptions, View, load_and_target
from quotaform.app.facts import FactsWanted, gather_facts
from quotaform.app.plan import plan_desired
from quotaform.app.volumes import VolumeSource, evaluate_storage, publish_snapshots
from quotaform.cluster.apply import apply_plan
from quotaform.cluster.connect import connect
from quotaform.cluster.profiles import ClusterTarget
from quotaform.cluster.storage import read_volumes
from quotaform.errors import ClusterMismatchError, ManifestError, QuotaformError, StorageError
from quotaform.kafka.units import format_duration, format_readable
from quotaform.manifest import load_manifests
from quotaform.plan.decide import evaluate_volumes
from quotaform.plan.model import EntityChange, Plan
from quotaform.plan.outcome import ApplyStatus, EntityOutcome
from quotaform.plan.state import DesiredState
from quotaform.plan.storage import only_scales, scale_desired
from quotaform.plan.storage_types import StorageEvaluation, StoragePolicy, StorageScaling
from quotaform.words import scaling_factor_text

__all__ = [
    "SnapshotRequest",
    "SnapshotRun",
    "StatusRequest",
    "StatusRun",
    "WatchLevel",
    "WatchRequest",
    "WatchRun",
    "require_policy",
    "run_snapshot",
    "run_status",
    "run_watch",
    "storage_only",
]


def require_policy(desired: DesiredState) -> StoragePolicy:
    """The manifests' ``spec.storagePolicy``.

    Raises:
        StorageError: the manifests declare none.
    """
    if desired.storage is None:
        raise StorageError("the manifests declare no spec.storagePolicy (see docs/storage.md)")
    return desired.storage


@dataclass(frozen=True, slots=True)
class StatusRequest:
    """``quotaform storage status``.

    Attributes:
        manifests: manifest files or directories (they hold the policy).
        connection: where to connect; with ``volumes.snapshots`` and no
            ``--cluster`` / ``--bootstrap-server`` / ``--command-config``, no
            connection is made (offline).
        volumes: where volume usage comes from.
        view: warnings.
    """

    manifests: tuple[Path, ...]
    connection: ConnectionOptions = field(default_factory=ConnectionOptions)
    volumes: VolumeSource = field(default_factory=VolumeSource)
    view: View = field(default_factory=View)


@dataclass(frozen=True, slots=True)
class StatusRun:
    """The policy, its evaluation, and what each scaled entity's
    ``producer_byte_rate`` becomes; ``cluster`` is the manifests' cluster and
    ``source`` where the volume usage came from (``DescribeLogDirs``,
    ``snapshots FILE...``, ``topic T``)."""

    policy: StoragePolicy
    evaluation: StorageEvaluation
    scaling: StorageScaling
    cluster: str
    source: str


def run_status(request: StatusRequest) -> StatusRun:
    """Evaluate the storage policy (read-only): offline from snapshot files
    when no cluster is named, else against the cluster (its brokers and its
    live quotas).

    Raises:
        ManifestError: bad manifests.
        StorageError: no policy, bad snapshots, unreadable volume usage.
        ClusterConfigError, ConnectionSettingsError, ClusterMismatchError,
            BrokerError: as the connection and describes raise them.
    """
    options = request.connection
    offline = bool(request.volumes.snapshots) and not options.flags_given()
    if offline:
        desired = load_manifests(request.manifests, cluster=options.cluster)
        policy = require_policy(desired)
        evaluation = evaluate_storage(policy, request.volumes, client=None)
        _, scaling = scale_desired(desired, policy, evaluation, {})
        return StatusRun(policy, evaluation, scaling, desired.cluster, request.volumes.describe())
    desired, where = load_and_target(request.manifests, options, request.view)
    policy = require_policy(desired)
    wanted = FactsWanted(enforcement=False, volumes=request.volumes)
    with connect(where.settings, read_only=True, cluster_id=where.cluster_id) as client:
        facts = gather_facts(client, desired, wanted, settings=where.settings)
    assert facts.volumes is not None  # a policy is declared: the volumes were read
    evaluation = evaluate_volumes(policy, facts.volumes)
    _, scaling = scale_desired(desired, policy, evaluation, facts.live)
    return StatusRun(policy, evaluation, scaling, desired.cluster, request.volumes.describe())


@dataclass(frozen=True, slots=True)
class SnapshotRequest:
    """``quotaform storage snapshot``.

    Attributes:
        manifests: manifest files or directories (the limits written are
            their policy's).
        connection: where to connect.
        publish: publish the records to this compacted topic, keyed by broker id.
        create_topic: create the ``publish`` topic when missing.
        view: warnings (publication errors) and messages.
    """

    manifests: tuple[Path, ...]
    connection: ConnectionOptions = field(default_factory=ConnectionOptions)
    publish: str | None = None
    create_topic: bool = False
    view: View = field(default_factory=View)


@dataclass(frozen=True, slots=True)
class SnapshotRun:
    """The Volume Metrics records, one per broker (JSON-ready mappings,
    ``schemas/volume-snapshot.schema.json``)."""

    records: tuple[dict[str, Any], ...]


def run_snapshot(request: SnapshotRequest) -> SnapshotRun:
    """One snapshot per broker from DescribeLogDirs (capacity = TotalBytes,
    consumed = TotalBytes - UsableBytes), published when asked.

    Raises:
        StorageError: no policy, or records that could not be published
            (each said through ``view.warn`` first).
        ManifestError, ClusterConfigError, ConnectionSettingsError,
            BrokerError: as the steps raise them.
    """
    from quotaform.formats.storage import snapshot_record  # pydantic models, when needed

    desired, where = load_and_target(request.manifests, request.connection, request.view)
    policy = require_policy(desired)
    publish = request.publish
    with connect(where.settings, read_only=publish is None, cluster_id=where.cluster_id) as client:
        found, _ = read_volumes(client, now=datetime.now(UTC))
        records = tuple(snapshot_record(s, policy) for s in found)
        if publish is not None:
            errors = publish_snapshots(
                client, where.settings, publish, found, policy, create=request.create_topic
            )
            for error in errors:
                request.view.warn(f"publication error: {error}")
            request.view.info(
                f"published {len(found) - len(errors)} of {len(found)} record(s) to {publish}"
            )
            if errors:
                raise StorageError(f"{len(errors)} record(s) could not be published to {publish}")
    return SnapshotRun(records)


class WatchLevel(enum.StrEnum):
    """How much a ``storage watch`` log line matters."""

    CHANGE = "change"
    """A quota written, per key."""
    WARNING = "warning"
    """A failed evaluation, a publication error, changes left for apply."""
    QUIET = "quiet"
    """An evaluation that changed nothing."""


def _ignore(message: str, level: WatchLevel) -> None:
    """Log nothing (the default of :attr:`WatchRequest.log`)."""


@dataclass(frozen=True, slots=True)
class WatchRequest:
    """``quotaform storage watch``.

    Attributes:
        manifests: manifest files or directories (they hold the policy).
        connection: where to connect (reconnected every evaluation).
        volumes: where volume usage comes from.
        interval_s: seconds between the starts of two evaluations.
        iterations: stop after this many evaluations (``None``: run until
            interrupted).
        publish: also publish each evaluation's live snapshots to this
            compacted topic.
        create_topic: create the ``publish`` topic when missing (as
            ``storage snapshot --create-topic``).
        log: receives each log line (timestamped, UTC) with its level.
        sleep, clock: ``time.sleep`` and ``time.monotonic`` (seconds).
        view: warnings of the connection settings.
    """

    manifests: tuple[Path, ...]
    connection: ConnectionOptions = field(default_factory=ConnectionOptions)
    volumes: VolumeSource = field(default_factory=VolumeSource)
    interval_s: float = 30.0
    iterations: int | None = None
    publish: str | None = None
    create_topic: bool = False
    log: Callable[[str, WatchLevel], None] = _ignore
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    view: View = field(default_factory=View)


@dataclass(frozen=True, slots=True)
class WatchRun:
    """How a watch ended (after ``iterations`` evaluations).

    Attributes:
        evaluations: evaluations made.
        failed: evaluations that failed (logged, the next one retried).
        last_error: the last evaluation's error (``None``: it succeeded), so
            a one-shot run from cron exits non-zero when it did nothing.
    """

    evaluations: int
    failed: int
    last_error: QuotaformError | None = None


#: Errors that no retry can mend: the watch stops at once.
_FATAL = (ClusterMismatchError, ManifestError)


def run_watch(request: WatchRequest) -> WatchRun:
    """Re-evaluate the storage policy every ``interval_s`` and apply the
    rescaled ``producer_byte_rate`` values only (creating entities, adding
    keys and any other change are logged and left for a reviewed apply).
    Every write is logged before it is sent, and its outcome after. A failed
    evaluation is logged and the next one reconnects; the last one's error is
    returned.

    Raises:
        ManifestError, StorageError (no policy), ClusterConfigError,
            ConnectionSettingsError: before the first evaluation.
        ClusterMismatchError: the cluster is not the manifests' (at once:
            retrying cannot mend it).
    """
    desired, where = load_and_target(request.manifests, request.connection, request.view)
    require_policy(desired)
    done = failed = 0
    while True:
        started = request.clock()
        last = request.iterations is not None and done + 1 >= request.iterations
        error: QuotaformError | None = None
        try:
            _watch_once(desired, where, request)
        except _FATAL:
            raise
        except QuotaformError as exc:
            error = exc
            failed += 1
            then = "" if last else f", retrying in {format_duration(request.interval_s)}"
            request.log(f"{_now()} evaluation failed{then}: {exc}", WatchLevel.WARNING)
        done += 1
        if last:
            return WatchRun(done, failed, error)
        request.sleep(max(0.0, request.interval_s - (request.clock() - started)))


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _value(key: str, value: float | None) -> str:
    return "(not set)" if value is None else format_readable(key, value)


def _watch_once(desired: DesiredState, where: ClusterTarget, request: WatchRequest) -> None:
    source = request.volumes
    log = request.log
    with connect(where.settings, read_only=False, cluster_id=where.cluster_id) as client:
        if request.publish is not None and desired.storage is not None:
            found, _ = read_volumes(client, now=datetime.now(UTC))
            errors = publish_snapshots(
                client,
                where.settings,
                request.publish,
                found,
                desired.storage,
                create=request.create_topic,
            )
            for error in errors:
                log(f"{_now()} publication error: {error}", WatchLevel.WARNING)
            if source.live:
                source = replace(source, read=tuple(found))  # one DescribeLogDirs per round
        plan, _ = plan_desired(desired, client, volumes=source, settings=where.settings)
        assert plan.storage is not None
        scaling = plan.storage
        mine, others = storage_only(plan)
        headline = scaling_factor_text(scaling)
        if others:
            log(
                f"{_now()} {len(others)} other change(s) pending, not applied by watch "
                f"({', '.join(c.entity.label() for c in others[:5])}"
                f"{', ...' if len(others) > 5 else ''}; review them with quotaform plan / apply)",
                WatchLevel.WARNING,
            )
        if not mine.pending:
            log(f"{_now()} {headline}: no change", WatchLevel.QUIET)
            return
        why = scaling.reason or "every volume within its soft limit"
        for change in mine.pending:
            for kc in change.key_changes:
                log(
                    f"{_now()} {headline}: writing {change.entity.label()} {kc.key} "
                    f"{_value(kc.key, kc.before)} -> {_value(kc.key, kc.after)} ({why})",
                    WatchLevel.CHANGE,
                )
        result = apply_plan(mine, client)
        for outcome in result.entities:
            if outcome.outcome is not EntityOutcome.APPLIED:
                log(
                    f"{_now()} {outcome.change.entity.label()}: {outcome.outcome.value}"
                    + (f": {outcome.message}" if outcome.message else ""),
                    WatchLevel.WARNING,
                )
        if result.status is not ApplyStatus.APPLIED:
            raise StorageError(f"applying the storage scaling ended {result.status.value}")
        log(f"{_now()} applied {len(mine.pending)} rescale(s)", WatchLevel.CHANGE)


def storage_only(plan: Plan) -> tuple[Plan, tuple[EntityChange, ...]]:
    """Split ``plan`` for ``storage watch``: the plan of the storage scalings
    alone (rescales of a live ``producer_byte_rate``: see
    :func:`~quotaform.plan.storage.only_scales`),
    and every other pending change (left for a reviewed ``apply``)."""
    storage = plan.storage
    declared = storage.declared() if storage is not None else {}
    mine, others = [], []
    for change in plan.pending:
        if storage is not None and only_scales(change, declared):
            mine.append(change)
        else:
            others.append(change)
    return replace(plan, changes=tuple(mine)), tuple(others)
