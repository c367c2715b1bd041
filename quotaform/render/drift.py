"""Renderings of one :class:`~quotaform.drift.DriftReport`: rich text for a cron
log, markdown for a ticket, JSON for alerting.

Text and markdown show values in readable units
(:func:`~quotaform.units.format_quota_value`); JSON carries plain numbers in the
quota key's unit (bytes/s, %, mutations/s, connections/s). Entities appear in
:meth:`~quotaform.entity.Entity.sort_key` order, quota keys sorted.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from rich.text import Text

from quotaform.drift import DRIFT_FORMAT_VERSION, DriftKind, DriftReport, EntityDrift
from quotaform.render.text import entity_label
from quotaform.units import format_quota_value

assert DRIFT_FORMAT_VERSION == 1, "update DriftDocument.format_version with the format"

__all__ = [
    "DriftDocument",
    "drift_document",
    "drift_json_schema",
    "drift_summary_line",
    "render_drift_json",
    "render_drift_markdown",
    "render_drift_text",
]

_TITLE = {
    DriftKind.CHANGED: ("Changed", "declared and live, values differ"),
    DriftKind.MISSING: ("Missing", "declared, not live"),
    DriftKind.UNEXPECTED: ("Unexpected", "live in the scope, not declared by any manifest"),
}
_STYLE = {
    DriftKind.CHANGED: "yellow",
    DriftKind.MISSING: "bold red",
    DriftKind.UNEXPECTED: "magenta",
}
_NOT_SET = "(not set)"


def _entities(n: int) -> str:
    return f"{n} entit{'y' if n == 1 else 'ies'}"


def _value(key: str, value: float | None) -> str:
    return _NOT_SET if value is None else format_quota_value(key, value)


def drift_summary_line(report: DriftReport) -> str:
    """``Drift: 1 changed, 2 missing, 0 unexpected (3 unmanaged entities outside
    the scope left alone).`` or ``No drift: the cluster matches the manifests
    (18 entities in scope).``"""
    if report.in_sync:
        return (
            f"No drift: the cluster matches the manifests ({_entities(report.in_scope)} in scope)."
        )
    unmanaged = report.unmanaged.total
    return (
        f"Drift: {len(report.changed)} changed, {len(report.missing)} missing, "
        f"{len(report.unexpected)} unexpected ({unmanaged} unmanaged "
        f"{'entity' if unmanaged == 1 else 'entities'} outside the scope left alone)."
    )


def _where(report: DriftReport) -> str:
    return f'cluster "{report.cluster}"' + (
        f" (id {report.cluster_id})" if report.cluster_id else ""
    )


def _footer(report: DriftReport) -> str:
    rpcs = ", ".join(f"{n} {api}" for api, n in sorted(report.rpc_counts.items())) or "no RPCs"
    return (
        f"{_entities(report.matching)} in scope in sync; read-only check, nothing was changed; "
        f"live state read with {rpcs}."
    )


def _key_lines(drift: EntityDrift) -> list[str]:
    """One line per differing key: ``producer_byte_rate: declared 1MiB, live 4KiB``."""
    return [
        f"{kc.key}: declared {_value(kc.key, kc.after)}, live {_value(kc.key, kc.before)}"
        for kc in drift.key_changes
    ]


def _unmanaged_detail(report: DriftReport) -> str:
    shapes = [f"{shape} {n}" for shape, n in report.unmanaged.by_shape.items() if n]
    return ", ".join(shapes)


def render_drift_text(report: DriftReport) -> Text:
    """The report as rich ``Text``: print it with a ``Console`` (colour on a
    TTY) or take ``.plain``. Sections Changed / Missing / Unexpected appear when
    not empty, Unmanaged when anything lies outside the scope; then the summary
    line and a footer."""
    out = Text()
    out.append(f"Drift check of {_where(report)}:\n\n", style="bold")
    for kind in DriftKind:
        drifts = report.of_kind(kind)
        if not drifts:
            continue
        title, meaning = _TITLE[kind]
        out.append(f"{title} ({len(drifts)}): {meaning}\n", style=f"bold {_STYLE[kind]}")
        for drift in drifts:
            out.append(f"  {entity_label(drift.entity)}", style=_STYLE[kind])
            if drift.source:
                out.append(f"  ({drift.source})", style="dim")
            out.append("\n")
            for line in _key_lines(drift):
                out.append(f"      {line}\n")
        out.append("\n")
    if report.unmanaged.total:
        out.append(
            f"Unmanaged ({report.unmanaged.total}): live outside the scope, left alone\n",
            style="bold",
        )
        detail = _unmanaged_detail(report)
        if detail:
            out.append(f"  {detail}\n", style="dim")
        out.append("\n")
    for warning in report.warnings:
        out.append(f"Warning: {warning}\n", style="bold yellow")
    if report.warnings:
        out.append("\n")
    out.append(drift_summary_line(report) + "\n", style="bold" if report.in_sync else "bold red")
    out.append(_footer(report) + "\n", style="dim")
    return out


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_drift_markdown(report: DriftReport) -> str:
    """The report as GitHub-flavoured markdown, e.g. for a ticket: one table per
    non-empty class (entity, quota key, declared, live) and the unmanaged
    count per shape."""
    lines = [f"### quotaform drift: `{report.cluster}`", ""]
    if report.cluster_id:
        lines += [f"Cluster id `{report.cluster_id}`", ""]
    lines += [f"**{drift_summary_line(report)}**", ""]
    for warning in report.warnings:
        lines += [f"> **Warning:** {_md_cell(warning)}", ""]
    for kind in DriftKind:
        drifts = report.of_kind(kind)
        if not drifts:
            continue
        title, meaning = _TITLE[kind]
        lines += [
            f"#### {title} ({len(drifts)})",
            "",
            f"{meaning[0].upper()}{meaning[1:]}.",
            "",
            "| Entity | Quota key | Declared | Live |",
            "|---|---|---|---|",
        ]
        for drift in drifts:
            label = f"`{_md_cell(entity_label(drift.entity))}`"
            if drift.source:
                label += f" ({_md_cell(drift.source)})"
            for i, kc in enumerate(drift.key_changes):
                lines.append(
                    f"| {label if i == 0 else ''} | `{kc.key}` "
                    f"| {_value(kc.key, kc.after)} | {_value(kc.key, kc.before)} |"
                )
        lines.append("")
    if report.unmanaged.total:
        lines += [
            f"#### Unmanaged ({report.unmanaged.total})",
            "",
            "Live outside the scope, left alone.",
            "",
        ]
        if report.unmanaged.by_shape:
            lines += ["| Shape | Entities |", "|---|---|"]
            lines += [f"| {shape} | {n} |" for shape, n in report.unmanaged.by_shape.items()]
            lines.append("")
    lines += [f"<sub>{_md_cell(_footer(report))}</sub>", ""]
    return "\n".join(lines)


# ----------------------------------------------------------------------- JSON

_FROZEN = ConfigDict(extra="forbid", frozen=True)


class KeyDriftDoc(BaseModel):
    """One quota key that differs."""

    model_config = _FROZEN
    key: str = Field(description="Quota key, e.g. producer_byte_rate.")
    drift: Literal["changed", "missing", "unexpected"] = Field(
        description="changed: both set, values differ; missing: declared, not live; "
        "unexpected: live, not declared."
    )
    declared: float | None = Field(description="Declared value; null when not declared.")
    live: float | None = Field(description="Live value; null when not set on the cluster.")


class EntityDriftDoc(BaseModel):
    """One in-scope entity that differs from the manifests."""

    model_config = _FROZEN
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

    model_config = _FROZEN
    total: int
    by_shape: dict[str, int] = Field(
        description="Shape (user, client-id, user+client-id, ip) -> count."
    )


class DriftSummaryDoc(BaseModel):
    """Counts by class and the one-line summary."""

    model_config = _FROZEN
    changed: int
    missing: int
    unexpected: int
    matching: int = Field(description="In-scope entities equal to their declaration.")
    text: str = Field(description="The summary sentence, e.g. for an alert title.")


class DriftDocument(BaseModel):
    """A quotaform drift report (JSON)."""

    model_config = _FROZEN
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
    live_state_rpcs: dict[str, int] = Field(
        description="RPCs made to read the live state, by API name."
    )


def _entity_doc(drift: EntityDrift) -> EntityDriftDoc:
    return EntityDriftDoc(
        entity=drift.entity.as_dict(),
        declared=dict(drift.declared),
        live=dict(drift.live),
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
        unmanaged=UnmanagedDoc(
            total=report.unmanaged.total, by_shape=dict(report.unmanaged.by_shape)
        ),
        summary=DriftSummaryDoc(
            changed=len(report.changed),
            missing=len(report.missing),
            unexpected=len(report.unexpected),
            matching=report.matching,
            text=drift_summary_line(report),
        ),
        warnings=list(report.warnings),
        live_state_rpcs=dict(sorted(report.rpc_counts.items())),
    )


def render_drift_json(report: DriftReport) -> str:
    """The report as deterministic JSON (2-space indent, trailing newline)."""
    data = drift_document(report).model_dump(mode="json")
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def drift_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the drift report, ``format_version`` 1."""
    schema = DriftDocument.model_json_schema(mode="serialization")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://quotaform.io/schemas/drift.schema.json"
    schema["title"] = "quotaform drift report"
    return schema
