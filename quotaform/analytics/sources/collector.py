"""The collector (``quotaform analyze collect``): a broker's quota MBeans,
read over its loopback JMX port, appended to a generic JSON Lines usage
file every interval.

Each read asks for the MBeans of quota groups (:data:`QUOTA_PATTERNS`),
maps ``Produce``/``Fetch``/``Request``/``ControllerMutation`` attributes and
the per-ip ``connection-accept-rate`` to usage metrics
(:func:`~quotaform.analytics.sources.jmxtool.jmx_metric`, the JmxTool
source's own table) and writes one row per (group, metric), tags exactly as
the MBean carries them. The broker's id comes from its ``app-info`` MBean
(``kafka.server:type=app-info,id=N``) unless ``--broker`` names it: samples
of two brokers collected without it would otherwise merge. How the MBeans
are read (Kafka's JmxTool, from the jars the sandbox keeps) is injected:
the analytics never start a JVM of their own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any

from quotaform.analytics.sources.jmxtool import jmx_metric, mbean_row
from quotaform.analytics.usage import write_jsonl
from quotaform.errors import AnalyticsError

__all__ = [
    "APP_INFO",
    "QUOTA_ATTRIBUTES",
    "QUOTA_PATTERNS",
    "Collected",
    "MBeanReader",
    "broker_id",
    "collect",
    "usage_records",
]

#: The MBeans of quota groups (and the per-ip connection rates).
QUOTA_PATTERNS = (
    "kafka.server:type=Produce,*",
    "kafka.server:type=Fetch,*",
    "kafka.server:type=Request,*",
    "kafka.server:type=ControllerMutation,*",
    "kafka.server:type=socket-server-metrics,ip=*",
)
#: Their attributes read.
QUOTA_ATTRIBUTES = (
    "byte-rate",
    "throttle-time",
    "request-time",
    "mutation-rate",
    "connection-accept-rate",
    "queue-size",
)
#: The MBean naming the node, ``kafka.server:type=app-info,id=<node id>``,
#: and an attribute to read of it.
APP_INFO = (("kafka.server:type=app-info,*",), ("start-time-ms",))

#: ``(patterns, attributes) -> {ObjectName: (key properties, {attribute: value})}``:
#: one read of every matching MBean (empty when nothing matches yet).
MBeanReader = Callable[
    [Sequence[str], Sequence[str]], Mapping[str, tuple[Mapping[str, str], Mapping[str, float]]]
]


def usage_records(
    readings: Mapping[str, tuple[Mapping[str, str], Mapping[str, float]]],
    *,
    cluster: str,
    broker: str,
    now: datetime,
) -> list[dict[str, Any]]:
    """One read's generic usage records, timestamped ``now``."""
    records = []
    for props, values in readings.values():
        for attribute, value in values.items():
            metric = jmx_metric(props.get("type", ""), attribute)
            if metric is None:
                continue
            row = mbean_row(props, metric, cluster=cluster, broker=broker)
            records.append({**row, "timestamp": now, "value": value})
    return records


def broker_id(read: MBeanReader) -> str:
    """The broker's node id, from its ``app-info`` MBean.

    Raises:
        AnalyticsError: no ``app-info`` MBean, or several ids (name the
            broker with ``--broker ID``).
    """
    patterns, attributes = APP_INFO
    ids = sorted({p["id"] for p, _ in read(patterns, attributes).values() if p.get("id")})
    if len(ids) != 1:
        seen = f"ids {', '.join(ids)}" if ids else "none"
        raise AnalyticsError(
            f"which broker is this? its app-info MBeans name {seen}: give --broker ID"
        )
    return ids[0]


@dataclass(frozen=True, slots=True)
class Collected:
    """What :func:`collect` wrote: ``rows``, as broker ``broker`` (read from
    the broker when ``read_broker``)."""

    rows: int
    broker: str
    read_broker: bool


def collect(
    read: MBeanReader,
    out: IO[str],
    *,
    cluster: str,
    broker: str | None,
    seconds: float,
    interval_s: float = 5.0,
) -> Collected:
    """Read every ``interval_s`` for ``seconds`` (at least once) into ``out``.

    Args:
        broker: the broker's id in the samples; ``None``: its node id, read
            from the broker (:func:`broker_id`).

    Raises:
        AnalyticsError: the broker's id cannot be read; the reader's errors.
    """
    read_broker = broker is None
    name = broker_id(read) if broker is None else broker
    deadline = time.monotonic() + seconds
    written = 0
    while True:
        start = time.monotonic()
        readings = read(QUOTA_PATTERNS, QUOTA_ATTRIBUTES)
        records = usage_records(readings, cluster=cluster, broker=name, now=datetime.now(UTC))
        written += write_jsonl(records, out)
        out.flush()
        if time.monotonic() + interval_s > deadline:
            return Collected(written, name, read_broker)
        time.sleep(max(0.0, interval_s - (time.monotonic() - start)))
