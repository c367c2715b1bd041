"""The JSON plan: a boundary format, so a pydantic model.

``schemas/plan.schema.json`` is generated from :class:`PlanDocument`. Values
are plain numbers in the quota key's unit (bytes/s, %, mutations/s,
connections/s), never the readable strings. The document carries the plan and
its review: each verdict both as data (``fallback_to``, the violation's
numbers) and worded (``fallback``, ``message``), so a saved plan decodes back
to the same :class:`~quotaform.plan.model.Plan` and
:class:`~quotaform.plan.review.PlanReview` (:func:`plan_from_document`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat
from pydantic_core import to_json

from quotaform.formats.base import FROZEN
from quotaform.formats.explain import (
    EnforcementDoc,
    KeyDoc,
    enforcement_doc,
    enforcement_from_doc,
    key_doc,
    key_explanation_from_doc,
    moves_doc,
    principal_doc,
    principal_from_doc,
)
from quotaform.kafka.entity import Entity
from quotaform.kafka.removals import Fallback
from quotaform.plan.enforcement import QuotaEnforcement
from quotaform.plan.explain import ChangedKey, ProbeImpact
from quotaform.plan.guards import GuardKind, Violation
from quotaform.plan.model import (
    PLAN_FORMAT_VERSION,
    EntityChange,
    KeyChange,
    Plan,
)
from quotaform.plan.review import PlanReview
from quotaform.plan.state import ChangeBudget, Probe, SourceLocation
from quotaform.plan.storage_types import ScaledKey, StorageScaling, StorageState
from quotaform.words import (
    allow_flag,
    fallback_text,
    missing_permissions,
    violation_message,
)

assert PLAN_FORMAT_VERSION == 1, "update PlanDocument.format_version with the format"

__all__ = [
    "PlanDocument",
    "ProbeDoc",
    "plan_data",
    "plan_document",
    "plan_from_document",
    "probe_doc",
    "render_json",
]


EntityDoc = dict[str, str | None]


#: RPCs made to read the live state, by API name (plan and drift documents).
LiveStateRpcs = Annotated[
    dict[str, int], Field(description="RPCs made to read the live state, by API name.")
]


class FallbackDoc(BaseModel):
    """What clients of a removed key get instead, following Kafka's resolution order."""

    model_config = FROZEN
    entity: EntityDoc | None = Field(
        description="The entity whose value applies instead; null: unlimited."
    )
    value: float | None = Field(
        description="Its value; null when unlimited or unknown (the entity is outside "
        "the manifests' scope)."
    )
    varies_by: str | None = Field(
        default=None,
        description="An entity type (client-id) when the answer holds only for names of "
        "that type without a quota of their own.",
    )


class KeyChangeDoc(BaseModel):
    """One quota key's change."""

    model_config = FROZEN
    key: str = Field(description="Quota key, e.g. producer_byte_rate.")
    action: Literal["add", "change", "remove"]
    before: StrictFloat | None = Field(description="Live value; null when the key is added.")
    after: StrictFloat | None = Field(description="Declared value; null when the key is removed.")
    fallback: str | None = Field(
        default=None,
        description="For a removed key: what its clients get instead (a less specific "
        "entity's value, or unlimited), following Kafka's quota resolution order.",
    )
    fallback_to: FallbackDoc | None = Field(
        default=None, description="The same as data; null unless the key is removed."
    )


class ChangeDoc(BaseModel):
    """One entity's change."""

    model_config = FROZEN
    entity: EntityDoc = Field(description="Entity type -> entity name; null is the default entity.")
    action: Literal["create", "update", "delete", "no-op"]
    before: dict[str, StrictFloat] = Field(description="Live quotas: quota key -> quota value.")
    after: dict[str, StrictFloat] = Field(description="Declared quotas: quota key -> quota value.")
    key_changes: list[KeyChangeDoc] = Field(description="The keys that differ, sorted by key.")
    source: str | None = Field(
        default=None, description="path:line of the declaration; null for a delete."
    )


class ViolationDoc(BaseModel):
    """A guard-rail violation: apply refuses the plan."""

    model_config = FROZEN
    kind: Literal[
        "delete", "protected", "prevent-destroy", "mass-delete", "default-removal", "relax"
    ] = Field(description="Which rule is broken (delete: deletes are not allowed).")
    entity: EntityDoc | None
    key: str | None
    message: str
    allow_flag: str | None = Field(description="The flag that allows it; null: none does.")
    before: float | None = Field(default=None, description="The quota value before the plan.")
    after: float | None = Field(default=None, description="The changed value (relax).")
    fallback_to: FallbackDoc | None = Field(
        default=None, description="For a removed key: what applies instead."
    )
    limit: float | None = Field(default=None, description="The budget's limit exceeded.")
    limit_name: str | None = Field(
        default=None, description="maxDeletes, maxDeleteFraction or maxRelaxFactor."
    )
    deletes: int | None = Field(default=None, description="Entities the plan deletes.")
    live: int | None = Field(default=None, description="Live in-scope entities.")
    declared_at: str | None = Field(default=None, description="Where a protection is declared.")
    removed_keys: list[str] = Field(
        default_factory=list, description="The keys a deleted default entity had."
    )


class OutsideDoc(BaseModel):
    """A live entity outside the scope: left alone, but part of every client's resolution."""

    model_config = FROZEN
    entity: EntityDoc
    quotas: dict[str, StrictFloat]


class ProbeKeyDoc(BaseModel):
    """One quota key of a probe the plan affects: before and after, and what moved."""

    model_config = FROZEN
    before: KeyDoc
    after: KeyDoc
    value_changed: bool
    source_changed: bool
    group_changed: bool = Field(description="The quota group (metric tags) moves.")


class ProbeDoc(BaseModel):
    """A declared probe (spec.probes) and what the plan does to it."""

    model_config = FROZEN
    principal: dict[str, str | None] = Field(
        description='{"user": U, "client-id": C} (null: not given) or {"ip": A}.'
    )
    source: str = Field(description="path:line of the probe's declaration.")
    affected: bool
    keys: dict[str, ProbeKeyDoc] = Field(description="Only the keys that move.")
    resolution_enforced: bool | None = Field(
        default=None,
        description="Whether the brokers enforce the resolution shown for this principal: "
        "false when a custom quota callback decides its quotas instead (see the document's "
        "enforcement); null when not known.",
    )


class SummaryDoc(BaseModel):
    """Counts of entity changes by action."""

    model_config = ConfigDict(**FROZEN, populate_by_name=True)
    create: int
    update: int
    delete: int
    no_op: int = Field(alias="no-op")


class ScaledKeyDoc(BaseModel):
    """One entity's producer_byte_rate under the storage policy (bytes/s)."""

    model_config = FROZEN
    entity: dict[str, str | None]
    declared: float = Field(description="The manifests' value, bytes/s.")
    written: float = Field(description="What the plan writes: declared x factor, bytes/s.")
    source: str | None = None


class StorageDoc(BaseModel):
    """What the storage policy (spec.storagePolicy) did to the declared values."""

    model_config = FROZEN
    state: Literal["OPEN", "THROTTLE", "PAUSE"]
    factor: float = Field(ge=0, le=1, description="The factor written (a multiple of the step).")
    computed_factor: float = Field(description="The volumes' own factor, before the step.")
    held: bool = Field(description="The live factor was kept (within one hysteresis step).")
    reason: str | None = Field(description="Which broker and volume decide.")
    snapshot_ages: dict[str, float | None] = Field(
        description="Broker id -> age of its volume snapshot in seconds (null: none)."
    )
    lack_of_data: bool = Field(description="onUnknown decided the state.")
    step: float
    pause_rate: float = Field(description="bytes/s written under PAUSE.")
    evaluated_at: datetime | None = None
    scaled: list[ScaledKeyDoc]
    exempt: list[dict[str, str | None]] = Field(default_factory=list)
    volumes_judged: bool = Field(
        default=True,
        description="Some volume was judged; false when every broker was unknown "
        "(computed_factor is then onUnknown's, not the volumes').",
    )


#: Fields the plan and drift documents share, each document giving its own
#: description: the declared probes' impacts, the storage scaling and the
#: brokers' enforcement.
ProbeDocs = Annotated[list[ProbeDoc], Field(default_factory=list)]
StorageField = Annotated[StorageDoc | None, Field(default=None)]
EnforcementField = Annotated[EnforcementDoc | None, Field(default=None)]


class PlanDocument(BaseModel):
    """A quotaform plan (JSON)."""

    model_config = ConfigDict(**FROZEN, populate_by_name=True)
    format_version: Literal[1] = Field(description="Version of this format.")
    cluster: str = Field(description="The manifests' cluster name.")
    cluster_id: str | None = Field(description="Id of the cluster the live state was read from.")
    deletes_allowed: bool
    changes: list[ChangeDoc] = Field(description="Every in-scope entity, sorted by entity.")
    summary: SummaryDoc
    unmanaged: int = Field(description="Live entities outside the scope, left alone.")
    warnings: list[str] = Field(
        description="Warnings, each 'path:line: field: message' where a declaration is "
        "concerned: the manifests' (e.g. a user name that is probably not the principal "
        "meant, an entry that never applies) and, once connected, a user quota naming no "
        "SCRAM user of the cluster or a default user quota that would throttle a super user."
    )
    violations: list[ViolationDoc] = Field(
        default_factory=list, description="Guard-rail violations; apply refuses when any."
    )
    refused: bool = Field(
        default=False,
        description="Apply refuses this plan as it stands (some violation); plan then "
        "exits 1 and saves no plan file.",
    )
    allow_flags: list[str] = Field(
        default_factory=list,
        description="Every flag that would allow the violations, all at once (e.g. "
        "--allow-deletes); a protection has none and must be lifted in the manifests.",
    )
    live_state_rpcs: LiveStateRpcs
    probes: ProbeDocs = Field(
        description="Every declared probe with the keys whose effective quota, source or "
        "quota group the plan changes.",
    )
    unmanaged_by_shape: dict[str, int] = Field(
        default_factory=dict,
        description="Live entities outside the scope per entity shape (every shape that "
        "was described).",
    )
    outside_scope: list[OutsideDoc] = Field(
        default_factory=list,
        description="The live entities outside the scope with their quotas: never changed, "
        "kept so the plan can be explained (explain --plan).",
    )
    storage: StorageField = Field(
        description="Storage-aware quotas: the state, factor and snapshot ages the plan's "
        "producer_byte_rate values were scaled by; null without a storage policy.",
    )
    enforcement: EnforcementField = Field(
        description="How the brokers enforce quotas: per broker (how many) and by Kafka's "
        "default resolution or a custom quota callback, which makes the probes' and "
        "fallbacks' resolution not what they enforce; null when not read.",
    )


def _fallback_data(fallback: Fallback | None) -> dict[str, Any] | None:
    if fallback is None:
        return None
    return {
        "entity": fallback.entity.as_dict() if fallback.entity is not None else None,
        "value": fallback.value,
        "varies_by": fallback.varies_by,
    }


def _violation_data(v: Violation) -> dict[str, Any]:
    return {
        "kind": v.kind.value,
        "entity": v.entity.as_dict() if v.entity is not None else None,
        "key": v.key,
        "message": violation_message(v),
        "allow_flag": allow_flag(v.kind),
        "before": v.before,
        "after": v.after,
        "fallback_to": _fallback_data(v.fallback),
        "limit": v.limit,
        "limit_name": v.limit_name,
        "deletes": v.deletes,
        "live": v.live,
        "declared_at": v.declared_at,
        "removed_keys": list(v.removed_keys),
    }


def _dumped(model: BaseModel | None) -> dict[str, Any] | None:
    return None if model is None else model.model_dump(mode="json")


def _floats(quotas: Mapping[str, float]) -> dict[str, float]:
    return {k: float(v) for k, v in sorted(quotas.items())}


def plan_data(plan: Plan, review: PlanReview) -> dict[str, Any]:
    """The JSON document of ``plan`` and its ``review`` as plain data: exactly
    ``plan_document(plan, review).model_dump(mode="json", by_alias=True)``
    (the :class:`PlanDocument` model is the schema and checks this shape in
    the tests), built without a model instance per entity, which is what
    kept ``plan -o json`` of 10,000 entities at twice ``json.dumps``
    (benchmarks/README.md)."""
    summary = plan.summary
    fallbacks = review.fallbacks

    def key_data(change: EntityChange, k: KeyChange) -> dict[str, Any]:
        fallback = fallbacks.get((change.entity, k.key)) if fallbacks else None
        return {
            "key": k.key,
            "action": k.action.value,
            "before": None if k.before is None else float(k.before),
            "after": None if k.after is None else float(k.after),
            "fallback": fallback_text(fallback) if fallback is not None else None,
            "fallback_to": _fallback_data(fallback),
        }

    return {
        "format_version": 1,
        "cluster": plan.cluster,
        "cluster_id": plan.cluster_id,
        "deletes_allowed": review.deletes_allowed,
        "changes": [
            {
                "entity": c.entity.as_dict(),
                "action": c.action.value,
                "before": _floats(c.before),
                "after": _floats(c.after),
                "key_changes": [key_data(c, k) for k in c.key_changes],
                "source": c.source,
            }
            for c in plan.changes
        ],
        "summary": {
            "create": summary.create,
            "update": summary.update,
            "delete": summary.delete,
            "no-op": summary.no_op,
        },
        "unmanaged": plan.unmanaged,
        "warnings": list(plan.warnings),
        "violations": [_violation_data(v) for v in review.violations],
        "refused": review.refused,
        "allow_flags": missing_permissions(review.violations),
        "live_state_rpcs": dict(sorted(plan.rpc_counts.items())),
        "probes": [probe_doc(i, plan.enforcement).model_dump(mode="json") for i in review.probes],
        "unmanaged_by_shape": dict(plan.unmanaged_by_shape),
        "outside_scope": [
            {"entity": e.as_dict(), "quotas": _floats(q)}
            for e, q in sorted(plan.outside.items(), key=lambda p: p[0].sort_key())
        ],
        "storage": _dumped(storage_doc(plan.storage)),
        "enforcement": _dumped(
            None if plan.enforcement is None else enforcement_doc(plan.enforcement)
        ),
    }


def plan_document(plan: Plan, review: PlanReview) -> PlanDocument:
    """The JSON model of ``plan`` and its ``review`` (:func:`plan_data`, validated)."""
    return PlanDocument.model_validate(plan_data(plan, review))


def storage_doc(scaling: StorageScaling | None) -> StorageDoc | None:
    """The JSON model of a storage scaling (``None`` passes through)."""
    if scaling is None:
        return None
    return StorageDoc(
        state=scaling.state.value,
        factor=scaling.factor,
        computed_factor=round(scaling.computed, 6),
        held=scaling.held,
        reason=scaling.reason,
        snapshot_ages={b: None if a is None else round(a, 3) for b, a in scaling.ages.items()},
        lack_of_data=scaling.lack_of_data,
        step=scaling.step,
        pause_rate=scaling.pause_rate,
        evaluated_at=scaling.evaluated_at,
        scaled=[
            ScaledKeyDoc(
                entity=k.entity.as_dict(), declared=k.declared, written=k.written, source=k.source
            )
            for k in scaling.scaled
        ],
        exempt=[e.as_dict() for e in scaling.exempt],
        volumes_judged=scaling.judged,
    )


def _storage(doc: StorageDoc | None) -> StorageScaling | None:
    if doc is None:
        return None
    return StorageScaling(
        state=StorageState(doc.state),
        factor=doc.factor,
        computed=doc.computed_factor,
        held=doc.held,
        reason=doc.reason,
        ages=dict(doc.snapshot_ages),
        lack_of_data=doc.lack_of_data,
        scaled=tuple(
            ScaledKey(Entity.from_mapping(k.entity), k.declared, k.written, k.source)
            for k in doc.scaled
        ),
        exempt=tuple(Entity.from_mapping(e) for e in doc.exempt),
        step=doc.step,
        pause_rate=doc.pause_rate,
        evaluated_at=doc.evaluated_at,
        judged=doc.volumes_judged,
    )


def probe_doc(impact: ProbeImpact, enforcement: QuotaEnforcement | None = None) -> ProbeDoc:
    """The JSON model of one probe's impact (``enforcement``: how the brokers
    enforce it, when known)."""
    source = impact.probe.source
    principal = impact.probe.principal
    return ProbeDoc(
        principal=principal_doc(principal),
        source=f"{source.path}:{source.line}",
        affected=impact.affected,
        keys={
            c.key: ProbeKeyDoc(
                before=key_doc(c.before, enforcement),
                after=key_doc(c.after, enforcement),
                **moves_doc(c).model_dump(),
            )
            for c in impact.keys
        },
        resolution_enforced=(
            None if enforcement is None else enforcement.enforced_for_principal(principal)
        ),
    )


def _probe(doc: ProbeDoc) -> ProbeImpact:
    path, _, line = doc.source.rpartition(":")
    keys = tuple(
        ChangedKey(
            key,
            key_explanation_from_doc(key, k.before),
            key_explanation_from_doc(key, k.after),
        )
        for key, k in doc.keys.items()
    )
    probe = Probe(principal_from_doc(doc.principal), SourceLocation(path, int(line or 1)))
    return ProbeImpact(probe, keys)


def render_json(plan: Plan, review: PlanReview) -> str:
    """The plan and its review as deterministic JSON (2-space indent, UTF-8
    text rather than ``\\u`` escapes, trailing newline): :func:`plan_data`
    written by pydantic-core's serializer, the same text as
    ``json.dumps(..., indent=2, ensure_ascii=False)`` but for the spelling of
    negative exponents (``1e-7``, not ``1e-07``), parsed to the same number."""
    return to_json(plan_data(plan, review), indent=2).decode() + "\n"


# ----------------------------------------------------------------- decoding


def _fallback(key: str, doc: FallbackDoc | None) -> Fallback | None:
    if doc is None:
        return None
    entity = Entity.from_mapping(doc.entity) if doc.entity is not None else None
    return Fallback(key, entity, doc.value, doc.varies_by)


def _violation(doc: ViolationDoc) -> Violation:
    return Violation(
        GuardKind(doc.kind),
        Entity.from_mapping(doc.entity) if doc.entity is not None else None,
        doc.key,
        before=doc.before,
        after=doc.after,
        fallback=_fallback(doc.key or "", doc.fallback_to),
        limit=doc.limit,
        limit_name=doc.limit_name,
        deletes=doc.deletes,
        live=doc.live,
        declared_at=doc.declared_at,
        removed_keys=tuple(doc.removed_keys),
    )


def plan_from_document(doc: PlanDocument) -> tuple[Plan, PlanReview]:
    """The plan and the review a document was made from (the review's budget
    holds only what the document records: whether deletes were allowed).
    Each change's action and key changes are derived from its ``before`` and
    ``after`` (:meth:`EntityChange.between`), not read from the document."""
    # Derived from before/after, never taken from the recorded key_changes:
    # what apply sends is what a reviewer saw (the saved-plan loader refuses
    # a file whose key_changes say otherwise).
    changes = tuple(
        EntityChange.between(Entity.from_mapping(c.entity), c.before, c.after, source=c.source)
        for c in doc.changes
    )
    plan = Plan(
        cluster=doc.cluster,
        cluster_id=doc.cluster_id,
        changes=changes,
        unmanaged=doc.unmanaged,
        unmanaged_by_shape=dict(doc.unmanaged_by_shape),
        rpc_counts=dict(doc.live_state_rpcs),
        warnings=tuple(doc.warnings),
        outside={Entity.from_mapping(o.entity): dict(o.quotas) for o in doc.outside_scope},
        storage=_storage(doc.storage),
        enforcement=None if doc.enforcement is None else enforcement_from_doc(doc.enforcement),
    )
    fallbacks = {
        (Entity.from_mapping(c.entity), k.key): fallback
        for c in doc.changes
        for k in c.key_changes
        if (fallback := _fallback(k.key, k.fallback_to)) is not None
    }
    review = PlanReview(
        budget=ChangeBudget(allow_deletes=doc.deletes_allowed),
        fallbacks=fallbacks,
        violations=tuple(_violation(v) for v in doc.violations),
        probes=tuple(_probe(p) for p in doc.probes),
    )
    return plan, review
