"""``quotaform analyze collect``'s step: a broker's quota MBeans (read with
Kafka's JmxTool from the sandbox's jars) into the usage table, for the
sandbox, demos and end-to-end tests. Here, above both the sandbox and the
analytics, which know nothing of each other.

Each read runs :func:`quotaform.sandbox.jmx.read_mbeans` once (JmxTool
resolves its patterns per run, so groups that appear later are seen), maps
``Produce``/``Fetch``/``Request``/``ControllerMutation`` attributes and the
per-ip ``connection-accept-rate`` to usage metrics, and writes one generic
JSON Lines row per (group, metric): tags exactly as the MBean carries them.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import IO, Any

from quotaform.analytics.usage import jmx_metric, write_jsonl
from quotaform.sandbox.jmx import read_mbeans

__all__ = ["QUOTA_PATTERNS", "collect_jmx", "read_usage_once"]

#: The MBeans of quota groups (and the per-ip connection rates).
QUOTA_PATTERNS = (
    "kafka.server:type=Produce,*",
    "kafka.server:type=Fetch,*",
    "kafka.server:type=Request,*",
    "kafka.server:type=ControllerMutation,*",
    "kafka.server:type=socket-server-metrics,ip=*",
)
_ATTRIBUTES = (
    "byte-rate",
    "throttle-time",
    "request-time",
    "mutation-rate",
    "connection-accept-rate",
    "queue-size",
)


def read_usage_once(port: int, *, cluster: str, broker: str) -> list[dict[str, Any]]:
    """One read of every quota MBean: generic usage records, timestamped now."""
    now = datetime.now(UTC)
    records = []
    for reading in read_mbeans(port, QUOTA_PATTERNS, _ATTRIBUTES).values():
        props = reading.properties
        for attribute, value in reading.values.items():
            metric = jmx_metric(props.get("type", ""), attribute)
            if metric is None:
                continue
            records.append(
                {
                    "cluster": cluster,
                    "broker": broker,
                    "timestamp": now,
                    "metric": metric,
                    "user": props.get("user", ""),
                    "client_id": props.get("client-id", ""),
                    "ip": props.get("ip"),
                    "value": value,
                }
            )
    return records


def collect_jmx(
    port: int,
    out: IO[str],
    *,
    cluster: str,
    broker: str,
    seconds: float,
    interval_s: float = 5.0,
) -> int:
    """Read every ``interval_s`` for ``seconds`` (at least once) into ``out``;
    returns the rows written."""
    deadline = time.monotonic() + seconds
    written = 0
    while True:
        start = time.monotonic()
        written += write_jsonl(read_usage_once(port, cluster=cluster, broker=broker), out)
        out.flush()
        if time.monotonic() + interval_s > deadline:
            return written
        time.sleep(max(0.0, interval_s - (time.monotonic() - start)))
