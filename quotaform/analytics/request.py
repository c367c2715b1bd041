"""One ``quotaform analyze`` run as one value, from the CLI to the engines.

The CLI parses its options into an :class:`AnalyzeRequest`; the application
layer adds the quota configurations it reads (manifests, snapshots, a saved
plan, the live cluster) and hands the same value to the pipeline
(:func:`quotaform.analytics.jobs.run_analysis`), which hands its usage part
to the sources (:mod:`quotaform.analytics.sources`) and the engine. Nothing
on the way spells its fields again.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from quotaform.analytics.model import DEFAULT_ALIGN_S, DEFAULT_HEADROOM, DEFAULT_WINDOW_S
from quotaform.analytics.paths import DataPath
from quotaform.analytics.sources.base import ReadOptions
from quotaform.analytics.sources.live import LiveOptions
from quotaform.analytics.sources.registry import AUTO

__all__ = ["QUANTILES", "AnalyzeRequest", "Command", "Engine"]

#: The usage quantiles ``recommend`` sizes by.
QUANTILES = ("p50", "p95", "p99", "max")


class Command(enum.StrEnum):
    """What ``analyze`` computes."""

    utilisation = "utilisation"
    impact = "impact"
    recommend = "recommend"


class Engine(enum.StrEnum):
    """Which engine runs (``--engine``)."""

    auto = "auto"
    spark = "spark"
    python = "python"


@dataclass(frozen=True, slots=True)
class AnalyzeRequest:
    """One ``analyze`` run.

    Attributes:
        command: utilisation, impact or recommend.
        out: the output directory, a local path or a Hadoop URI
            (:mod:`quotaform.analytics.paths`; a URI needs the Spark engine).
        usage: usage files or directories: local paths or Hadoop URIs.
        usage_format: a source's name (:data:`~quotaform.analytics.sources.registry.SOURCES`)
            or ``auto`` (detected per file).
        read: how the sources read (Prometheus labels, the cluster and
            broker of JmxTool files, the bounds of a file).
        prometheus: a live Prometheus to read the usage from, besides
            ``usage`` (``None``: none).
        since, until: the time range (a naive time is UTC; ``None``: open,
            or the last hour for ``prometheus``).
        engine, master: the engine, and Spark's master URL (default local[*]).
        remote: a Spark Connect URL (``sc://HOST:PORT``) instead of a master;
            implies the Spark engine. Messages show it redacted.
        window_s: impact: the quota window W of the throttle formula (seconds).
        align_s: the bucket (seconds) the brokers' samples are aligned on
            before a group's usage is summed across brokers (the cluster-wide
            columns, :data:`~quotaform.analytics.model.CLUSTER_COLUMNS`);
            ``None``: the quota window, or a live read's step when shorter
            (its samples are aligned already).
        quantile, headroom: recommend's quantile (one of :data:`QUANTILES`)
            and factor.
        request_sizes: S per quota key, one request's amount (bytes for the
            byte rates) for the steady-state throttle; keys not given take
            :data:`quotaform.kafka.impact.STEADY_RULES`' defaults.
    """

    command: Command
    out: DataPath
    usage: tuple[DataPath, ...] = ()
    usage_format: str = AUTO
    read: ReadOptions = field(default_factory=ReadOptions)
    prometheus: LiveOptions | None = None
    since: datetime | None = None
    until: datetime | None = None
    engine: Engine = Engine.auto
    master: str | None = None
    remote: str | None = None
    window_s: float = DEFAULT_WINDOW_S
    align_s: float | None = None
    quantile: str = "p99"
    headroom: float = DEFAULT_HEADROOM
    request_sizes: Mapping[str, float] = field(default_factory=dict)

    @property
    def align(self) -> float:
        """The alignment bucket in force, seconds (``align_s`` or the default)."""
        return DEFAULT_ALIGN_S if self.align_s is None else self.align_s
