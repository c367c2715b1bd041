"""Human renderings of ``plan --all-clusters``: one section per cluster (its
own plan's rendering, unchanged), then the summary line."""

from __future__ import annotations

from rich.text import Text

from quotaform.plan.multicluster import MultiClusterPlan
from quotaform.render.md import md_code, md_text
from quotaform.render.text import render_markdown, render_text

__all__ = ["multi_summary_line", "render_multi_markdown", "render_multi_text"]


def multi_summary_line(report: MultiClusterPlan) -> str:
    """``Clusters: 2 with changes, 1 in sync, 0 failed.``"""
    return (
        f"Clusters: {report.with_changes} with changes, {report.in_sync} in sync, "
        f"{report.failed} failed."
    )


def render_multi_text(report: MultiClusterPlan) -> Text:
    """A section per cluster (its plan text, or its error), then the summary line."""
    out = Text()
    for result in report.clusters:
        out.append(f"=== cluster {result.cluster} ===\n\n", style="bold")
        if result.plan is not None:
            out.append_text(render_text(result.plan, result.review))
        else:
            out.append(f"Failed: {result.error}\n", style="bold red")
        out.append("\n")
    style = "bold red" if report.failed else "bold"
    out.append(multi_summary_line(report) + "\n", style=style)
    return out


def _md_quote(text: str) -> str:
    return "\n".join(f"> {md_text(line)}" if line else ">" for line in text.splitlines())


def render_multi_markdown(report: MultiClusterPlan) -> str:
    """A pull-request comment: the summary first, then a section per cluster
    (each plan's own markdown, which starts with its ``###`` heading)."""
    lines = [
        f"## quotaform plan: {len(report.clusters)} cluster"
        f"{'' if len(report.clusters) == 1 else 's'}",
        "",
        f"**{multi_summary_line(report)}**",
        "",
    ]
    for result in report.clusters:
        if result.plan is not None:
            lines.append(render_markdown(result.plan, result.review))
        else:
            lines += [
                f"### quotaform plan: {md_code(result.cluster)}",
                "",
                "**Failed:**",
                "",
                _md_quote(result.error or ""),
                "",
            ]
    return "\n".join(lines)
