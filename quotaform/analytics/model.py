"""The fleet analytics' tables as data: column contracts, the usage row, the
defaults of its commands, and the percentile rule both engines share. Kafka's
own rules live in :mod:`quotaform.kafka`; the two the analytics used to define
here (``predicted_throttle_ms``, ``readable_quota``) are re-exported.

The usage table (``schemas/usage.schema.json``; a fixed contract other tools
write): one row per (``cluster``, ``broker``, ``timestamp``, ``metric``,
``user``, ``client_id``, ``ip``) with a ``value``:

* ``metric``: a name of :data:`quotaform.kafka.keys.METRICS`
  (``produce-byte-rate``, ``fetch-throttle-time``, ``connection-accept-rate``, ...);
* ``user`` / ``client_id``: the metric's tags exactly as the broker sets them
  (the user URL-encoded by ``Sanitizer``; ``""`` for an empty tag); ``ip``
  null except for ``connection-accept-rate``;
* ``value``: bytes/s, % of a thread, mutations/s, ms or connections/s; NaN
  allowed (a ``throttle-time`` of NaN: nothing throttled lately).

Output tables keep the column names listed here (a contract other tools
read); columns are only ever added.

Kafka enforces every client quota on each broker separately
(``ClientQuotaManager`` and ``ConnectionQuotas`` run in every broker, with
their own sensors): a group whose clients reach N brokers can use N times its
quota across the cluster. So every per-broker row carries its group's
cluster-wide figures (:data:`CLUSTER_COLUMNS`): the brokers it was observed
on, and its usage summed across them. Samples of different brokers are taken
at different times (JmxTool, ``analyze collect``) or at the same steps
(Prometheus ``query_range``), so they are aligned on buckets of
``--align`` seconds (default :data:`DEFAULT_ALIGN_S`, the quota window) from
the epoch (:func:`aligned`): each broker's samples in a bucket are averaged
(:func:`fold_sum` in ascending order, divided by their count), and the brokers'
averages summed (:func:`fold_sum` in broker-name order). The quantiles of
those sums are the group's cluster-wide ones. Both engines add in these
orders, so their sums are equal bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from quotaform.kafka.keys import METRICS
from quotaform.kafka.metrics import ISO_TIMESTAMP
from quotaform.kafka.throttle import DEFAULT_QUOTA_WINDOW_S
from quotaform.kafka.throttle import throttle_time_ms as predicted_throttle_ms
from quotaform.kafka.units import readable_quota

__all__ = [
    "CENSORED_NOTE",
    "CLUSTER_COLUMNS",
    "CLUSTER_GROUP_COLUMNS",
    "COLUMN_TYPES",
    "DEFAULT_ALIGN_S",
    "DEFAULT_HEADROOM",
    "DEFAULT_WINDOW_S",
    "GROUP_COLUMNS",
    "IMPACT_COLUMNS",
    "ISO_TIMESTAMP",
    "ONE_BROKER_FIGURES",
    "PERCENTILES",
    "RANKING",
    "RECOMMEND_COLUMNS",
    "SERIES_COLUMNS",
    "TABLE_COLUMNS",
    "USAGE_COLUMNS",
    "UTILISATION_COLUMNS",
    "UsageRow",
    "align_micros",
    "aligned",
    "epoch_micros",
    "fold_sum",
    "percentile",
    "predicted_throttle_ms",
    "rank_key",
    "readable_quota",
]

#: The usage table's columns, in order.
USAGE_COLUMNS = ("cluster", "broker", "timestamp", "metric", "user", "client_id", "ip", "value")
#: What identifies one usage series: the row without its time and value.
SERIES_COLUMNS = ("cluster", "broker", "metric", "user", "client_id", "ip")
#: What identifies one quota group's series on one broker.
GROUP_COLUMNS = ("cluster", "broker", "user", "client_id", "ip", "quota_key")
#: What identifies one quota group over every broker of its cluster.
CLUSTER_GROUP_COLUMNS = tuple(c for c in GROUP_COLUMNS if c != "broker")
#: The group's cluster-wide figures next to each of its per-broker rows (the
#: group: ``cluster``, ``user``, ``client_id``, ``ip``, ``quota_key``, over
#: every broker): ``brokers_observed``, the brokers with a row of the group;
#: ``cluster_samples``, the aligned buckets with a usage sample on some
#: broker; ``cluster_p50`` ... ``cluster_max``, the quantiles of the usage
#: summed across brokers per bucket (see the module docstring);
#: ``cluster_ceiling``, ``quota_value`` x ``brokers_observed`` (what the group
#: may use across those brokers, the quota being enforced on each; null when
#: unlimited); ``cluster_utilisation_p99``, ``cluster_p99`` / ``cluster_ceiling``.
#: The summed ones, counted from the usage (the last two follow from the quota).
CLUSTER_SUMS = (
    "brokers_observed",
    "cluster_samples",
    "cluster_p50",
    "cluster_p95",
    "cluster_p99",
    "cluster_max",
)
CLUSTER_COLUMNS = (*CLUSTER_SUMS, "cluster_ceiling", "cluster_utilisation_p99")
#: A group seen on one broker has the same cluster figures as its per-broker
#: ones (its samples, not averages over alignment buckets): cluster column ->
#: the per-broker column it takes.
ONE_BROKER_FIGURES = {
    "cluster_samples": "samples",
    "cluster_p50": "p50",
    "cluster_p95": "p95",
    "cluster_p99": "p99",
    "cluster_max": "max",
}
#: ``analyze utilisation``: one row per observed (group, key) per broker.
UTILISATION_COLUMNS = (
    *GROUP_COLUMNS,
    "quota_value",
    "level",
    "entity",
    "samples",
    "p50",
    "p95",
    "p99",
    "max",
    "utilisation_p99",
    "throttled_share",
    "censored",
    *CLUSTER_COLUMNS,
)
#: ``analyze impact``: one row per changed (group, key) per broker. ``p99``
#: (the peak demand) says whether the group is held and feeds
#: ``predicted_throttle_ms``, ``first_throttle_ms`` and ``demand_cut``;
#: ``p50`` (its typical rate) feeds ``throughput_after`` (what its clients
#: measure: ``p50`` while not held, the held rate when held, at most ``p50``).
IMPACT_COLUMNS = (
    *GROUP_COLUMNS,
    "quota_before",
    "quota_after",
    "level_before",
    "level_after",
    "entity_before",
    "entity_after",
    "group_change",
    "tags_after",
    "p99",
    "predicted_throttle_ms",
    "throttled_before",
    "newly_throttled",
    "first_throttle_ms",
    "throughput_after",
    "demand_cut",
    "request_bytes",
    "request_bytes_source",
    "brokers_observed",
    "cluster_p99",
    "cluster_ceiling_before",
    "cluster_ceiling_after",
    "p50",
)
#: ``analyze recommend``: one row per observed (group, key) over every broker:
#: a per-broker quota (Kafka enforces it on each broker) sized by the busiest
#: broker's quantile; ``cluster_ceiling`` and ``recommended_cluster_ceiling``
#: are the current and the recommended quota x ``brokers_observed``.
RECOMMEND_COLUMNS = (
    *CLUSTER_GROUP_COLUMNS,
    "quota_value",
    "peak_p99",
    "recommended",
    "recommended_text",
    "entity",
    "censored",
    "note",
    "share_over",
    "throttle_at_max_ms",
    "request_bytes",
    "request_bytes_source",
    "brokers_observed",
    "cluster_p99",
    "cluster_ceiling",
    "recommended_cluster_ceiling",
)
#: Each command's table, by command name.
TABLE_COLUMNS = {
    "utilisation": UTILISATION_COLUMNS,
    "impact": IMPACT_COLUMNS,
    "recommend": RECOMMEND_COLUMNS,
}
#: How each command's rows are ranked in the reports (the top rows), by
#: command name: ``(column, descending)`` in order; a descending column puts
#: nulls last, an ascending one first (Spark's defaults). Utilisation: the
#: most loaded first; impact: the newly throttled, then the hardest hit;
#: recommend: the censored first.
RANKING: dict[str, tuple[tuple[str, bool], ...]] = {
    "utilisation": (("utilisation_p99", True), *((c, False) for c in GROUP_COLUMNS)),
    "impact": (
        ("newly_throttled", True),
        ("predicted_throttle_ms", True),
        *((c, False) for c in GROUP_COLUMNS),
    ),
    "recommend": (("censored", True), ("cluster", False), ("user", False), ("client_id", False)),
}
#: Every column's type, by name (Spark and Arrow types derive from it):
#: ``string``, ``double``, ``int``, ``long``, ``boolean`` or ``timestamp``.
COLUMN_TYPES: dict[str, str] = {
    "cluster": "string",
    "broker": "string",
    "timestamp": "timestamp",
    "metric": "string",
    "user": "string",
    "client_id": "string",
    "ip": "string",
    "value": "double",
    "quota_key": "string",
    "quota_value": "double",
    "level": "int",
    "entity": "string",
    "samples": "long",
    "p50": "double",
    "p95": "double",
    "p99": "double",
    "max": "double",
    "utilisation_p99": "double",
    "throttled_share": "double",
    "censored": "boolean",
    "quota_before": "double",
    "quota_after": "double",
    "level_before": "int",
    "level_after": "int",
    "entity_before": "string",
    "entity_after": "string",
    "group_change": "string",
    "tags_after": "string",
    "predicted_throttle_ms": "double",
    "throttled_before": "boolean",
    "newly_throttled": "boolean",
    "peak_p99": "double",
    "recommended": "double",
    "recommended_text": "string",
    "note": "string",
    "first_throttle_ms": "double",
    "throughput_after": "double",
    "demand_cut": "double",
    "request_bytes": "double",
    "request_bytes_source": "string",
    "share_over": "double",
    "throttle_at_max_ms": "double",
    "brokers_observed": "int",
    "cluster_samples": "long",
    "cluster_p50": "double",
    "cluster_p95": "double",
    "cluster_p99": "double",
    "cluster_max": "double",
    "cluster_ceiling": "double",
    "cluster_utilisation_p99": "double",
    "cluster_ceiling_before": "double",
    "cluster_ceiling_after": "double",
    "recommended_cluster_ceiling": "double",
}
#: The usage quantiles every engine computes (exact, linear interpolation).
PERCENTILES = (0.5, 0.95, 0.99)
#: The quota window's length in seconds (``quota.window.num`` 11 x
#: ``quota.window.size.seconds`` 1, the brokers' defaults): the W of the
#: throttle formula (``analyze impact --window``).
DEFAULT_WINDOW_S = DEFAULT_QUOTA_WINDOW_S
#: The bucket (seconds) the brokers' samples are aligned on before a group's
#: usage is summed across brokers (``analyze --align``): the quota window W,
#: over which the broker's own rate metrics already average.
DEFAULT_ALIGN_S = DEFAULT_WINDOW_S
#: The factor over the observed quantile a recommended quota leaves
#: (``analyze recommend --headroom``).
DEFAULT_HEADROOM = 1.2
#: ``analyze recommend``'s note on a group throttled in the range.
CENSORED_NOTE = (
    "throttled in the range: usage was held near the quota and true demand is "
    "unknown; recommended at least the current quota"
)


@dataclass(frozen=True, slots=True)
class UsageRow:
    """One usage sample (see the module docstring)."""

    cluster: str
    broker: str
    timestamp: datetime
    metric: str
    user: str
    client_id: str
    ip: str | None
    value: float

    @property
    def quota_key(self) -> str:
        """The quota key the metric measures (or the throttling of)."""
        return METRICS[self.metric][0]

    @property
    def kind(self) -> str:
        """``usage`` or ``throttle``."""
        return METRICS[self.metric][1]


def percentile(values: Sequence[float], p: float) -> float:
    """The exact percentile with linear interpolation between closest ranks
    (position ``p * (n - 1)``), as Spark's ``percentile`` computes it.

    Raises:
        ValueError: no values.
    """
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    position = p * (len(ordered) - 1)
    low = math.floor(position)
    high = math.ceil(position)
    if low == high:
        return ordered[low]
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def rank_key(command: str) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """The sort key of a command's rows as :data:`RANKING` ranks them, for
    rows as dicts (the Spark engine sorts by the same data)."""
    ranking = RANKING[command]

    def key(row: Mapping[str, Any]) -> tuple[Any, ...]:
        out: list[Any] = []
        for column, descending in ranking:
            value = row[column]
            if descending:
                out.append((value is None, 0.0 if value is None else -float(value)))
            else:
                out.append((value is not None, "" if value is None else value))
        return tuple(out)

    return key


def align_micros(align_s: float) -> int:
    """The alignment bucket of ``align_s`` seconds in whole microseconds (the
    usage table's time resolution).

    Raises:
        ValueError: not a finite duration of at least one microsecond.
    """
    if not math.isfinite(align_s) or round(align_s * 1_000_000) < 1:
        raise ValueError(f"{align_s!r}: give a positive duration (seconds)")
    return round(align_s * 1_000_000)


def epoch_micros(when: datetime) -> int:
    """Whole microseconds since the epoch of a time (a naive time is UTC), as
    the local engine and Spark's ``unix_micros`` hold timestamps."""
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    delta = when - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def aligned(micros: int, align_us: int) -> int:
    """The start (microseconds since the epoch) of the alignment bucket holding
    ``micros``: buckets of ``align_us`` counted from the epoch, so every
    broker's samples fall in the same buckets."""
    return micros - micros % align_us


def fold_sum(values: Iterable[float]) -> float:
    """``0.0 + v1 + v2 + ...`` added left to right in the order given: the
    one order of addition every engine uses for the cluster-wide sums (a
    float sum depends on it)."""
    total = 0.0
    for value in values:
        total += value
    return total
