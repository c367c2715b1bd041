"""The JSON apply result (``apply --output json``); ``schemas/apply.schema.json``
is generated from :class:`ApplyDocument`.

One document per apply, whatever happened: the plan it applied (or would have:
``plan``, the plan document of ``schemas/plan.schema.json``), the ``status``,
and one entry per entity the plan changed, each with its outcome: ``applied``
(the broker said so), ``failed`` (with the broker's error), ``unknown`` (no
answer: it may or may not have committed), ``not-applied`` (stopped before the
real alter: the validate_only pre-check). A plan that was refused, cancelled
or stale has no entity entries and says why in ``error``. On a cluster of
several brokers, ``brokers`` says what the read-back found on each one.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from quotaform.formats.base import FROZEN
from quotaform.formats.plan import PlanDocument, plan_document
from quotaform.plan.model import Plan
from quotaform.plan.outcome import (
    APPLY_FORMAT_VERSION,
    ApplyResult,
    ApplyStatus,
    BrokerReadBack,
    EntityOutcome,
)
from quotaform.plan.review import PlanReview

assert APPLY_FORMAT_VERSION == 1, "update ApplyDocument.format_version with the format"

__all__ = ["ApplyDocument", "apply_document", "render_apply_json"]


class EntityResultDoc(BaseModel):
    """What happened to one entity."""

    model_config = FROZEN
    entity: dict[str, str | None] = Field(
        description="Entity type -> entity name; null is the default entity."
    )
    action: Literal["create", "update", "delete", "no-op"]
    outcome: Literal["applied", "failed", "unknown", "not-applied"] = Field(
        description="applied: the broker confirmed it; failed: the broker refused it "
        "(message); unknown: no answer, it may or may not have committed; not-applied: "
        "never sent for real (the validate_only pre-check failed)."
    )
    message: str | None = Field(description="The broker's error, code and message, if any.")
    converged: bool = Field(description="The read-back shows the planned quotas.")
    live_after: dict[str, float] | None = Field(
        default=None, description="The quotas read back; null when not read."
    )


class BrokerReadBackDoc(BaseModel):
    """What the read-back found on one broker (a cluster of several)."""

    model_config = FROZEN
    node_id: int = Field(description="The broker's node id.")
    address: str = Field(description="host:port as DescribeCluster lists it.")
    fenced: bool = Field(description="DescribeCluster lists it fenced (it serves no clients).")
    state: Literal["matched", "lagging", "unreachable", "fenced"] = Field(
        description="matched: it shows every applied entity as planned; lagging: it "
        "answered but still showed some otherwise at the deadline (its copy of the "
        "metadata log lags); unreachable: its last describe got no answer within "
        "--readback-timeout (down, hung, shutting down, or too slow); fenced: not "
        "read (a fenced broker cannot be reached)."
    )
    differing: list[dict[str, str | None]] = Field(
        description="lagging: the applied entities it did not show as planned, sorted "
        "(entity type -> name, null the default entity); empty otherwise."
    )
    error: str | None = Field(description="unreachable: why its last describe failed.")


class CountsDoc(BaseModel):
    """Entities by outcome."""

    model_config = ConfigDict(**FROZEN, populate_by_name=True)
    applied: int
    failed: int
    unknown: int
    not_applied: int = Field(alias="not-applied")


class ApplyDocument(BaseModel):
    """A quotaform apply result (JSON)."""

    model_config = FROZEN
    format_version: Literal[1] = Field(description="Version of this format.")
    status: Literal[
        "nothing-to-do",
        "applied",
        "rejected",
        "nothing-applied",
        "partial",
        "not-converged",
        "refused",
        "cancelled",
        "stale",
    ] = Field(
        description="nothing-to-do: the plan has no changes (exit 0); applied: every "
        "entity applied and read back (exit 0); rejected: the validate_only pre-check "
        "refused entities, nothing applied (exit 1); nothing-applied: the connection was "
        "lost before any real alter was sent (exit 1); partial: some entities failed, are "
        "unknown or were not sent (exit 3); not-converged: every entity applied, but the "
        "read-back differs (through the connection or on some broker) or could not be "
        "made (exit 4); refused: the guard rails "
        "refused the plan, nothing sent (exit 1, error and plan.violations say why); "
        "cancelled: not approved, nothing sent (exit 1); stale: the saved plan's "
        "entities changed on the cluster since it was made, nothing sent (exit 5)."
    )
    plan: PlanDocument = Field(description="The plan applied, or that would have been.")
    entities: list[EntityResultDoc] = Field(description="One per pending change, sorted by entity.")
    counts: CountsDoc
    rpc_counts: dict[str, int] = Field(description="RPCs made by the apply, by API name.")
    readback_seconds: float = Field(description="Time spent waiting for the read-back.")
    readback_error: str | None = Field(
        default=None,
        description="Why the read-back could not be made; null when it was. Entities "
        "the broker confirmed stay applied; run plan once the cluster answers again.",
    )
    brokers: list[BrokerReadBackDoc] = Field(
        default_factory=list,
        description="On a cluster of several brokers, the read-back on each one, by node "
        "id: the same strict describes sent to every broker, within --readback-timeout. "
        "Any broker not matched makes an apply whose entities were all applied "
        "not-converged (exit 4). Empty with one broker (the read-back through the "
        "connection is that broker's) and when nothing was read back.",
    )
    error: str | None = Field(
        default=None,
        description="Why nothing was applied (statuses nothing-applied, refused, "
        "cancelled, stale); null otherwise.",
    )
    lock_error: str | None = Field(
        default=None,
        description="Why the cluster's apply lock could not be released at the end (it is "
        "still held and blocks the next apply: run quotaform unlock); null when it was "
        "released or not taken. An apply that would exit 0 exits 6 then.",
    )


def apply_document(
    plan: Plan,
    review: PlanReview,
    result: ApplyResult | None = None,
    *,
    status: ApplyStatus | None = None,
    error: str | None = None,
    lock_error: str | None = None,
) -> ApplyDocument:
    """The JSON model of one apply: ``plan`` and its ``review``, and ``result``
    once :func:`~quotaform.cluster.apply.apply_plan` ran; before that (nothing
    to do, refused, cancelled, stale) ``status`` and ``error`` say why nothing
    was sent. ``lock_error``: why the apply lock could not be released.

    Raises:
        ValueError: neither ``result`` nor ``status`` is given.
    """
    if result is None:
        if status is None:
            raise ValueError("apply_document needs a result or a status")
        return ApplyDocument(
            format_version=1,
            status=status.value,
            plan=plan_document(plan, review),
            entities=[],
            counts=CountsDoc.model_validate({o.value: 0 for o in EntityOutcome}),
            rpc_counts={},
            readback_seconds=0.0,
            error=error,
            lock_error=lock_error,
        )
    return ApplyDocument(
        format_version=1,
        status=result.status.value,
        plan=plan_document(plan, review),
        entities=[
            EntityResultDoc(
                entity=r.change.entity.as_dict(),
                action=r.change.action.value,
                outcome=r.outcome.value,
                message=r.message,
                converged=r.converged,
                live_after=dict(sorted(r.live_after.items())) if r.live_after is not None else None,
            )
            for r in result.entities
        ],
        counts=CountsDoc.model_validate(
            {o.value: len(result.by_outcome(o)) for o in EntityOutcome}
        ),
        rpc_counts=dict(result.rpc_counts),
        readback_seconds=round(result.readback_seconds, 3),
        readback_error=result.readback_error,
        error=result.error,
        lock_error=lock_error,
        brokers=[_broker_doc(b) for b in result.brokers],
    )


def _broker_doc(found: BrokerReadBack) -> BrokerReadBackDoc:
    return BrokerReadBackDoc(
        node_id=found.broker.node_id,
        address=found.broker.address,
        fenced=found.broker.fenced,
        state=found.state.value,
        differing=[e.as_dict() for e in found.differing],
        error=found.error,
    )


def render_apply_json(document: ApplyDocument) -> str:
    """``document`` as deterministic JSON (2-space indent, UTF-8 text, trailing
    newline), written by pydantic-core (the text of :func:`json.dumps` but
    for negative exponents: ``1e-7``)."""
    return document.model_dump_json(indent=2, by_alias=True) + "\n"
