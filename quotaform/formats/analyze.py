"""The JSON summary of ``quotaform analyze`` (``DIR/summary.json``);
``schemas/analyze.schema.json`` is generated from :class:`AnalyzeSummary`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from quotaform.formats.base import FROZEN
from quotaform.formats.explain import EnforcementDoc
from quotaform.kafka.keys import METRICS
from quotaform.kafka.metrics import ISO_TIMESTAMP

if TYPE_CHECKING:
    UsageMetric = str
else:
    # The usage table's metric names, from the one table (kafka.keys.METRICS).
    UsageMetric = Literal[tuple(METRICS)]

__all__ = ["AnalyzeSummary", "RejectedDoc", "SnapshotLine", "UsageRecord", "render_summary_json"]


class RejectedDoc(BaseModel):
    """Usage rows that could not be used: never dropped without a count."""

    model_config = FROZEN
    count: int
    by_reason: dict[str, int] = Field(description="Rejected rows by the field at fault.")
    examples: list[str] = Field(description="The first rejected rows: file:row: reason.")
    skipped: dict[str, int] = Field(
        description="Series that are not quota usage (queue-size, tokens...), by name."
    )
    duplicates: int = Field(
        default=0,
        description="Rows of a (series, timestamp) already read (the same series in two "
        "files), counted once.",
    )
    matched: dict[str, int] = Field(
        default_factory=dict,
        description="Series read, by 'exporter name -> usage metric (naming convention)'.",
    )
    notes: dict[str, int] = Field(
        default_factory=dict,
        description="What was assumed or is worth knowing (a cluster assumed for series "
        "without the cluster label, old exporter rules), with the series counts.",
    )


class AnalyzeSummary(BaseModel):
    """One ``analyze`` run, summarised."""

    model_config = FROZEN
    format_version: Literal[1] = Field(description="Version of this format.")
    command: Literal["utilisation", "impact", "recommend"]
    engine: Literal["spark", "python"]
    table: str = Field(description="The output table (Parquet).")
    rows: int = Field(description="Rows of the output table.")
    usage_rows: int = Field(description="Usage rows used (in the time range, configured clusters).")
    rejected: RejectedDoc
    configurations: list[str] = Field(description="Where each cluster's quotas came from.")
    counts: dict[str, Any] = Field(
        description="utilisation: groups (per-broker rows), censored, over_quota, "
        "cluster_groups (groups over every broker), multi_broker_groups (observed on more "
        "than one broker), max_brokers_observed; impact: changed, newly_throttled, "
        "group_changes; recommend: recommendations, censored."
    )
    align_s: float = Field(
        description="Quotas are enforced per broker; the cluster_* columns sum a group's "
        "usage across brokers after aligning the samples on buckets of this many seconds "
        "from the epoch (--align).",
    )
    histogram: dict[str, int] = Field(
        default_factory=dict,
        description="utilisation: groups per utilisation_p99 bucket, every bucket in this "
        "order: < 0.25, < 0.5, < 0.75, < 0.9, < 1, >= 1 (at or over the quota), unlimited.",
    )
    top: list[dict[str, Any]] = Field(description="The first rows of the table, ranked.")
    seconds: dict[str, float] = Field(description="Wall time per stage.")
    resolution_enforced: bool | None = Field(
        default=None,
        description="Whether the brokers enforce the quotas and levels the analysis resolved "
        "(Kafka's default resolution): false when a cluster's brokers use a custom quota "
        "callback (client.quota.callback.class, KIP-257); null when not known (quotas from "
        "manifests or snapshot files, or a broker unreadable).",
    )
    quota_callback: str | None = Field(
        default=None,
        description="The custom quota callback class(es) the brokers read set, comma-separated.",
    )
    enforcement: dict[str, EnforcementDoc] = Field(
        default_factory=dict,
        description="Cluster -> how its brokers enforce quotas, for the clusters whose "
        "brokers were read (the live cluster, or a saved plan that recorded them).",
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="Why resolved quotas are not (or not surely) what the brokers enforce, "
        "per cluster, as the reports and the command print them.",
    )


class UsageRecord(BaseModel):
    """One usage sample (a row of Parquet / CSV, a line of JSON Lines): the
    generic usage table other tools write."""

    model_config = ConfigDict(defer_build=True, extra="allow", frozen=True)
    cluster: str = Field(min_length=1)
    broker: str = Field(min_length=1)
    timestamp: str = Field(
        description="UTC, ISO-8601 with seconds (2026-11-23T10:00:00Z); Parquet: a timestamp.",
        pattern=ISO_TIMESTAMP,
    )
    metric: UsageMetric
    user: str = Field(
        description='The user tag as the metric carries it (URL-encoded); "" if empty.'
    )
    client_id: str = Field(description='The client-id tag; "" if empty.')
    ip: str | None = Field(description="Only for connection-accept-rate.")
    value: float | str = Field(
        description="bytes/s, % of a thread, mutations/s, ms or connections/s; NaN allowed."
    )


class SnapshotLine(BaseModel):
    """One line of a quota snapshot (``quotaform snapshot``)."""

    model_config = FROZEN
    format_version: Literal[1]
    cluster: str = Field(min_length=1)
    cluster_id: str | None
    taken_at: str = Field(description="UTC, ISO-8601.")
    entity: dict[str, str | None] = Field(description="Entity type -> name; null = default.")
    quotas: dict[str, float] = Field(description="Quota key -> quota value.")


def render_summary_json(summary: AnalyzeSummary) -> str:
    """``summary`` as deterministic JSON (2-space indent, trailing newline)."""
    return (
        json.dumps(summary.model_dump(mode="json"), indent=2, ensure_ascii=False, default=str)
        + "\n"
    )
