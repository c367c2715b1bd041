"""The JSON summary of ``quotaform analyze`` (``DIR/summary.json``);
``schemas/analyze.schema.json`` is generated from :class:`AnalyzeSummary`."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AnalyzeSummary", "RejectedDoc", "render_summary_json"]

_FROZEN = ConfigDict(extra="forbid", frozen=True)


class RejectedDoc(BaseModel):
    """Usage rows that could not be used: never dropped without a count."""

    model_config = _FROZEN
    count: int
    by_reason: dict[str, int] = Field(description="Rejected rows by the field at fault.")
    examples: list[str] = Field(description="The first rejected rows: file:row: reason.")
    skipped: dict[str, int] = Field(
        description="Series that are not quota usage (queue-size, tokens...), by name."
    )


class AnalyzeSummary(BaseModel):
    """One ``analyze`` run, summarised."""

    model_config = _FROZEN
    format_version: Literal[1] = Field(description="Version of this format.")
    command: Literal["utilisation", "impact", "recommend"]
    engine: Literal["spark", "python"]
    table: str = Field(description="The output table (Parquet).")
    rows: int = Field(description="Rows of the output table.")
    usage_rows: int = Field(description="Usage rows used (in the time range, configured clusters).")
    rejected: RejectedDoc
    configurations: list[str] = Field(description="Where each cluster's quotas came from.")
    counts: dict[str, Any] = Field(
        description="utilisation: groups, censored, over_quota; impact: changed, "
        "newly_throttled, group_changes; recommend: recommendations, censored."
    )
    histogram: dict[str, int] = Field(
        default_factory=dict, description="utilisation: groups per utilisation_p99 bucket."
    )
    top: list[dict[str, Any]] = Field(description="The first rows of the table, ranked.")
    seconds: dict[str, float] = Field(description="Wall time per stage.")


def render_summary_json(summary: AnalyzeSummary) -> str:
    """``summary`` as deterministic JSON (2-space indent, trailing newline)."""
    return (
        json.dumps(summary.model_dump(mode="json"), indent=2, ensure_ascii=False, default=str)
        + "\n"
    )
