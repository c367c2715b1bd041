"""The JSON drift report (``drift --output json``): a boundary format, so a
pydantic model; ``schemas/drift.schema.json`` is generated from it.

Values are plain numbers in the quota key's unit (bytes/s, %, mutations/s,
connections/s).
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, Field

from quotaform.formats.base import FROZEN
from quotaform.formats.explain import enforcement_doc
from quotaform.formats.plan import (
    EnforcementField,
    LiveStateRpcs,
    ProbeDocs,
    StorageField,
    probe_doc,
    storage_doc,
)
from quotaform.plan.drift import DRIFT_FORMAT_VERSION, DriftKind, DriftReport
from quotaform.plan.model import EntityChange
from quotaform.words import drift_summary_line

assert DRIFT_FORMAT_VERSION == 1, "update DriftDocument.format_version with the format"

__all__ = ["DriftDocument", "drift_document", "render_drift_json"]


class KeyDriftDoc(BaseModel):
    """One quota key that differs."""

    model_config = FROZEN
    key: str = Field(description="Quota key, e.g. producer_byte_rate.")
    drift: Literal["changed", "missing", "unexpected"] = Field(
        description="changed: both set, values differ; missing: declared, not live; "
        "unexpected: live, not declared."
    )
    declared: float | None = Field(description="Declared value; null when not declared.")
    live: float | None = Field(description="Live value; null when not set on the cluster.")


class EntityDriftDoc(BaseModel):
    """One in-scope entity that differs from the manifests."""

    model_config = FROZEN
    entity: dict[str, str | None] = Field(
        description="Entity type -> entity name; null is the default entity."
    )
    declared: dict[str, float] = Field(description="Declared quotas: quota key -> value.")
    live: dict[str, float] = Field(description="Live quotas: quota key -> value.")
    key_changes: list[KeyDriftDoc] = Field(description="The keys that differ, sorted by key.")
    source: str | None = Field(
        description="path:line of the declaration; null for an unexpected entity."
    )


class UnmanagedDoc(BaseModel):
    """Live entities outside the scope: counted, never listed or touched."""

    model_config = FROZEN
    total: int
    by_shape: dict[str, int] = Field(
        description="Shape (user, client-id, user+client-id, ip) -> count."
    )


class DriftSummaryDoc(BaseModel):
    """Counts by class and the one-line summary."""

    model_config = FROZEN
    changed: int
    missing: int
    unexpected: int
    matching: int = Field(description="In-scope entities equal to their declaration.")
    text: str = Field(description="The summary sentence, e.g. for an alert title.")


class DriftDocument(BaseModel):
    """A quotaform drift report (JSON)."""

    model_config = FROZEN
    format_version: Literal[1] = Field(description="Version of this format.")
    cluster: str = Field(description="The manifests' cluster name.")
    cluster_id: str | None = Field(description="Id of the cluster the live state was read from.")
    in_sync: bool = Field(description="True when nothing in the scope differs.")
    changed: list[EntityDriftDoc] = Field(description="Declared and live, values differ.")
    missing: list[EntityDriftDoc] = Field(description="Declared, not live.")
    unexpected: list[EntityDriftDoc] = Field(description="Live in the scope, not declared.")
    unmanaged: UnmanagedDoc
    summary: DriftSummaryDoc
    warnings: list[str] = Field(description="The manifests' warnings.")
    live_state_rpcs: LiveStateRpcs
    probes: ProbeDocs = Field(
        description="Every declared probe with the keys whose effective quota, source or "
        "quota group differs: before = as the manifests declare, after = as the cluster holds.",
    )
    storage: StorageField = Field(
        description="Storage-aware quotas: the scaling the declared producer_byte_rate "
        "values were compared after (declared = declared x the current factor).",
    )
    scale_pending: list[EntityDriftDoc] = Field(
        default_factory=list,
        description="Entities whose only difference is a scaled producer_byte_rate live at "
        "an earlier factor: a scale still to apply, not drift.",
    )
    enforcement: EnforcementField = Field(
        description="How the brokers enforce quotas: per broker (how many) and by Kafka's "
        "default resolution or a custom quota callback, which makes the probes' resolution "
        "not what they enforce; read when probes are declared, else null.",
    )


def _entity_doc(drift: EntityChange) -> EntityDriftDoc:
    return EntityDriftDoc(
        entity=drift.entity.as_dict(),
        declared=dict(drift.after),
        live=dict(drift.before),
        key_changes=[
            KeyDriftDoc(
                key=kc.key,
                drift=DriftKind.of_key(kc.action).value,
                declared=kc.after,
                live=kc.before,
            )
            for kc in drift.key_changes
        ],
        source=drift.source,
    )


def drift_document(report: DriftReport) -> DriftDocument:
    """The JSON model of ``report``."""
    return DriftDocument(
        format_version=1,
        cluster=report.cluster,
        cluster_id=report.cluster_id,
        in_sync=report.in_sync,
        changed=[_entity_doc(d) for d in report.changed],
        missing=[_entity_doc(d) for d in report.missing],
        unexpected=[_entity_doc(d) for d in report.unexpected],
        unmanaged=UnmanagedDoc(total=report.unmanaged, by_shape=dict(report.unmanaged_by_shape)),
        summary=DriftSummaryDoc(
            changed=len(report.changed),
            missing=len(report.missing),
            unexpected=len(report.unexpected),
            matching=report.matching,
            text=drift_summary_line(report),
        ),
        warnings=list(report.warnings),
        live_state_rpcs=dict(sorted(report.rpc_counts.items())),
        probes=[probe_doc(i, report.enforcement) for i in report.probes],
        storage=storage_doc(report.storage),
        scale_pending=[_entity_doc(d) for d in report.scale_pending],
        enforcement=None if report.enforcement is None else enforcement_doc(report.enforcement),
    )


def render_drift_json(report: DriftReport) -> str:
    """The report as deterministic JSON (2-space indent, trailing newline)."""
    data = drift_document(report).model_dump(mode="json")
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
