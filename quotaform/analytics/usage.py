"""The usage rows' one set of rules, whatever source they came from.

Every row is checked by the same rules for both engines (:func:`check_row`,
and the same rules as Arrow and Spark column expressions); a row that fails
is counted by reason in :class:`Rejections`, with the first examples named
by file and row, never dropped silently. Metrics that are not quota usage
(``queue-size``, ``tokens``) are counted as skipped. :func:`usage_problem`
says why a run must not go on with what was read. The sources themselves
(generic files, Prometheus answers, JmxTool CSV, ...) are the plug-ins of
:mod:`quotaform.analytics.sources`.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

from quotaform.analytics.exporters import KRAFT_RULES, STRIMZI_RULES
from quotaform.analytics.model import UsageRow
from quotaform.inputs.excerpt import excerpt
from quotaform.kafka.entity import escape_unprintable
from quotaform.kafka.keys import METRICS, QUOTA_KEYS
from quotaform.kafka.metrics import ISO_TIMESTAMP

__all__ = [
    "EXAMPLES_KEPT",
    "NAIVE_TIME_NOTE",
    "LabelMap",
    "Rejections",
    "check_row",
    "note_line",
    "one_per_series_time",
    "parse_timestamp",
    "parse_value",
    "usage_problem",
    "write_jsonl",
]

#: Rejected rows named individually in reports; the rest are counted.
EXAMPLES_KEPT = 10
#: Said (a ``Note:``) when usage files hold timestamps without a time zone;
#: counted in files, the other notes in series.
NAIVE_TIME_NOTE = (
    "timestamps without a time zone (TIMESTAMP_NTZ, or a naive Parquet timestamp) were "
    "taken as UTC"
)


def note_line(note: str, count: int) -> str:
    """A note of :attr:`Rejections.notes` as the reports say it, with its
    count (files for :data:`NAIVE_TIME_NOTE`, else series)."""
    unit = "file" if note == NAIVE_TIME_NOTE else "series"
    plural = "s" if unit == "file" and count != 1 else ""
    return f"{note} ({count:,} {unit}{plural})"


@dataclass
class Rejections:
    """Rows that could not be used: counted by reason, the first named; and
    what else the reading found.

    Attributes:
        count, by_reason, examples: rejected rows (``examples``: the first
            :data:`EXAMPLES_KEPT`, ``file:row: reason``).
        skipped: series that are not quota usage (``queue-size``, a
            listener's connection rate), by reason.
        unusable: series that are quota usage but cannot be read (tags
            folded into the name, no ``__name__``), by reason: the analysis
            refuses to run on a partial picture; ``unusable_names``: the
            first of them.
        matched: series read, by ``name -> metric (convention)``.
        notes: what was assumed or is worth knowing (a cluster assumed,
            old exporter rules), by text; counts are series.
        duplicates: rows of a (series, timestamp) already read, counted once.
        files: usage files read, by layout (``generic``, ``prometheus``, ...);
            ``file_names``: the first of them.
        outside_range: usable rows left out by ``--since`` / ``--until``.
    """

    count: int = 0
    by_reason: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    unusable: Counter[str] = field(default_factory=Counter)
    unusable_names: list[str] = field(default_factory=list)
    matched: Counter[str] = field(default_factory=Counter)
    notes: Counter[str] = field(default_factory=Counter)
    duplicates: int = 0
    files: Counter[str] = field(default_factory=Counter)
    file_names: list[str] = field(default_factory=list)
    outside_range: int = 0

    def read_file(self, where: object, layout: str) -> None:
        """Count one usage file read (``where``: its path or URI)."""
        self.files[layout] += 1
        if len(self.file_names) < EXAMPLES_KEPT:
            self.file_names.append(escape_unprintable(str(where)))

    def reject(self, where: str, reason: str) -> None:
        """Count one rejected row (``where``: ``file:row``)."""
        self.count += 1
        self.by_reason[reason.split(":", 1)[0]] += 1
        if len(self.examples) < EXAMPLES_KEPT:
            self.examples.append(f"{where}: {reason}")

    def merge(self, other: Rejections) -> None:
        """Add ``other``'s counts and examples."""
        self.count += other.count
        self.by_reason.update(other.by_reason)
        self.skipped.update(other.skipped)
        self.unusable.update(other.unusable)
        self.unusable_names += other.unusable_names[: EXAMPLES_KEPT - len(self.unusable_names)]
        self.matched.update(other.matched)
        self.notes.update(other.notes)
        self.duplicates += other.duplicates
        self.files.update(other.files)
        self.file_names += other.file_names[: EXAMPLES_KEPT - len(self.file_names)]
        self.outside_range += other.outside_range
        room = EXAMPLES_KEPT - len(self.examples)
        self.examples += other.examples[: max(room, 0)]


@dataclass(frozen=True, slots=True)
class LabelMap:
    """How Prometheus series map to usage rows.

    Attributes:
        cluster: the label holding the cluster's name (default ``cluster``).
        broker: the label holding the broker (default ``instance``).
        default_cluster: the cluster of series without the cluster label
            (``--default-cluster``); ``None``: ``assumed_cluster``, else such
            series are rejected.
        assumed_cluster: the one configured cluster, taken for series
            without the cluster label when ``default_cluster`` is not given
            (said in :attr:`Rejections.notes`).
        metric: ``--metric``: the usage metric of series without ``__name__``.
    """

    cluster: str = "cluster"
    broker: str = "instance"
    default_cluster: str | None = None
    assumed_cluster: str | None = None
    metric: str | None = None


# ----------------------------------------------------------------- checking

_ISO = re.compile(ISO_TIMESTAMP)


def _timestamp(raw: object) -> datetime | None:
    if isinstance(raw, datetime):
        return raw if raw.tzinfo else raw.replace(tzinfo=UTC)
    if not isinstance(raw, str) or not _ISO.match(raw):
        return None
    text = raw.replace(" ", "T", 1)
    try:
        parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        return None
    return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _value(raw: object) -> float | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, str):
        try:
            return float(raw.strip())
        except ValueError:
            return None
    return None


def parse_timestamp(raw: object) -> datetime | None:
    """``check_row``'s reading of a time: a datetime (naive: UTC) or ISO-8601
    text; ``None`` when it is neither."""
    return _timestamp(raw)


def parse_value(raw: object) -> float | None:
    """``check_row``'s reading of a value: a number or numeric text (not a
    boolean) as a float; ``None`` when it is neither."""
    return _value(raw)


def check_row(record: Mapping[str, Any]) -> UsageRow | str:
    """A generic usage record as a :class:`UsageRow`, or why it cannot be
    one (``"field: reason"``). Text (CSV) and typed (JSON Lines, Parquet)
    values are both accepted; ``user``/``client_id`` missing or null read as
    empty tags."""
    for name in ("cluster", "broker"):
        value = record.get(name)
        if not isinstance(value, str) or not value:
            return f"{name}: missing or empty"
    metric = record.get("metric")
    if not isinstance(metric, str) or metric not in METRICS:
        return f"metric: {excerpt(metric, quoted=False)} is not a usage metric"
    timestamp = _timestamp(record.get("timestamp"))
    if timestamp is None:
        return f"timestamp: {excerpt(record.get('timestamp'))} is not an ISO-8601 time"
    value = _value(record.get("value"))
    if value is None:
        return f"value: {excerpt(record.get('value'))} is not a number"
    if math.isinf(value):
        # a rate or a time is never infinite: an overflowing number (400+ digits)
        return f"value: {excerpt(record.get('value'))} is not a finite number"
    user = record.get("user") or ""
    client_id = record.get("client_id") or ""
    if not isinstance(user, str) or not isinstance(client_id, str):
        return "user: expected text"
    ip = record.get("ip") or None
    is_ip = "ip" in QUOTA_KEYS[METRICS[metric][0]].entity_types
    if is_ip and not isinstance(ip, str):
        return f"ip: {metric} needs the ip tag"
    if not is_ip and ip is not None:
        return f"ip: only connection metrics carry an ip, not {metric}"
    return UsageRow(
        cluster=record["cluster"],
        broker=record["broker"],
        timestamp=timestamp,
        metric=metric,
        user=user,
        client_id=client_id,
        ip=ip,
        value=value,
    )


# ----------------------------------------------------------------- nothing usable


def _most(counter: Counter[str], shown: int = 3) -> str:
    items = counter.most_common(shown)
    more = len(counter) - len(items)
    text = "; ".join(f"{reason} ({count:,} series)" for reason, count in items)
    return text + (f"; and {more} more" if more > 0 else "")


def usage_problem(rows: int, rejected: Rejections, labels: LabelMap) -> str | None:
    """Why an analysis must not run on what was read (the one ``Error:``
    line, saying what was seen and what to do), ``None`` when it may.

    It may not when series hold quota usage that cannot be read (the
    picture would be partial: :attr:`Rejections.unusable`), or when no row
    is usable: no cluster label and no ``--default-cluster``, no quota
    series at all (exporter rules that export none), every row rejected.

    Args:
        rows: usable usage rows (configured clusters, in the time range).
        rejected: what the reading counted.
        labels: the label mapping used (named in the advice).
    """
    if rejected.unusable:
        names = ", ".join(rejected.unusable_names[:3])
        more = sum(rejected.unusable.values()) - min(len(rejected.unusable_names), 3)
        shown = f"{names}{f' and {more:,} more' if more > 0 else ''}"
        return (
            f"usage series hold quota metrics quotaform cannot read ({shown}): "
            f"{_most(rejected.unusable)}"
        )
    if rows:
        return None
    if rejected.by_reason.get("cluster") and not labels.default_cluster:
        return (
            f"no usable usage row: {rejected.by_reason['cluster']:,} row(s) have no "
            f"{labels.cluster!r} label (or name an unconfigured cluster): give "
            "--default-cluster NAME for series without it, or --cluster-label LABEL"
        )
    if rejected.count:
        reasons = ", ".join(f"{k}: {v:,}" for k, v in rejected.by_reason.most_common())
        first = rejected.examples[0] if rejected.examples else ""
        return f"no usable usage row: {rejected.count:,} rejected ({reasons}); first: {first}"
    if rejected.outside_range:
        return (
            f"no usable usage row in the time range (--since / --until): all "
            f"{rejected.outside_range:,} usable row(s) are outside it"
        )
    if rejected.files and not rejected.files.get("prometheus"):
        count = sum(rejected.files.values())
        others = f" and {count - 3:,} more" if count > 3 else ""
        names = ", ".join(rejected.file_names[:3]) + others
        return f"no usage row in the usage: {names} hold(s) none"
    if not rejected.matched:
        seen = (
            f"only other series ({_most(rejected.skipped)})"
            if rejected.skipped
            else "no series at all"
        )
        return (
            f"no quota usage series in the usage: {seen}. The exporter rules export no "
            "client-quota metrics (Strimzi's kafka-metrics.yaml exports none): add "
            f"{STRIMZI_RULES} (Strimzi) or {KRAFT_RULES} (jmx_exporter) to the exporter's rules"
        )
    return "no usable usage row in the time range (--since / --until)"


def _rank(value: float) -> float:
    return -math.inf if math.isnan(value) else value


def one_per_series_time(rows: Sequence[UsageRow]) -> list[UsageRow]:
    """``rows`` with one row per (series, timestamp): where a pair repeats
    (the same series in two files, overlapping exports) the largest value
    is kept (NaN only when every value is NaN), in the order first read.
    The usage table has one row per series and time
    (``schemas/usage.schema.json``); both engines keep the same row."""
    kept: dict[tuple[Any, ...], int] = {}
    out: list[UsageRow] = []
    for row in rows:
        key = (row.cluster, row.broker, row.timestamp, row.metric, row.user, row.client_id, row.ip)
        at = kept.get(key)
        if at is None:
            kept[key] = len(out)
            out.append(row)
        elif _rank(row.value) > _rank(out[at].value):
            out[at] = row
    return out


def write_jsonl(records: Iterable[Mapping[str, Any]], out: IO[str]) -> int:
    """Write generic usage records as JSON Lines (timestamps as ISO-8601 UTC);
    returns the count."""
    count = 0
    for record in records:
        data = dict(record)
        ts = data.get("timestamp")
        if isinstance(ts, datetime):
            data["timestamp"] = ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        value = data.get("value")
        if isinstance(value, float) and not math.isfinite(value):
            data["value"] = (
                "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
            )
        out.write(json.dumps(data, ensure_ascii=False) + "\n")
        count += 1
    return count
