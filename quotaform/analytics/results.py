"""What an analysis produced, whichever engine ran it: the result value the
reports read, and the counts both engines summarise the same way."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from quotaform.analytics.configs import QuotaConfig
from quotaform.analytics.paths import DataPath
from quotaform.analytics.request import AnalyzeRequest, Command, Engine
from quotaform.analytics.usage import LabelMap, Rejections, usage_problem
from quotaform.errors import AnalyticsError

__all__ = [
    "BUCKETS",
    "BUCKET_LABELS",
    "MAX_POINTS",
    "PLOTTED",
    "TOP_ROWS",
    "AnalyzeResult",
    "UsageSeries",
    "bucket",
    "group_label",
    "in_bucket_order",
    "refuse_unusable",
    "say_matched",
    "series_of",
    "spread",
    "summarise",
]

#: Rows of each table shown in the reports.
TOP_ROWS = 20
#: Groups plotted over time in the HTML report.
PLOTTED = 6
#: Samples plotted per group at most.
MAX_POINTS = 5000



@dataclass(frozen=True, slots=True)
class UsageSeries:
    """One plotted group's usage over time, against its quota.

    Attributes:
        title: the group as the reports name it (cluster, tags, broker).
        cluster: the group's cluster.
        quota_key: the quota key (its unit is the usage's unit).
        quota: the governing quota value (``None``: unlimited).
        points: ``(time, usage)`` in time order; times are UTC.
    """

    title: str
    cluster: str
    quota_key: str
    quota: float | None
    points: tuple[tuple[datetime, float], ...]


@dataclass
class AnalyzeResult:
    """What a run produced, for the reports and the summary.

    Attributes:
        engine: the engine that ran.
        table: the output table's path.
        rows: rows of the output table.
        top: the first :data:`TOP_ROWS` rows (ranked), as dicts.
        usage_rows: usable usage rows read (in the time range).
        rejected: rows that could not be used.
        histogram: utilisation_p99 bucket -> groups (utilisation), else empty.
        series: the plotted groups' usage over time (most loaded first).
        seconds: wall time by stage.
        extra: command-specific counts for the summary.
        request: the request as run (a live read's answers among its usage).
        configs, after: the quota configurations it ran against.
    """

    engine: Engine
    table: DataPath
    rows: int
    top: list[dict[str, Any]]
    usage_rows: int
    rejected: Rejections
    histogram: dict[str, int] = field(default_factory=dict)
    series: list[UsageSeries] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    request: AnalyzeRequest | None = None
    configs: tuple[QuotaConfig, ...] = ()
    after: tuple[QuotaConfig, ...] = ()


#: utilisation_p99 histogram buckets (upper bounds). The last one is 1: a
#: group at or over its quota falls in ``>= 1``, as the headline counts it.
BUCKETS = (0.25, 0.5, 0.75, 0.9, 1.0)
#: The histogram's labels in order: ``< 0.25`` ... ``< 1``, ``>= 1``, ``unlimited``.
BUCKET_LABELS = (*(f"< {b:g}" for b in BUCKETS), f">= {BUCKETS[-1]:g}", "unlimited")


def bucket(value: float | None) -> str:
    if value is None:
        return "unlimited"
    for bound in BUCKETS:
        if value < bound:
            return f"< {bound:g}"
    return f">= {BUCKETS[-1]:g}"


def in_bucket_order(counts: Mapping[str, int]) -> dict[str, int]:
    """Every bucket, in :data:`BUCKET_LABELS` order (empty ones as 0), so the
    summary and the plot read left to right the same way every run."""
    return {label: int(counts.get(label, 0)) for label in BUCKET_LABELS}



def group_label(row: Mapping[str, Any]) -> str:
    """A group as the reports name it: ``prod-eu: user=alice, client-id=ingest @1``."""
    if row.get("ip"):
        where = f"ip={row['ip']}"
    else:
        where = (
            ", ".join(
                f"{n}={row[c]}" for n, c in (("user", "user"), ("client-id", "client_id")) if row[c]
            )
            or "(no tags)"
        )
    broker = f" @{row['broker']}" if row.get("broker") else ""
    return f"{row['cluster']}: {where}{broker}"


def series_of(
    wanted: Sequence[Mapping[str, Any]], points: Mapping[int, list[tuple[datetime, float]]]
) -> list[UsageSeries]:
    """The plotted series, in ``wanted``'s (ranked) order."""
    return [
        UsageSeries(
            title=f"{group_label(row)} {row['quota_key']}",
            cluster=row["cluster"],
            quota_key=row["quota_key"],
            quota=row["quota_value"],
            points=tuple(sorted(points[i])[:MAX_POINTS]),
        )
        for i, row in enumerate(wanted)
        if points.get(i)
    ]



def refuse_unusable(rows: int, rejected: Rejections, labels: LabelMap) -> None:
    """Raise :func:`~quotaform.analytics.usage.usage_problem`'s reason, if any.

    Raises:
        AnalyticsError: nothing usable, or quota series that cannot be read.
    """
    problem = usage_problem(rows, rejected, labels)
    if problem is not None:
        raise AnalyticsError(problem)


def say_matched(rejected: Rejections, say: Callable[[str], None]) -> None:
    """Which exporter series were read as which usage metric (progress)."""
    for match, count in sorted(rejected.matched.items()):
        say(f"series read: {match}: {count:,}")



def summarise(command: Command, rows: Sequence[Mapping[str, Any]], result: AnalyzeResult) -> None:
    if command is Command.utilisation:
        counts: dict[str, int] = {}
        for row in rows:
            label = bucket(row["utilisation_p99"])
            counts[label] = counts.get(label, 0) + 1
        result.histogram = in_bucket_order(counts)
        result.extra = {
            "groups": len(rows),
            "censored": sum(1 for r in rows if r["censored"]),
            "over_quota": sum(
                1 for r in rows if r["utilisation_p99"] is not None and r["utilisation_p99"] >= 1.0
            ),
            **spread(Counter(r["brokers_observed"] for r in rows)),
        }
    elif command is Command.impact:
        result.extra = {
            "changed": len(rows),
            "newly_throttled": sum(1 for r in rows if r["newly_throttled"]),
            "group_changes": {
                kind: sum(1 for r in rows if r["group_change"] == kind)
                for kind in ("splits", "merges")
            },
        }
    else:
        result.extra = {
            "recommendations": len(rows),
            "censored": sum(1 for r in rows if r["censored"]),
        }


def spread(rows_by_brokers: Mapping[int, int]) -> dict[str, int]:
    """The summary's counts of groups over every broker, from the number of
    per-broker rows by ``brokers_observed`` (a group on n brokers has n
    rows): ``cluster_groups``, ``multi_broker_groups`` (on more than one
    broker) and ``max_brokers_observed``."""
    return {
        "cluster_groups": sum(rows // n for n, rows in rows_by_brokers.items()),
        "multi_broker_groups": sum(rows // n for n, rows in rows_by_brokers.items() if n > 1),
        "max_brokers_observed": max(rows_by_brokers, default=0),
    }


