"""Human renderings of one :class:`~quotaform.plan.drift.DriftReport`: rich
text for a cron log, markdown for a ticket (JSON: ``quotaform.formats.drift``).

Values are shown in readable units (:func:`~quotaform.kafka.units.format_quota_value`).
Entities appear in :meth:`~quotaform.kafka.entity.Entity.sort_key` order,
quota keys sorted.
"""

from __future__ import annotations

from rich.text import Text

from quotaform.kafka.units import format_quota_value
from quotaform.plan.drift import DriftKind, DriftReport
from quotaform.plan.model import EntityChange
from quotaform.render.explain import probe_markdown, probe_text
from quotaform.render.md import md_code, md_text
from quotaform.render.storage import scaling_headline
from quotaform.words import drift_summary_line, entities_text

__all__ = ["render_drift_markdown", "render_drift_text"]

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
_PROBES = "Probes (declared -> live)"


def _value(key: str, value: float | None) -> str:
    return _NOT_SET if value is None else format_quota_value(key, value)


def _where(report: DriftReport) -> str:
    return f'cluster "{report.cluster}"' + (
        f" (id {report.cluster_id})" if report.cluster_id else ""
    )


def _footer(report: DriftReport) -> str:
    rpcs = ", ".join(f"{n} {api}" for api, n in sorted(report.rpc_counts.items())) or "no RPCs"
    return (
        f"{entities_text(report.matching)} in scope in sync; read-only check, nothing was changed; "
        f"live state read with {rpcs}."
    )


def _key_lines(drift: EntityChange) -> list[str]:
    """One line per differing key: ``producer_byte_rate: declared 1MiB, live 4KiB``."""
    return [
        f"{kc.key}: declared {_value(kc.key, kc.after)}, live {_value(kc.key, kc.before)}"
        for kc in drift.key_changes
    ]


def _unmanaged_detail(report: DriftReport) -> str:
    shapes = [f"{shape} {n}" for shape, n in report.unmanaged_by_shape.items() if n]
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
            out.append(f"  {drift.entity.label()}", style=_STYLE[kind])
            if drift.source:
                out.append(f"  ({drift.source})", style="dim")
            out.append("\n")
            for line in _key_lines(drift):
                out.append(f"      {line}\n")
        out.append("\n")
    if report.unmanaged:
        out.append(
            f"Unmanaged ({report.unmanaged}): live outside the scope, left alone\n",
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
    if report.probes:
        for line in probe_text(report.probes, _PROBES, report.enforcement):
            out.append(line + "\n", style="cyan")
        out.append("\n")
    if report.storage is not None:
        out.append(scaling_headline(report.storage) + "\n", style="magenta")
        if report.scale_pending:
            out.append(
                f"Storage scale to apply ({len(report.scale_pending)}): live at an earlier "
                "factor, not drift; apply or storage watch writes it\n",
                style="bold magenta",
            )
            for change in report.scale_pending:
                for line in _key_lines(change):
                    out.append(f"  {change.entity.label()}: {line}\n")
        out.append("\n")
    out.append(drift_summary_line(report) + "\n", style="bold" if report.in_sync else "bold red")
    out.append(_footer(report) + "\n", style="dim")
    return out


def render_drift_markdown(report: DriftReport) -> str:
    """The report as GitHub-flavoured markdown, e.g. for a ticket: one table per
    non-empty class (entity, quota key, declared, live) and the unmanaged
    count per shape."""
    lines = [f"### quotaform drift: {md_code(report.cluster)}", ""]
    if report.cluster_id:
        lines += [f"Cluster id {md_code(report.cluster_id)}", ""]
    lines += [f"**{drift_summary_line(report)}**", ""]
    for warning in report.warnings:
        lines += [f"> **Warning:** {md_text(warning)}", ""]
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
            label = md_code(drift.entity.label())
            if drift.source:
                label += f" ({md_text(drift.source)})"
            for i, kc in enumerate(drift.key_changes):
                declared = md_text(_value(kc.key, kc.after))
                live = md_text(_value(kc.key, kc.before))
                lines.append(
                    f"| {label if i == 0 else ''} | {md_code(kc.key)} | {declared} | {live} |"
                )
        lines.append("")
    if report.unmanaged:
        lines += [
            f"#### Unmanaged ({report.unmanaged})",
            "",
            "Live outside the scope, left alone.",
            "",
        ]
        if report.unmanaged_by_shape:
            lines += ["| Shape | Entities |", "|---|---|"]
            lines += [f"| {shape} | {n} |" for shape, n in report.unmanaged_by_shape.items()]
            lines.append("")
    if report.probes:
        lines += [*probe_markdown(report.probes, _PROBES, report.enforcement), ""]
    if report.storage is not None:
        lines += [f"**{md_text(scaling_headline(report.storage))}**", ""]
        if report.scale_pending:
            lines += [
                f"Storage scale to apply ({len(report.scale_pending)}), not drift: "
                + ", ".join(md_code(c.entity.label()) for c in report.scale_pending),
                "",
            ]
    lines += [f"<sub>{md_text(_footer(report))}</sub>", ""]
    return "\n".join(lines)
