"""Usage inputs: what users really have, read into the usage table.

* **generic** (the contract of ``schemas/usage.schema.json``): Parquet, CSV
  or JSON Lines with the columns ``cluster``, ``broker``, ``timestamp`` (UTC;
  ISO-8601 text in CSV/JSONL), ``metric``, ``user``, ``client_id``, ``ip``,
  ``value``;
* **prometheus**: ``query_range`` JSON (matrix) exports of the JMX exporter's
  quota metrics, in either naming convention (``kafka_server_produce_byte_rate
  {user, client_id}`` or ``kafka_server_quota_byte_rate{resource, user,
  clientId}``), streamed series by series (ijson) into JSON Lines, never read
  as one document; labels map to (cluster, broker) by a configurable
  :class:`LabelMap`; JMX-quoted label values are unquoted;
* **jmxtool**: Kafka's ``JmxTool`` CSV (its default output).

Every row is checked (the same rules for both engines, :func:`check_row`); a
row that fails is counted by reason in :class:`Rejections`, with the first
examples named by file and row, never dropped silently. Metrics that are not
quota usage (``queue-size``, ``tokens``) are counted as skipped.
"""

from __future__ import annotations

import csv
import enum
import io
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from quotaform.analytics.exporters import (
    KRAFT_RULES,
    OLD_RULES_NOTE,
    STRIMZI_RULES,
    decode_series,
)
from quotaform.analytics.model import USAGE_COLUMNS, UsageRow
from quotaform.errors import AnalyticsError, InputError
from quotaform.inputs.depth import DepthScanner, check_depth
from quotaform.inputs.excerpt import excerpt
from quotaform.inputs.files import is_regular_file, open_input, shown
from quotaform.inputs.jsondoc import BLOCK_BYTES, json_lines, loads_json
from quotaform.inputs.limits import LIMITS, MAX_LINE_BYTES, Limits
from quotaform.kafka.entity import escape_unprintable
from quotaform.kafka.keys import METRICS, QUOTA_KEYS
from quotaform.kafka.metrics import ISO_TIMESTAMP, parse_object_name

__all__ = [
    "EXAMPLES_KEPT",
    "LabelMap",
    "Rejections",
    "UsageFormat",
    "check_csv_header",
    "check_row",
    "detect_format",
    "generic_records",
    "jmx_metric",
    "jmxtool_rows",
    "json_line_kind",
    "one_per_series_time",
    "parse_timestamp",
    "parse_value",
    "prometheus_rows",
    "read_usage",
    "usage_clusters",
    "usage_files",
    "usage_problem",
    "write_jsonl",
]

#: Rejected rows named individually in reports; the rest are counted.
EXAMPLES_KEPT = 10


class UsageFormat(enum.StrEnum):
    """How a usage file is laid out (``--usage-format``; ``auto`` detects it)."""

    auto = "auto"
    generic = "generic"
    prometheus = "prometheus"
    jmxtool = "jmxtool"


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
    if rejected.files and not rejected.files.get(UsageFormat.prometheus.value):
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


# ----------------------------------------------------------------- files


def usage_files(
    paths: Sequence[Path],
    skipped: Rejections | None = None,
    *,
    limits: Limits = LIMITS["usage"],
) -> list[Path]:
    """Files to read: given files, and the data files in given directories
    (sorted; Parquet, CSV, JSON Lines and JSON). A ``*.json`` file in a
    directory is read only when it is a Prometheus ``query_range`` answer
    or JSON Lines (:func:`detect_format`); others are left out, counted in
    ``skipped`` when given.

    A member of a directory that is not a regular file (a FIFO) is left out
    and counted in ``skipped``; a given path must be a regular file or a
    directory (:func:`quotaform.inputs.files.open_input`), and every file at
    most ``limits.max_bytes``.

    Raises:
        AnalyticsError: a path does not exist or is not a regular file or a
            directory, a directory holds no data file, a ``*.json`` file
            named is neither of those, a file is larger than the limit.
    """
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            members = []
            for p in sorted(path.rglob("*")):
                if p.suffix not in (".parquet", ".csv", ".jsonl", ".ndjson", ".json") or any(
                    part.startswith((".", "_")) for part in p.relative_to(path).parts
                ):
                    continue
                if is_regular_file(p):
                    members.append(p)
                elif skipped is not None and not p.is_dir():
                    skipped.skipped[f"{shown(p)}: not a regular file: skipped"] += 1
            kept = [p for p in members if p.suffix != ".json" or _json_kind(p) is not None]
            if skipped is not None:
                for other in sorted(set(members) - set(kept)):
                    skipped.skipped[
                        f"{shown(other)}: neither a Prometheus query_range answer nor JSON Lines"
                    ] += 1
            if not kept:
                raise AnalyticsError(
                    f"{shown(path)}: no usage files (*.parquet, *.csv, *.jsonl, *.json)"
                )
            found += kept
        else:
            try:
                fh, _ = open_input(path, limits)
            except InputError as exc:
                raise AnalyticsError(str(exc)) from None
            fh.close()
            if path.suffix == ".json" and _json_kind(path) is None:
                raise AnalyticsError(
                    f'{shown(path)}: neither a Prometheus query_range answer ({{"status": ..., '
                    '"data": {"resultType": "matrix", ...}}) nor JSON Lines usage rows'
                )
            found.append(path)
    for path in found:
        _check_size(path, limits)
    return found


def _check_size(path: Path, limits: Limits) -> None:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise AnalyticsError(f"{shown(path)}: cannot read the usage file: {exc.strerror}") from None
    if size > limits.max_bytes:
        raise AnalyticsError(
            f"{shown(path)}: larger than {limits.size_text()}, the limit for a {limits.kind} "
            f"(raise it with {limits.overridden_by})"
        )


#: How the usage readers open a file: its size was judged by :func:`usage_files`.
_OPEN = Limits("usage file", 1 << 62)


#: Bytes of a ``*.json`` file read to tell its kind.
_SNIFF_BYTES = 64 * 1024
#: The bounds of one line read to tell a file's kind.
_LINE = LIMITS["usage"]


_PROMETHEUS_HEAD = re.compile(r'^\s*\{\s*"(status|data)"\s*:')


def json_line_kind(line: str) -> UsageFormat | None:
    """What the first line of a ``*.json`` file says it is: ``prometheus``
    for a ``query_range`` answer (a JSON object opening with ``status`` or
    ``data``), ``generic`` for JSON Lines (one object holding usage
    columns), ``None`` for anything else (other JSON, or too little to tell)."""
    try:
        data = line.encode("utf-8")
        check_depth(data, "(first line)", _LINE, lines=True)
        record = loads_json(line, "(first line)", _LINE)
    except (InputError, UnicodeError):
        return UsageFormat.prometheus if _PROMETHEUS_HEAD.match(line) else None
    if isinstance(record, dict):
        if "data" in record or "status" in record:
            return UsageFormat.prometheus
        return UsageFormat.generic if set(record) & set(USAGE_COLUMNS) else None
    return None


_FIRST_KEY = re.compile(rb'\A\s*\{\s*"((?:[^"\\]|\\.){0,64})"')


def _json_kind(path: Path) -> UsageFormat | None:
    """:func:`json_line_kind` of a local file; a document whose first line
    says too little (pretty-printed) is told by its first key. Only the
    first :data:`_SNIFF_BYTES` are read."""
    try:
        fh, _ = open_input(path, _OPEN)
    except InputError:
        return None
    with fh:
        head = fh.read(_SNIFF_BYTES)
    head = head.removeprefix(b"\xef\xbb\xbf")
    first = head.lstrip(b" \t\r\n").split(b"\n", 1)[0]
    if len(first) < _SNIFF_BYTES // 2:
        kind = json_line_kind(first.decode("utf-8", errors="replace"))
        if kind is not None or not first.startswith(b"{"):
            return kind
    key = _FIRST_KEY.match(head)
    if key is None:
        return None
    return UsageFormat.prometheus if key.group(1) in (b"status", b"data") else None


def detect_format(path: Path) -> UsageFormat:
    """``prometheus`` for a ``query_range`` JSON document, ``jmxtool`` for a
    CSV whose header starts with ``"time"``, else ``generic`` (a ``*.json``
    file of JSON Lines included)."""
    if path.suffix == ".json":
        return _json_kind(path) or UsageFormat.generic
    if path.suffix == ".csv":
        fh, _ = open_input(path, _OPEN)
        with fh:
            if fh.read(6) == b'"time"':
                return UsageFormat.jmxtool
    return UsageFormat.generic


def generic_records(path: Path) -> Iterator[tuple[str, Mapping[str, Any] | str]]:
    """``(file:row, record or why it is unreadable)`` of a generic file
    (Parquet, CSV or JSON Lines), row by row; ``file:row`` counts Parquet
    rows from 1, CSV records from 2 (after the header), JSON lines from 1.

    Raises:
        AnalyticsError: a CSV header lacks a usage column.
    """
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        fh, _ = open_input(path, _OPEN)
        with fh:
            number = 0
            try:
                for batch in pq.ParquetFile(fh).iter_batches(batch_size=1 << 16):
                    for record in _parquet_rows(batch):
                        number += 1
                        yield f"{path}:{number}", record
            except (pa.ArrowException, OSError) as exc:
                first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
                raise AnalyticsError(
                    f"{shown(path)}: not a Parquet file quotaform can read "
                    f"({first or type(exc).__name__}) after {number:,} row(s)"
                ) from None
    elif path.suffix == ".csv":
        yield from _csv_records(path)
    else:
        for line in json_lines(path, _OPEN):
            where = f"{path}:{line.number}"
            if line.problem is not None:
                yield where, line.problem
            else:
                yield (
                    where,
                    line.value if isinstance(line.value, dict) else "line: not a JSON object",
                )


def check_csv_header(path: Path, header: Sequence[str]) -> None:
    """Refuse a generic CSV file whose header lacks a usage column.

    Raises:
        AnalyticsError: the missing columns, with the file and line 1.
    """
    missing = [c for c in USAGE_COLUMNS if c not in header]
    if missing:
        raise AnalyticsError(
            f"{path}:1: header: missing column(s) {', '.join(missing)} "
            f"(expected {', '.join(USAGE_COLUMNS)})"
        )


def _parquet_rows(batch: Any) -> Iterator[Mapping[str, Any] | str]:
    """A Parquet batch's rows; a row whose text is not UTF-8 is a problem of
    that row (Arrow converts a batch at once: only then row by row)."""
    try:
        yield from batch.to_pylist()
    except UnicodeDecodeError:
        for i in range(batch.num_rows):
            try:
                yield batch.slice(i, 1).to_pylist()[0]
            except UnicodeDecodeError:
                yield "row: a text column holds bytes that are not UTF-8"


def _csv_records(path: Path) -> Iterator[tuple[str, Mapping[str, Any] | str]]:
    """:func:`generic_records` of a CSV file: lines longer than
    :data:`~quotaform.inputs.limits.MAX_LINE_BYTES` and rows the csv module
    refuses are problems of their row, never a reason to stop."""
    too_long: list[int] = []
    fh, _ = open_input(path, _OPEN)
    with fh:
        text = io.TextIOWrapper(fh, encoding="utf-8", errors="replace", newline="")
        reader = csv.DictReader(_bounded_lines(text, too_long))
        try:
            check_csv_header(path, reader.fieldnames or [])
        except csv.Error as exc:
            raise AnalyticsError(f"{path}:1: header: not CSV ({exc})") from None
        number = 1
        while True:
            try:
                record = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                number += 1
                yield f"{path}:{number}", f"row: not CSV ({exc})"
                continue
            while too_long:
                yield f"{path}:{too_long.pop(0)}", _LINE_TOO_LONG
            number += 1
            yield f"{path}:{number}", record
        while too_long:
            yield f"{path}:{too_long.pop(0)}", _LINE_TOO_LONG


_LINE_TOO_LONG = (
    f"line: longer than {MAX_LINE_BYTES // 1024} KiB, the limit for a line of a usage file"
)


def _bounded_lines(text: IO[str], too_long: list[int]) -> Iterator[str]:
    """The lines of ``text``, none longer than :data:`MAX_LINE_BYTES`
    characters held at once: a longer line is skipped (its number put in
    ``too_long``) and an empty line given in its place."""
    number = 0
    while True:
        line = text.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_LINE_BYTES and not line.endswith("\n"):
            too_long.append(number)
            while (rest := text.readline(MAX_LINE_BYTES)) and not rest.endswith("\n"):
                pass
            yield "\n"
            continue
        yield line


def read_usage(
    paths: Sequence[Path],
    *,
    fmt: UsageFormat = UsageFormat.auto,
    labels: LabelMap | None = None,
    cluster: str | None = None,
    broker: str | None = None,
) -> tuple[list[UsageRow], Rejections]:
    """Every usable row of every file, and what was rejected or skipped.

    Args:
        fmt: the files' format, or ``auto`` (:func:`detect_format`).
        labels: Prometheus label mapping.
        cluster, broker: for JmxTool files (which carry neither).

    Raises:
        AnalyticsError: a file cannot be read at all (a missing CSV column,
            not a ``query_range`` document), naming it.
    """
    rows: list[UsageRow] = []
    rejected = Rejections()
    for path in usage_files(paths, rejected):
        kind = detect_format(path) if fmt is UsageFormat.auto else fmt
        if kind is UsageFormat.prometheus:
            records: Iterable[tuple[str, Mapping[str, Any] | str]] = prometheus_rows(
                path, labels or LabelMap(), rejected
            )
        elif kind is UsageFormat.jmxtool:
            records = jmxtool_rows(path, cluster=cluster, broker=broker, skipped=rejected)
        else:
            records = generic_records(path)
        for where, record in records:
            checked = check_row(record) if not isinstance(record, str) else record
            if isinstance(checked, str):
                rejected.reject(where, checked)
            else:
                rows.append(checked)
    return rows, rejected


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


def usage_clusters(
    paths: Sequence[Path],
    *,
    fmt: UsageFormat = UsageFormat.auto,
    labels: LabelMap | None = None,
    cluster: str | None = None,
    broker: str | None = None,
    rows_per_file: int = 10_000,
) -> set[str]:
    """The cluster names in the first ``rows_per_file`` rows of each usage
    file: enough to name a live cluster after the usage, without reading it
    all (rows of other clusters are still counted as rejected later)."""
    import itertools

    names: set[str] = set()
    for path in usage_files(paths):
        kind = detect_format(path) if fmt is UsageFormat.auto else fmt
        if kind is UsageFormat.jmxtool:
            if cluster:
                names.add(cluster)
            continue
        records: Iterable[tuple[str, Mapping[str, Any] | str]] = (
            prometheus_rows(path, labels or LabelMap(), Rejections())
            if kind is UsageFormat.prometheus
            else generic_records(path)
        )
        for _, record in itertools.islice(records, rows_per_file):
            if not isinstance(record, str) and record.get("cluster"):
                names.add(str(record["cluster"]))
    return names


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


# ----------------------------------------------------------------- Prometheus


def prometheus_rows(
    path: Path, labels: LabelMap, skipped: Rejections, *, label: str | None = None
) -> Iterator[tuple[str, Mapping[str, Any] | str]]:
    """Generic records of a ``query_range`` export, streamed series by series
    (each series decoded by :func:`quotaform.analytics.exporters.decode_series`;
    what is skipped, unusable, matched or assumed counted in ``skipped``).

    Args:
        label: how rows are named in messages (default: the path).

    Raises:
        AnalyticsError: not a ``query_range`` matrix document.
    """
    import ijson

    name = label or str(path)
    try:
        fh, _ = open_input(path, _OPEN)
    except InputError as exc:
        raise AnalyticsError(str(exc)) from None
    with fh:
        # ijson's prefixes grow with the depth (a 200 KiB answer 100,000 deep
        # took gigabytes): the nesting is measured on the bytes first.
        scanner = DepthScanner(
            escape_unprintable(name), LIMITS["prometheus-answer"], numbers=True
        )
        try:
            while block := fh.read(BLOCK_BYTES):
                scanner.feed(block)
        except InputError as exc:
            raise AnalyticsError(f"{exc}: not a Prometheus query_range document") from None
        fh.seek(0)
        try:
            status = None
            for prefix, _event, value in ijson.parse(fh):
                if prefix == "status":
                    status = value
                    break
                if prefix == "data.resultType" and value != "matrix":
                    raise AnalyticsError(f"{name}: data.resultType is {value!r}, expected matrix")
            if status not in (None, "success"):
                raise AnalyticsError(f"{name}: status is {status!r}, expected success")
            fh.seek(0)
            for number, series in enumerate(ijson.items(fh, "data.result.item"), 1):
                yield from _series_records(f"{name}: series {number}", series, labels, skipped)
        except ijson.JSONError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise AnalyticsError(
                f"{name}: not a Prometheus query_range document: {first}"
            ) from None


def _series_records(
    where: str, series: Any, labels: LabelMap, skipped: Rejections
) -> Iterator[tuple[str, Mapping[str, Any] | str]]:
    if not isinstance(series, dict) or not isinstance(series.get("metric"), dict):
        yield where, "series: expected {metric, values}"
        return
    tags = series["metric"]
    meaning = decode_series(tags, metric=labels.metric)
    name = str(tags.get("__name__", "")) or "(no __name__)"
    if meaning.metric is None:
        (skipped.unusable if meaning.unusable else skipped.skipped)[meaning.reason] += 1
        if meaning.unusable and len(skipped.unusable_names) < EXAMPLES_KEPT:
            skipped.unusable_names.append(name)
        return
    skipped.matched[f"{name} -> {meaning.metric} ({meaning.convention})"] += 1
    if meaning.convention == "quota-folded":
        skipped.notes[OLD_RULES_NOTE] += 1
    cluster = tags.get(labels.cluster) or labels.default_cluster
    if not cluster and labels.assumed_cluster:
        cluster = labels.assumed_cluster
        skipped.notes[
            f"series without a {labels.cluster!r} label: assumed the one configured cluster "
            f"{cluster!r} (--default-cluster NAME says so)"
        ] += 1
    base = {
        "cluster": cluster,
        "broker": tags.get(labels.broker),
        "metric": meaning.metric,
        "user": meaning.user,
        "client_id": meaning.client_id,
        "ip": meaning.ip,
    }
    values = series.get("values")
    if not isinstance(values, list):
        yield where, "values: expected [[time, value], ...]"
        return
    for i, pair in enumerate(values, 1):
        if not isinstance(pair, list) or len(pair) != 2:
            yield f"{where} sample {i}", "values: expected [time, value]"
            continue
        try:
            when = datetime.fromtimestamp(float(pair[0]), UTC)
        except (TypeError, ValueError, OverflowError):
            yield f"{where} sample {i}", f"timestamp: {pair[0]!r} is not unix seconds"
            continue
        yield f"{where} sample {i}", {**base, "timestamp": when, "value": str(pair[1])}


# ----------------------------------------------------------------- JmxTool


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


_HEADER_SPLIT = re.compile(r'","(?=[\w.]+:)')


def jmxtool_rows(
    path: Path, *, cluster: str | None, broker: str | None, skipped: Rejections
) -> Iterator[tuple[str, Mapping[str, Any] | str]]:
    """Generic records of JmxTool's default CSV output (a header of quoted
    ``"<ObjectName>:<attribute>"``, then one row per interval). The header is
    split at ``","`` before an ObjectName, since a JMX-quoted client id leaves
    inner quotes unescaped.

    Raises:
        AnalyticsError: no ``--default-cluster`` / ``--broker`` (JmxTool output
            names neither).
    """
    if not cluster or not broker:
        raise AnalyticsError(
            f"{path}: JmxTool output names no cluster or broker: give --default-cluster NAME "
            "and --broker ID"
        )
    fh, _ = open_input(path, _OPEN)
    with io.TextIOWrapper(fh, encoding="utf-8", errors="replace", newline="") as text:
        too_long: list[int] = []
        lines = _bounded_lines(text, too_long)
        header = next(lines, "").rstrip("\r\n")
        if too_long:
            raise AnalyticsError(f"{path}:1: header: {_LINE_TOO_LONG}")
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
            parsed.append(
                {
                    "cluster": cluster,
                    "broker": broker,
                    "metric": metric,
                    "user": props.get("user", ""),
                    "client_id": props.get("client-id", ""),
                    "ip": props.get("ip"),
                }
            )
        for number, line in enumerate(lines, 2):
            if too_long:
                yield f"{path}:{too_long.pop(0)}", _LINE_TOO_LONG
                continue
            cells = line.rstrip("\r\n").split(",")
            if len(cells) != len(columns):
                yield f"{path}:{number}", f"row: {len(cells)} values for {len(columns)} columns"
                continue
            when = _timestamp(cells[0]) or _epoch_ms(cells[0])
            for column, cell in zip(parsed[1:], cells[1:], strict=True):
                if column is not None:
                    yield f"{path}:{number}", {**column, "timestamp": when, "value": cell}


def _epoch_ms(text: str) -> datetime | None:
    try:
        return datetime.fromtimestamp(int(text) / 1000, UTC)
    except ValueError:
        return None
