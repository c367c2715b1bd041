"""The JSON plan: a boundary format, so it is a pydantic model.

``schemas/plan.schema.json`` is generated from :class:`PlanDocument`
(``python -m quotaform.schemas``). Values are plain numbers in the quota key's
unit (bytes/s, %, mutations/s, connections/s), never the readable strings.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from quotaform.plan import PLAN_FORMAT_VERSION, Plan

assert PLAN_FORMAT_VERSION == 1, "update PlanDocument.format_version with the format"

__all__ = ["PlanDocument", "plan_document", "render_json"]

_FROZEN = ConfigDict(extra="forbid", frozen=True)


class KeyChangeDoc(BaseModel):
    """One quota key's change."""

    model_config = _FROZEN
    key: str = Field(description="Quota key, e.g. producer_byte_rate.")
    action: Literal["add", "change", "remove"]
    before: float | None = Field(description="Live value; null when the key is added.")
    after: float | None = Field(description="Declared value; null when the key is removed.")
    fallback: str | None = Field(
        default=None,
        description="For a removed key: what its clients get instead (a less specific "
        "entity's value, or unlimited), following Kafka's quota resolution order.",
    )


class ChangeDoc(BaseModel):
    """One entity's change."""

    model_config = _FROZEN
    entity: dict[str, str | None] = Field(
        description="Entity type -> entity name; null is the default entity."
    )
    action: Literal["create", "update", "delete", "no-op"]
    before: dict[str, float] = Field(description="Live quotas: quota key -> quota value.")
    after: dict[str, float] = Field(description="Declared quotas: quota key -> quota value.")
    key_changes: list[KeyChangeDoc] = Field(description="The keys that differ, sorted by key.")
    source: str | None = Field(
        default=None, description="path:line of the declaration; null for a delete."
    )


class ViolationDoc(BaseModel):
    """A guard-rail violation: apply refuses the plan."""

    model_config = _FROZEN
    kind: str = Field(description="protected, prevent-destroy, mass-delete, ...")
    entity: dict[str, str | None] | None
    key: str | None
    message: str
    allow_flag: str | None = Field(description="The flag that allows it; null: none does.")


class SummaryDoc(BaseModel):
    """Counts of entity changes by action."""

    model_config = _FROZEN
    create: int
    update: int
    delete: int
    no_op: int = Field(alias="no-op")


class PlanDocument(BaseModel):
    """A quotaform plan (JSON)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    format_version: Literal[1] = Field(description="Version of this format.")
    cluster: str = Field(description="The manifests' cluster name.")
    cluster_id: str | None = Field(description="Id of the cluster the live state was read from.")
    deletes_allowed: bool
    changes: list[ChangeDoc] = Field(description="Every in-scope entity, sorted by entity.")
    summary: SummaryDoc
    unmanaged: int = Field(description="Live entities outside the scope, left alone.")
    warnings: list[str]
    violations: list[ViolationDoc] = Field(
        default_factory=list, description="Guard-rail violations; apply refuses when any."
    )
    live_state_rpcs: dict[str, int] = Field(
        description="RPCs made to read the live state, by API name."
    )


def plan_document(plan: Plan) -> PlanDocument:
    """The JSON model of ``plan``."""
    summary = plan.summary
    return PlanDocument(
        format_version=1,
        cluster=plan.cluster,
        cluster_id=plan.cluster_id,
        deletes_allowed=plan.deletes_allowed,
        changes=[
            ChangeDoc(
                entity=c.entity.as_dict(),
                action=c.action.value,
                before=dict(sorted(c.before.items())),
                after=dict(sorted(c.after.items())),
                key_changes=[
                    KeyChangeDoc(
                        key=k.key,
                        action=k.action.value,
                        before=k.before,
                        after=k.after,
                        fallback=(
                            str(plan.fallbacks[(c.entity, k.key)])
                            if (c.entity, k.key) in plan.fallbacks
                            else None
                        ),
                    )
                    for k in c.key_changes
                ],
                source=c.source,
            )
            for c in plan.changes
        ],
        summary=SummaryDoc.model_validate(
            {
                "create": summary.create,
                "update": summary.update,
                "delete": summary.delete,
                "no-op": summary.no_op,
            }
        ),
        unmanaged=plan.unmanaged,
        warnings=list(plan.warnings),
        violations=[ViolationDoc.model_validate(v.as_dict()) for v in plan.violations],
        live_state_rpcs=dict(sorted(plan.rpc_counts.items())),
    )


def render_json(plan: Plan) -> str:
    """The plan as deterministic JSON (2-space indent, trailing newline)."""
    data = plan_document(plan).model_dump(mode="json", by_alias=True)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
