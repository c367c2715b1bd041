"""Kafka's ``JmxTool`` with ``--report-format tsv`` (``kafka-jmx.sh
--report-format tsv``): per interval a ``time`` line, then one
``<ObjectName>:<attribute><TAB><value>`` line per attribute. Unlike the
default CSV its names survive a JMX-quoted client id (``"app:1,x\\*y"``).
Like it, it names neither cluster nor broker: ``--default-cluster`` and
``--broker`` say them. Files: ``*.tsv``.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from quotaform.analytics.sources.base import ReadOptions, Records, Source
from quotaform.analytics.sources.jmxtool import (
    jmx_metric,
    jmxtool_time,
    mbean_row,
    needs_cluster,
)
from quotaform.analytics.sources.text import OPEN, bounded_lines
from quotaform.analytics.usage import Rejections
from quotaform.inputs.files import open_input
from quotaform.kafka.metrics import parse_object_name

__all__ = ["SOURCE"]


def _records(path: Path, options: ReadOptions, skipped: Rejections) -> Records:
    cluster, broker = needs_cluster(path, options)
    fh, _ = open_input(path, OPEN)
    with io.TextIOWrapper(fh, encoding="utf-8", errors="replace", newline="") as text:
        when = None
        rows = csv.reader(bounded_lines(text, []), delimiter="\t", quoting=csv.QUOTE_NONE)
        for number, row in enumerate(rows, 1):
            if len(row) != 2:
                if row:
                    yield f"{path}:{number}", f"line: {len(row)} fields, expected NAME<TAB>VALUE"
                continue
            name, value = row
            if name == "time":
                when = jmxtool_time(value)
                continue
            object_name, _, attribute = name.rpartition(":")
            try:
                _, props = parse_object_name(object_name)
            except ValueError:
                skipped.skipped[f"unreadable name: {name}"] += 1
                continue
            metric = jmx_metric(props.get("type", ""), attribute)
            if metric is None:
                skipped.skipped[f"not a quota usage metric: {props.get('type')}:{attribute}"] += 1
                continue
            record = mbean_row(props, metric, cluster=cluster, broker=broker)
            yield f"{path}:{number}", {**record, "timestamp": when, "value": value}


SOURCE = Source(
    name="jmxtool-tsv",
    suffixes=(".tsv",),
    sniff=lambda name, head: name.endswith(".tsv") and head().startswith(b"time\t"),
    records=_records,
    describe="Kafka's JmxTool --report-format tsv",
)
