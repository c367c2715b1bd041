"""Execute a plan: validate_only pre-check, the real alter, then read-back.

1. Every entry goes to AlterClientQuotas with ``validate_only=true`` (batched).
   If any entity fails, nothing is applied and every failing entity is listed
   with the broker's message.
2. The real alter, in batches; every entity's result is handled on its own
   (Kafka is per-entity all-or-nothing, not atomic across entities).
3. Read-back: describe until the cluster shows the planned quotas or a timeout
   passes (a broker's metadata image can lag the controller). On a cluster of
   several brokers the same strict describes go to each broker by node id, side
   by side, within the same timeout (:func:`confirm_on_brokers`): each broker
   answers from its own copy of the metadata log, so one that lags is named.

Whether a plan may be applied at all is the review's verdict
(:mod:`quotaform.plan.review`), checked by the caller before this runs.
:func:`check_not_stale` is the saved plan's last check before it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, runtime_checkable

from quotaform.cluster.read import QuotaReader, describe_shapes
from quotaform.cluster.wire.codes import error_text
from quotaform.cluster.wire.types import (
    AlterOutcome,
    AlterResult,
    FilterComponent,
    QuotaAlteration,
)
from quotaform.errors import AuthorizationError, PlanFileError, StalePlanError
from quotaform.kafka.brokers import BrokerNode
from quotaform.kafka.entity import SHAPES, Entity, Shape
from quotaform.kafka.units import same_quotas
from quotaform.plan.model import EntityChange, Plan
from quotaform.plan.outcome import (
    ApplyResult,
    ApplyStatus,
    BrokerReadBack,
    BrokerState,
    EntityOutcome,
    EntityResult,
)

__all__ = [
    "BrokerReader",
    "QuotaWriter",
    "alteration",
    "apply_plan",
    "check_not_stale",
    "confirm_on_brokers",
]

log = logging.getLogger(__name__)


class QuotaWriter(Protocol):
    """What apply needs of a client (the wire layer's ``QuotaAdminClient``)."""

    rpc_counts: dict[str, int]

    def describe_client_quotas(
        self, components: list[FilterComponent], *, strict: bool
    ) -> dict[Entity, dict[str, float]]: ...

    def alter_client_quotas(
        self,
        alterations: list[QuotaAlteration],
        *,
        validate_only: bool,
        on_batch: Callable[[int, int], None] | None = None,
    ) -> dict[Entity, AlterResult]: ...


@runtime_checkable
class BrokerReader(Protocol):
    """A client that lists the brokers and describes on each one by node id
    (the wire layer's ``QuotaAdminClient``). A client without these methods is
    read back through its own connection only."""

    def brokers(
        self, *, fresh: bool = False, timeout_ms: int | None = None
    ) -> list[BrokerNode]: ...

    def describe_client_quotas_on(
        self,
        node_id: int,
        components: Sequence[FilterComponent],
        *,
        strict: bool,
        timeout_ms: int,
    ) -> dict[Entity, dict[str, float]]: ...


#: Every broker gets at least one describe this long, even when the read-back
#: through the connection used up the timeout.
MIN_BROKER_TRY_S = 1.0

_OUTCOME = {
    AlterOutcome.APPLIED: EntityOutcome.APPLIED,
    AlterOutcome.FAILED: EntityOutcome.FAILED,
    AlterOutcome.UNKNOWN: EntityOutcome.UNKNOWN,
    AlterOutcome.NOT_SENT: EntityOutcome.NOT_APPLIED,
}
_LOST = (AlterOutcome.UNKNOWN, AlterOutcome.NOT_SENT)


def _message(result: AlterResult | None) -> str | None:
    if result is None or result.error is None:
        return None
    err = result.error
    if result.outcome is AlterOutcome.NOT_SENT:
        return f"not sent: {err.name}" + (f": {err.broker_message}" if err.broker_message else "")
    if result.outcome is AlterOutcome.UNKNOWN:
        detail = f" ({err.broker_message})" if err.broker_message else ""
        return f"no answer: {err.name}{detail}"
    code = f" ({err.code})" if err.code is not None else ""
    return f"{err.name}{code}: {err.broker_message}" if err.broker_message else f"{err.name}{code}"


def apply_plan(
    plan: Plan,
    client: QuotaWriter,
    *,
    on_progress: Callable[[str, int, int], None] | None = None,
    readback_timeout_s: float = 30.0,
    readback_interval_s: float = 0.2,
) -> ApplyResult:
    """Apply ``plan``'s pending changes to the cluster behind ``client``.
    (Over 80 lines: the three steps of an apply, validate_only, alter and
    read-back, with the rule that ends each, read best in one place.)

    Once any real alter has been sent this always returns a result, never
    raises: every entity is applied (the broker said so), failed (with the
    broker's error), unknown (sent, no answer) or not applied (never sent),
    and a read-back that cannot be made leaves the confirmed ones confirmed
    (``readback_error``).

    Args:
        plan: the plan; no-ops are not sent.
        client: a read-write quota client.
        on_progress: ``(stage, done, total)`` with stage ``validate``,
            ``apply`` or ``read-back``.
        readback_timeout_s: how long to wait for describe to show the plan
            (through the connection; with several brokers, on each broker).

    Returns:
        An :class:`ApplyResult`. A validate_only rejection is a result
        (``REJECTED``, with each failing entity and the broker's message), and
        so is a connection lost before any real alter was sent
        (``NOTHING_APPLIED``).

    Raises:
        AuthorizationError: the pre-check was refused for lack of
            ALTER_CONFIGS on the CLUSTER (nothing was applied).
        BrokerError: the pre-check failed as a whole (nothing was applied).
    """
    pending = list(plan.pending)
    if not pending:
        return ApplyResult(ApplyStatus.NOTHING_TO_DO)
    alterations = [alteration(c) for c in pending]
    start_counts = dict(client.rpc_counts)

    def not_applied(
        results: Mapping[Entity, AlterResult], status: ApplyStatus, error: str | None = None
    ) -> ApplyResult:
        return _not_applied(pending, results, status, _delta(client, start_counts), error)

    # 1. validate_only: all or nothing. It never writes, so a lost answer
    # here still means nothing was applied.
    log.info("apply: validate_only pre-check of %d entities", len(alterations))
    checked = client.alter_client_quotas(
        alterations, validate_only=True, on_batch=_stage_progress(on_progress, "validate")
    )
    lost = [r for r in checked.values() if r.outcome in _LOST]
    if lost:
        reason = lost[0].error
        return not_applied(
            {},
            ApplyStatus.NOTHING_APPLIED,
            "the connection was lost during the validate_only pre-check"
            + (f" ({reason})" if reason else ""),
        )
    rejected = {e: r for e, r in checked.items() if r.outcome is not AlterOutcome.APPLIED}
    if rejected:
        errors = [r.error for r in rejected.values()]
        if len(rejected) == len(checked) and all(isinstance(e, AuthorizationError) for e in errors):
            raise errors[0]  # type: ignore[misc]
        return not_applied(rejected, ApplyStatus.REJECTED)

    # 2. The real alter; every entity's result on its own.
    log.info("apply: altering %d entities", len(alterations))
    results = client.alter_client_quotas(
        alterations, validate_only=False, on_batch=_stage_progress(on_progress, "apply")
    )
    if all(r.outcome is AlterOutcome.NOT_SENT for r in results.values()):
        reason = next(iter(results.values())).error
        return not_applied(
            results,
            ApplyStatus.NOTHING_APPLIED,
            "the connection was lost before the first AlterClientQuotas was sent"
            + (f" ({reason})" if reason else ""),
        )

    # 3. Read-back until every applied entity shows what the plan says; a
    # read-back that cannot be made never erases what the broker confirmed.
    live, brokers, readback_error, waited = _read_back_everywhere(
        client, pending, results, readback_timeout_s, readback_interval_s, on_progress
    )
    done = [_entity_result(c, results.get(c.entity), live) for c in pending]
    status = _status(done, brokers, readback_error)
    return ApplyResult(
        status,
        tuple(done),
        _delta(client, start_counts),
        waited,
        readback_error=readback_error,
        brokers=brokers,
    )


def _not_applied(
    pending: list[EntityChange],
    results: Mapping[Entity, AlterResult],
    status: ApplyStatus,
    rpc_counts: dict[str, int],
    error: str | None,
) -> ApplyResult:
    """Nothing applied: every pending entity ``NOT_APPLIED``, with the
    broker's message for it when there is one."""
    reports = tuple(
        EntityResult(c, EntityOutcome.NOT_APPLIED, _message(results.get(c.entity)))
        for c in pending
    )
    return ApplyResult(status, reports, rpc_counts, error=error)


def _stage_progress(
    on_progress: Callable[[str, int, int], None] | None, stage: str
) -> Callable[[int, int], None] | None:
    """``on_progress`` for one stage: ``(done, total)`` -> ``(stage, done, total)``."""
    if on_progress is None:
        return None
    return lambda done, total: on_progress(stage, done, total)


def _entity_result(
    change: EntityChange,
    result: AlterResult | None,
    live: Mapping[Entity, Mapping[str, float]] | None,
) -> EntityResult:
    """One entity's outcome (unknown without an answer) with what the
    read-back last saw of it (``None``: nothing could be read)."""
    outcome = _OUTCOME[result.outcome] if result else EntityOutcome.UNKNOWN
    seen = dict(live.get(change.entity, {})) if live is not None else None
    return EntityResult(change, outcome, _message(result), seen)


def _read_back_everywhere(
    client: QuotaWriter,
    pending: list[EntityChange],
    results: Mapping[Entity, AlterResult],
    timeout_s: float,
    interval_s: float,
    on_progress: Callable[[str, int, int], None] | None,
) -> tuple[
    dict[Entity, dict[str, float]] | None, tuple[BrokerReadBack, ...], str | None, float
]:
    """Read the applied entities back until they show the plan or
    ``timeout_s`` passes: on each broker when there are several (the
    connection's broker is one), else through the client. Returns what was
    last seen (``None``: nothing could be read), each broker's read-back,
    why the read-back could not be made (never raised: the broker's answers
    stand) and the seconds waited."""
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    log.info("apply: reading back")
    readback_error: str | None = None
    unlisted: str | None = None
    live: dict[Entity, dict[str, float]] | None = None
    brokers: tuple[BrokerReadBack, ...] = ()
    several = False
    if isinstance(client, BrokerReader):
        try:
            several = len(client.brokers(timeout_ms=_left_ms(deadline))) > 1
            if several:
                brokers, live = _read_back_on_brokers(
                    client, pending, results, deadline, interval_s, on_progress
                )
        except Exception as exc:  # the brokers could not be listed: read through the client
            unlisted = f"the brokers could not be listed: {str(exc) or type(exc).__name__}"
    if not several or unlisted is not None:
        try:
            live = _read_back(
                client,
                pending,
                results,
                max(deadline - time.monotonic(), 0.0),
                interval_s,
                on_progress,
            )
        except Exception as exc:  # whatever it is, the result must still be reported
            live, readback_error = None, str(exc) or type(exc).__name__
    return live, brokers, readback_error or unlisted, time.monotonic() - t0


def _status(
    done: list[EntityResult], brokers: tuple[BrokerReadBack, ...], readback_error: str | None
) -> ApplyStatus:
    """PARTIAL when an entity was not applied; APPLIED when every one was and
    the read-back (on every broker) shows the plan; else NOT_CONVERGED."""
    if any(r.outcome is not EntityOutcome.APPLIED for r in done):
        return ApplyStatus.PARTIAL
    read_back = readback_error is None and all(b.matched for b in brokers)
    if read_back and all(r.converged for r in done):
        return ApplyStatus.APPLIED
    return ApplyStatus.NOT_CONVERGED


def alteration(change: EntityChange) -> QuotaAlteration:
    """The AlterClientQuotas entry of a pending change: only the changed keys,
    removals as ``None``.

    Raises:
        ValueError: the change is a no-op (nothing to send).
    """
    return QuotaAlteration(change.entity, {kc.key: kc.after for kc in change.key_changes})


def _delta(client: QuotaWriter, before: Mapping[str, int]) -> dict[str, int]:
    return {
        api: n - before.get(api, 0)
        for api, n in sorted(client.rpc_counts.items())
        if n - before.get(api, 0)
    }


def _touched(pending: Sequence[EntityChange]) -> list[Shape]:
    """The entity shapes ``pending`` changes, in a fixed order."""
    return sorted({c.entity.types for c in pending}, key=lambda s: (len(s), s))


def _expected(
    pending: Sequence[EntityChange], results: Mapping[Entity, AlterResult]
) -> dict[Entity, dict[str, float]]:
    """The planned quotas of the entities the broker said it applied."""
    return {
        c.entity: dict(c.after)
        for c in pending
        if (r := results.get(c.entity)) is not None and r.outcome is AlterOutcome.APPLIED
    }


def _read_back(
    client: QuotaWriter,
    pending: list[EntityChange],
    results: Mapping[Entity, AlterResult],
    timeout_s: float,
    interval_s: float,
    on_progress: Callable[[str, int, int], None] | None,
) -> dict[Entity, dict[str, float]]:
    """Describe the touched shapes (strict, one RPC per shape) until every
    applied entity matches its planned quotas, or ``timeout_s`` passes."""
    shapes = _touched(pending)
    expected = _expected(pending, results)
    deadline = time.monotonic() + timeout_s
    while True:
        live = describe_shapes(client, shapes)
        matched = sum(1 for e, q in expected.items() if same_quotas(live.get(e, {}), q))
        if on_progress is not None:
            on_progress("read-back", matched, len(expected))
        if matched == len(expected) or time.monotonic() >= deadline:
            return live
        time.sleep(interval_s)


def confirm_on_brokers(
    client: BrokerReader,
    pending: Sequence[EntityChange],
    results: Mapping[Entity, AlterResult],
    *,
    deadline: float,
    interval_s: float = 0.2,
) -> tuple[BrokerReadBack, ...]:
    """Confirm the applied entities on every broker (the read-back of a
    cluster of several brokers; see :func:`apply_plan`).

    The brokers are listed afresh (DescribeCluster, fenced ones included);
    then each broker, side by side, gets the same strict describes as the
    read-back (one per touched shape), sent to it by node id, until it shows
    every applied entity as planned or ``deadline`` passes. Every broker gets
    at least one try of :data:`MIN_BROKER_TRY_S`, so one that does not answer
    is reported unreachable, never matched. A fenced broker is not read.

    Args:
        deadline: a :func:`time.monotonic` value (the apply's read-back timeout).

    Returns:
        One :class:`BrokerReadBack` per broker, by node id.

    Raises:
        BrokerError: the brokers could not be listed.
    """
    return _read_back_on_brokers(client, pending, results, deadline, interval_s, None)[0]


def _read_back_on_brokers(
    client: BrokerReader,
    pending: Sequence[EntityChange],
    results: Mapping[Entity, AlterResult],
    deadline: float,
    interval_s: float,
    on_progress: Callable[[str, int, int], None] | None,
) -> tuple[tuple[BrokerReadBack, ...], dict[Entity, dict[str, float]] | None]:
    """:func:`confirm_on_brokers`, and the entities as the brokers showed them
    (:func:`_merge`; ``None`` when no broker answered)."""
    brokers = client.brokers(fresh=True, timeout_ms=_left_ms(deadline))
    shapes = _touched(pending)
    expected = _expected(pending, results)
    log.info("apply: reading back on %d brokers", len(brokers))
    with ThreadPoolExecutor(max_workers=len(brokers), thread_name_prefix="read-back") as pool:
        found = list(
            pool.map(
                lambda broker: _confirm_on(client, broker, shapes, expected, deadline, interval_s),
                brokers,
            )
        )
    reports = tuple(report for report, _ in found)
    if on_progress is not None:
        on_progress("read-back on brokers", sum(r.matched for r in reports), len(reports))
    for report in reports:
        log.info("apply: %s %s", report.broker.label(), report.state.value)
    views = [view for _, view in found if view is not None]
    planned = {c.entity: c.after for c in pending}
    return reports, (_merge(views, planned) if views else None)


def _merge(
    views: Sequence[Mapping[Entity, Mapping[str, float]]],
    planned: Mapping[Entity, Mapping[str, float]],
) -> dict[Entity, dict[str, float]]:
    """One view of the planned entities from several brokers' views: where
    the brokers disagree, the first (by node id) that differs from the plan,
    so an entity reads as converged only when every broker that answered
    shows it as planned."""
    merged: dict[Entity, dict[str, float]] = {}
    for entity, after in planned.items():
        seen = [view.get(entity, {}) for view in views]
        differing = [quotas for quotas in seen if not same_quotas(quotas, after)]
        shown = differing[0] if differing else seen[0]
        if shown:
            merged[entity] = dict(shown)
    return merged


def _left_ms(deadline: float) -> int:
    """Milliseconds until ``deadline``, at least :data:`MIN_BROKER_TRY_S`."""
    return int(max(deadline - time.monotonic(), MIN_BROKER_TRY_S) * 1000)


class _OnBroker:
    """A :class:`QuotaReader` whose describes all go to one broker, each
    bounded by what is left until ``deadline`` (at least
    :data:`MIN_BROKER_TRY_S`)."""

    def __init__(self, client: BrokerReader, node_id: int, deadline: float) -> None:
        self._client, self._node_id, self._deadline = client, node_id, deadline
        self.rpc_counts: dict[str, int] = {}

    def describe_client_quotas(
        self, components: list[FilterComponent], *, strict: bool
    ) -> dict[Entity, dict[str, float]]:
        left = max(self._deadline - time.monotonic(), MIN_BROKER_TRY_S)
        return self._client.describe_client_quotas_on(
            self._node_id, components, strict=strict, timeout_ms=int(left * 1000)
        )


def _confirm_on(
    client: BrokerReader,
    broker: BrokerNode,
    shapes: Sequence[Shape],
    expected: Mapping[Entity, Mapping[str, float]],
    deadline: float,
    interval_s: float,
) -> tuple[BrokerReadBack, dict[Entity, dict[str, float]] | None]:
    """Read ``broker`` until it shows ``expected`` or ``deadline`` passes;
    also its last answer (``None``: it never answered)."""
    if broker.fenced:
        return BrokerReadBack(broker, BrokerState.FENCED), None
    reader = _OnBroker(client, broker.node_id, deadline)
    last: dict[Entity, dict[str, float]] | None = None
    while True:
        error: str | None = None
        differing: tuple[Entity, ...] | None = None
        try:
            last = describe_shapes(reader, shapes)
        except Exception as exc:  # no answer: try again until the deadline
            error = error_text(exc) or type(exc).__name__
        else:
            differing = tuple(
                sorted(
                    (e for e, q in expected.items() if not same_quotas(last.get(e, {}), q)),
                    key=Entity.sort_key,
                )
            )
            if not differing:
                return BrokerReadBack(broker, BrokerState.MATCHED), last
        if time.monotonic() >= deadline:
            if differing is None:
                return BrokerReadBack(broker, BrokerState.UNREACHABLE, error=error), last
            return BrokerReadBack(broker, BrokerState.LAGGING, differing), last
        time.sleep(interval_s)


def check_not_stale(plan: Plan, reader: QuotaReader, cluster_id: str) -> None:
    """Refuse a saved ``plan`` unless the cluster is the plan's and the live
    state it was made from still holds.

    A plan that saw the whole cluster (:attr:`Plan.sees_whole_cluster`) is
    judged by everything it recorded: the removed keys' fallbacks and the
    probes were worked out from the entities outside the scope too, so a
    file that invents, edits or leaves out one of them must not pass, and
    neither must a plan whose basis moved. Every shape is described (one
    strict DescribeClientQuotas each) and must equal
    :meth:`Plan.before_entries`. Otherwise one strict describe per touched
    entity shape checks the entities the plan changes.

    Raises:
        PlanFileError: the plan records no cluster id (every KRaft cluster has
            one, so the file was edited) or was made for another cluster id.
        StalePlanError: at least one entity moved (listing each: what the
            plan recorded -> what the cluster holds now).
    """
    if plan.cluster_id is None:
        raise PlanFileError(
            "the saved plan records no cluster id, so it cannot be tied to this cluster: "
            "refusing it; plan again"
        )
    if plan.cluster_id != cluster_id:
        raise PlanFileError(
            f"the plan was made for cluster id {plan.cluster_id!r} "
            f"({plan.cluster!r}); the bootstrap server belongs to {cluster_id!r}: refusing"
        )
    if plan.sees_whole_cluster:
        recorded = dict(plan.before_entries())
        live = describe_shapes(reader, SHAPES)
        candidates = recorded.keys() | live.keys()
    else:
        recorded = {c.entity: c.before for c in plan.pending}
        if not recorded:
            return
        live = describe_shapes(reader, sorted({e.types for e in recorded}))
        candidates = set(recorded)
    moved = [
        EntityChange.between(e, recorded.get(e, {}), live.get(e, {}))
        for e in sorted(candidates, key=Entity.sort_key)
        if not same_quotas(recorded.get(e, {}), live.get(e, {}))
    ]
    if moved:
        raise StalePlanError(moved)
