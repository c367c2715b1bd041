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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from quotaform.kafka.keys import METRICS
from quotaform.kafka.metrics import ISO_TIMESTAMP
from quotaform.kafka.throttle import DEFAULT_QUOTA_WINDOW_S
from quotaform.kafka.throttle import throttle_time_ms as predicted_throttle_ms
from quotaform.kafka.units import readable_quota

__all__ = [
    "CENSORED_NOTE",
    "COLUMN_TYPES",
    "DEFAULT_HEADROOM",
    "DEFAULT_WINDOW_S",
    "GROUP_COLUMNS",
    "IMPACT_COLUMNS",
    "ISO_TIMESTAMP",
    "PERCENTILES",
    "RECOMMEND_COLUMNS",
    "USAGE_COLUMNS",
    "UTILISATION_COLUMNS",
    "UsageRow",
    "percentile",
    "predicted_throttle_ms",
    "readable_quota",
]

#: The usage table's columns, in order.
USAGE_COLUMNS = ("cluster", "broker", "timestamp", "metric", "user", "client_id", "ip", "value")
#: What identifies one quota group's series on one broker.
GROUP_COLUMNS = ("cluster", "broker", "user", "client_id", "ip", "quota_key")
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
)
#: ``analyze impact``: one row per changed (group, key) per broker.
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
)
#: ``analyze recommend``: one row per observed (group, key), all brokers together.
RECOMMEND_COLUMNS = (
    "cluster",
    "user",
    "client_id",
    "ip",
    "quota_key",
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
)
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
}
#: The usage quantiles every engine computes (exact, linear interpolation).
PERCENTILES = (0.5, 0.95, 0.99)
#: The quota window's length in seconds (``quota.window.num`` 11 x
#: ``quota.window.size.seconds`` 1, the brokers' defaults): the W of the
#: throttle formula (``analyze impact --window``).
DEFAULT_WINDOW_S = DEFAULT_QUOTA_WINDOW_S
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
