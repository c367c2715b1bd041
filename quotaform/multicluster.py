"""Plans of several clusters as one report (``plan --all-clusters``).

Pure: :func:`quotaform.workflow.plan_clusters` makes the plans; this module
counts them, picks the exit code and renders one report as text, markdown or
JSON. Each cluster's part is its own plan's rendering, unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field
from rich.text import Text

from quotaform.plan import Plan
from quotaform.render import PlanDocument, plan_document, render_markdown, render_text

__all__ = [
    "MULTI_CLUSTER_FORMAT_VERSION",
    "ClusterError",
    "ClusterPlan",
    "MultiClusterDocument",
    "MultiClusterPlan",
    "render_multi_json",
    "render_multi_markdown",
    "render_multi_text",
]

#: Version of the ``plan --all-clusters -o json`` document.
MULTI_CLUSTER_FORMAT_VERSION = 1

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CHANGES = 2


@dataclass(frozen=True, slots=True)
class ClusterPlan:
    """One cluster's outcome: its plan, or why there is none.

    Exactly one of ``plan`` and ``error`` is set.
    """

    cluster: str
    plan: Plan | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        if (self.plan is None) == (self.error is None):
            raise ValueError("give exactly one of plan and error")

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def has_changes(self) -> bool:
        return self.plan is not None and self.plan.summary.has_changes


@dataclass(frozen=True, slots=True)
class MultiClusterPlan:
    """Every cluster's outcome, sorted by cluster name."""

    clusters: tuple[ClusterPlan, ...]

    @classmethod
    def build(cls, clusters: Iterable[ClusterPlan]) -> MultiClusterPlan:
        """Sorted by name.

        Raises:
            ValueError: a cluster is given twice.
        """
        ordered = tuple(sorted(clusters, key=lambda c: c.cluster))
        names = [c.cluster for c in ordered]
        if len(set(names)) != len(names):
            raise ValueError(f"a cluster is given twice: {names}")
        return cls(ordered)

    @property
    def with_changes(self) -> int:
        return sum(c.has_changes for c in self.clusters)

    @property
    def in_sync(self) -> int:
        return sum(not c.failed and not c.has_changes for c in self.clusters)

    @property
    def failed(self) -> int:
        return sum(c.failed for c in self.clusters)

    def exit_code(self, *, detailed: bool) -> int:
        """1 if any cluster failed; else, when ``detailed``, 2 if any has
        changes; else 0 (``plan --detailed-exitcode``'s codes, over all clusters)."""
        if self.failed:
            return EXIT_ERROR
        if detailed and self.with_changes:
            return EXIT_CHANGES
        return EXIT_OK

    def summary_line(self) -> str:
        """``Clusters: 2 with changes, 1 in sync, 0 failed.``"""
        return (
            f"Clusters: {self.with_changes} with changes, {self.in_sync} in sync, "
            f"{self.failed} failed."
        )


def render_multi_text(report: MultiClusterPlan) -> Text:
    """A section per cluster (its plan text, or its error), then the summary line."""
    out = Text()
    for result in report.clusters:
        out.append(f"=== cluster {result.cluster} ===\n\n", style="bold")
        if result.plan is not None:
            out.append_text(render_text(result.plan))
        else:
            out.append(f"Failed: {result.error}\n", style="bold red")
        out.append("\n")
    style = "bold red" if report.failed else "bold"
    out.append(report.summary_line() + "\n", style=style)
    return out


def _md_quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.splitlines())


def render_multi_markdown(report: MultiClusterPlan) -> str:
    """A pull-request comment: the summary first, then a section per cluster
    (each plan's own markdown, which starts with its ``###`` heading)."""
    lines = [
        f"## quotaform plan: {len(report.clusters)} cluster"
        f"{'' if len(report.clusters) == 1 else 's'}",
        "",
        f"**{report.summary_line()}**",
        "",
    ]
    for result in report.clusters:
        if result.plan is not None:
            lines.append(render_markdown(result.plan))
        else:
            lines += [
                f"### quotaform plan: `{result.cluster}`",
                "",
                "**Failed:**",
                "",
                _md_quote(result.error or ""),
                "",
            ]
    return "\n".join(lines)


class ClusterError(BaseModel):
    """A cluster whose plan could not be made."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    error: str = Field(description="Why: the error message, as the CLI prints it.")


class MultiClusterDocument(BaseModel):
    """``plan --all-clusters --output json``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    format_version: int = Field(description="Version of this format (1).")
    clusters: dict[str, PlanDocument | ClusterError] = Field(
        description="Cluster name -> its plan document (as `plan -o json` prints it) "
        "or its error; sorted by name."
    )


def render_multi_json(report: MultiClusterPlan) -> str:
    """``{"format_version": 1, "clusters": {name: plan document | {"error": ...}}}``,
    deterministic (2-space indent, trailing newline)."""
    clusters: dict[str, object] = {}
    for result in report.clusters:
        if result.plan is not None:
            clusters[result.cluster] = plan_document(result.plan).model_dump(
                mode="json", by_alias=True
            )
        else:
            clusters[result.cluster] = {"error": result.error}
    doc = {"format_version": MULTI_CLUSTER_FORMAT_VERSION, "clusters": clusters}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
