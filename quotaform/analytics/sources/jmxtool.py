"""Kafka's ``JmxTool`` CSV (``kafka-jmx.sh``, its default output): a header
of quoted ``"time"`` then ``"<ObjectName>:<attribute>"``, then one row per
interval. It names neither cluster nor broker: ``--default-cluster`` and
``--broker`` say them.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from quotaform.analytics.sources.base import ReadOptions, Records, Source
from quotaform.analytics.sources.text import LINE_TOO_LONG, OPEN, bounded_lines
from quotaform.analytics.usage import Rejections, parse_timestamp
from quotaform.errors import AnalyticsError
from quotaform.inputs.files import open_input
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.metrics import parse_object_name

__all__ = ["SOURCE", "jmx_metric", "jmxtool_rows", "jmxtool_time", "mbean_row", "needs_cluster"]


def _jmx_names() -> dict[tuple[str, str], str]:
    names: dict[tuple[str, str], str] = {}
    for spec in QUOTA_KEYS.values():
        names[(spec.sensor, spec.metric)] = spec.usage_metric
        if spec.throttle_metric is not None:
            names[(spec.sensor, "throttle-time")] = spec.throttle_metric
    return names


_JMX = _jmx_names()


def jmx_metric(sensor: str, attribute: str) -> str | None:
    """The usage metric of an MBean attribute (``("Produce", "byte-rate")`` ->
    ``produce-byte-rate``), ``None`` for attributes that are not quota usage."""
    return _JMX.get((sensor, attribute))


def mbean_row(
    props: Mapping[str, str], metric: str, *, cluster: str, broker: str
) -> dict[str, Any]:
    """A usage row of an MBean's attribute (its key properties and the usage
    metric it holds), tags exactly as the MBean carries them; the caller adds
    ``timestamp`` and ``value``."""
    return {
        "cluster": cluster,
        "broker": broker,
        "metric": metric,
        "user": props.get("user", ""),
        "client_id": props.get("client-id", ""),
        "ip": props.get("ip"),
    }


_HEADER_SPLIT = re.compile(r'","(?=[\w.]+:)')


def jmxtool_rows(
    path: Path, *, cluster: str | None, broker: str | None, skipped: Rejections
) -> Records:
    """Generic records of JmxTool's default CSV output. The header is split
    at ``","`` before an ObjectName, since a JMX-quoted client id leaves
    inner quotes unescaped.

    Raises:
        AnalyticsError: no ``--default-cluster`` / ``--broker`` (JmxTool output
            names neither), or a header that is not JmxTool's.
    """
    cluster, broker = needs_cluster(path, ReadOptions(cluster=cluster, broker=broker))
    fh, _ = open_input(path, OPEN)
    with io.TextIOWrapper(fh, encoding="utf-8", errors="replace", newline="") as text:
        too_long: list[int] = []
        lines = bounded_lines(text, too_long)
        header = next(lines, "").rstrip("\r\n")
        if too_long:
            raise AnalyticsError(f"{path}:1: header: {LINE_TOO_LONG}")
        columns = _HEADER_SPLIT.split(header.strip().strip('"'))
        if not columns or columns[0] != "time":
            raise AnalyticsError(
                f'{path}:1: header: expected "time", then "<ObjectName>:<attribute>"'
            )
        parsed: list[dict[str, Any] | None] = [None]
        for column in columns[1:]:
            object_name, _, attribute = column.rpartition(":")
            try:
                _, props = parse_object_name(object_name)
            except ValueError:
                parsed.append(None)
                skipped.skipped[f"unreadable column: {column}"] += 1
                continue
            metric = _JMX.get((props.get("type", ""), attribute))
            if metric is None:
                skipped.skipped[f"not a quota usage metric: {props.get('type')}:{attribute}"] += 1
                parsed.append(None)
                continue
            parsed.append(mbean_row(props, metric, cluster=cluster, broker=broker))
        for number, line in enumerate(lines, 2):
            if too_long:
                yield f"{path}:{too_long.pop(0)}", LINE_TOO_LONG
                continue
            cells = line.rstrip("\r\n").split(",")
            if len(cells) != len(columns):
                yield f"{path}:{number}", f"row: {len(cells)} values for {len(columns)} columns"
                continue
            when = jmxtool_time(cells[0])
            for column, cell in zip(parsed[1:], cells[1:], strict=True):
                if column is not None:
                    yield f"{path}:{number}", {**column, "timestamp": when, "value": cell}


def needs_cluster(path: Path, options: ReadOptions) -> tuple[str, str]:
    """The cluster and broker of a JmxTool file (which names neither).

    Raises:
        AnalyticsError: no ``--default-cluster`` / ``--broker``.
    """
    if not options.cluster or not options.broker:
        raise AnalyticsError(
            f"{path}: JmxTool output names no cluster or broker: give --default-cluster NAME "
            "and --broker ID"
        )
    return options.cluster, options.broker


def jmxtool_time(text: str) -> datetime | None:
    """A JmxTool ``time``: ISO-8601 (``--date-format``) or epoch milliseconds."""
    when = parse_timestamp(text)
    if when is not None:
        return when
    try:
        return datetime.fromtimestamp(int(text) / 1000, UTC)
    except ValueError:
        return None


def _records(path: Path, options: ReadOptions, skipped: Rejections) -> Records:
    return jmxtool_rows(path, cluster=options.cluster, broker=options.broker, skipped=skipped)


SOURCE = Source(
    name="jmxtool",
    suffixes=(".csv",),
    sniff=lambda name, head: name.endswith(".csv") and head().startswith(b'"time"'),
    records=_records,
    describe="Kafka's JmxTool CSV",
)
