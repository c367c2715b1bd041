"""``quotaform analyze collect``'s wiring: the product collector
(:mod:`quotaform.analytics.sources.collector`) reading a broker's MBeans
through Kafka's JmxTool (:func:`quotaform.sandbox.jmx.read_mbeans`, run
from the jars quotaform keeps). Here, above both, which know nothing of
each other."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import IO, Any

from quotaform.analytics.sources.collector import (
    QUOTA_ATTRIBUTES,
    QUOTA_PATTERNS,
    Collected,
    MBeanReader,
    collect,
    usage_records,
)
from quotaform.sandbox.jmx import read_mbeans

__all__ = ["QUOTA_PATTERNS", "collect_jmx", "jmx_reader", "read_usage_once"]


def jmx_reader(port: int) -> MBeanReader:
    """A reader of the MBeans on a loopback JMX port (JmxTool, one run per read)."""

    def read(
        patterns: Sequence[str], attributes: Sequence[str]
    ) -> Mapping[str, tuple[Mapping[str, str], Mapping[str, float]]]:
        return {
            name: (reading.properties, reading.values)
            for name, reading in read_mbeans(port, patterns, attributes).items()
        }

    return read


def read_usage_once(port: int, *, cluster: str, broker: str) -> list[dict[str, Any]]:
    """One read of every quota MBean: generic usage records, timestamped now."""
    from datetime import UTC, datetime

    readings = jmx_reader(port)(QUOTA_PATTERNS, QUOTA_ATTRIBUTES)
    return usage_records(readings, cluster=cluster, broker=broker, now=datetime.now(UTC))


def collect_jmx(
    port: int,
    out: IO[str],
    *,
    cluster: str,
    broker: str | None,
    seconds: float,
    interval_s: float = 5.0,
) -> Collected:
    """Read every ``interval_s`` for ``seconds`` (at least once) into ``out``
    (:func:`quotaform.analytics.sources.collector.collect`)."""
    return collect(
        jmx_reader(port),
        out,
        cluster=cluster,
        broker=broker,
        seconds=seconds,
        interval_s=interval_s,
    )
