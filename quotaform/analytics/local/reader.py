"""Usage files into :class:`CodedUsage`: integer-coded series with a time and
a value per sample, and the rows that could not be used.

Parquet is streamed by record batches with only the usage columns; CSV and
JSON Lines by Arrow's streaming readers; every batch is checked as columns
(:func:`~quotaform.analytics.local.checks.check_batch`). Prometheus
``query_range`` and JmxTool files go through the streaming Python parsers of
:mod:`quotaform.analytics.usage` and ``check_row``, in chunks fed into the
same arrays. A CSV or JSON Lines file Arrow cannot read as a table (a short
row, a line that is not a JSON object, ``NaN`` literals, a column whose type
changes) is read again by those Python readers, so its rows are checked
and named as before.

Rejected rows are counted by reason and the first
:data:`~quotaform.analytics.usage.EXAMPLES_KEPT` named ``file:row: field:
message`` in file order, as :func:`quotaform.analytics.usage.read_usage`
names them (the message comes from ``check_row`` itself); rows of clusters
without a configuration are counted after the time filter, as ``analyze``
always counted them.
"""

from __future__ import annotations

import csv
import itertools
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from copy import deepcopy
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from quotaform.analytics.local.checks import REASONS, CheckedBatch, check_batch
from quotaform.analytics.model import USAGE_COLUMNS
from quotaform.analytics.usage import (
    EXAMPLES_KEPT,
    LabelMap,
    Rejections,
    UsageFormat,
    check_row,
    detect_format,
    generic_records,
    jmxtool_rows,
    prometheus_rows,
    usage_files,
)
from quotaform.errors import AnalyticsError

__all__ = ["BATCH_ROWS", "SEPARATOR", "SERIES_PARTS", "CodedUsage", "read_coded_usage"]

#: Rows per record batch read (and per chunk of the Python parsers): large
#: enough that merging each batch's series into the run's dictionary stays
#: cheap, small enough to bound the memory of one batch (~100 MiB).
BATCH_ROWS = 1 << 20
#: Joins a series' parts into one dictionary key (a Kafka name holds no NUL).
SEPARATOR = "\x00"
#: A series key's parts, in order (``ip`` is ``""`` for none).
SERIES_PARTS = ("cluster", "broker", "metric", "user", "client_id", "ip")
_BLOCK_BYTES = 64 << 20


@dataclass
class CodedUsage:
    """The usable usage rows of a run, integer-coded by series.

    Attributes:
        series: one string per series: :data:`SERIES_PARTS` joined by
            :data:`SEPARATOR`; a row's ``code`` indexes it. A series may have
            no row left (its file was read again by the Python readers).
        code: int32 per row.
        timestamp: int64 microseconds since the epoch (UTC) per row.
        value: float64 per row (NaN kept: a throttle time of nothing).
        rows: the row count.
    """

    series: pa.Array
    code: np.ndarray
    timestamp: np.ndarray
    value: np.ndarray

    @property
    def rows(self) -> int:
        """How many usable rows."""
        return len(self.code)


def _micros(when: datetime | None) -> int | None:
    if when is None:
        return None
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    delta = when - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


class _Builder:
    """Accumulates checked batches: the time range, the clusters, the codes."""

    def __init__(
        self,
        clusters: Collection[str],
        since: datetime | None,
        until: datetime | None,
    ) -> None:
        self.clusters = frozenset(clusters)
        self.since = _micros(since)
        self.until = _micros(until)
        self.series = pa.array([], pa.string())
        self.codes: list[np.ndarray] = []
        self.times: list[np.ndarray] = []
        self.values: list[np.ndarray] = []
        self.seen: set[str] = set()
        self.unconfigured = 0
        self.unconfigured_names: list[str] = []

    def mark(self) -> tuple[Any, ...]:
        return (
            len(self.codes),
            set(self.seen),
            self.unconfigured,
            list(self.unconfigured_names),
        )

    def restore(self, mark: tuple[Any, ...]) -> None:
        size, self.seen, self.unconfigured, self.unconfigured_names = mark
        del self.codes[size:], self.times[size:], self.values[size:]

    def add(self, checked: CheckedBatch) -> None:
        keep = checked.reason == 0
        if self.since is not None:
            keep &= checked.timestamp >= self.since
        if self.until is not None:
            keep &= checked.timestamp < self.until
        rows = np.flatnonzero(keep)
        if not len(rows):
            return
        take = pa.array(rows)
        clusters = pc.dictionary_encode(checked.cluster.take(take))
        names = clusters.dictionary.to_pylist()
        self.seen.update(names)
        configured = np.array([n in self.clusters for n in names], dtype=bool)
        cluster_index = clusters.indices.to_numpy(zero_copy_only=False)
        known = configured[cluster_index]
        if not known.all():
            unknown = np.flatnonzero(~known)
            self.unconfigured += len(unknown)
            room = EXAMPLES_KEPT - len(self.unconfigured_names)
            self.unconfigured_names += [names[cluster_index[i]] for i in unknown[:room]]
            rows = rows[known]
            take = pa.array(rows)
        if not len(rows):
            return
        key = pc.binary_join_element_wise(
            *(getattr(checked, part).take(take) for part in SERIES_PARTS), SEPARATOR
        )
        encoded = pc.dictionary_encode(key)
        # The run's dictionary first: its entries keep their codes (first
        # occurrence order), this batch's new series are appended.
        merged = pc.dictionary_encode(pa.concat_arrays([self.series, encoded.dictionary]))
        remap = merged.indices.slice(len(self.series)).to_numpy(zero_copy_only=False)
        self.series = merged.dictionary
        self.codes.append(
            remap[encoded.indices.to_numpy(zero_copy_only=False)].astype(np.int32, copy=False)
        )
        self.times.append(checked.timestamp[rows])
        self.values.append(checked.value[rows])

    def add_rows(self, columns: Mapping[str, list[Any]]) -> None:
        """Rows already checked by ``check_row`` (the Python parsers' chunks)."""
        rows = len(columns["value"])
        if not rows:
            return
        times = pa.array(columns["timestamp"], pa.timestamp("us", "UTC")).cast(pa.int64())
        self.add(
            CheckedBatch(
                reason=np.zeros(rows, dtype=np.int8),
                cluster=pa.array(columns["cluster"], pa.string()),
                broker=pa.array(columns["broker"], pa.string()),
                metric=pa.array(columns["metric"], pa.string()),
                user=pa.array(columns["user"], pa.string()),
                client_id=pa.array(columns["client_id"], pa.string()),
                ip=pa.array(columns["ip"], pa.string()),
                timestamp=times.to_numpy(zero_copy_only=False),
                value=np.array(columns["value"], dtype=np.float64),
            )
        )

    def finish(self, rejected: Rejections) -> CodedUsage:
        if self.unconfigured:
            rejected.count += self.unconfigured
            rejected.by_reason["cluster"] += self.unconfigured
            configured = ", ".join(sorted(self.clusters))
            for name in self.unconfigured_names:
                if len(rejected.examples) < EXAMPLES_KEPT:
                    rejected.examples.append(
                        f"cluster {name}: cluster: no quota configuration for cluster "
                        f"{name!r} (configured: {configured})"
                    )
            if not self.codes:
                raise AnalyticsError(
                    "no usage row belongs to a configured cluster: the usage names "
                    f"{', '.join(sorted(self.seen))}, the configuration "
                    f"{configured} (map Prometheus labels with --cluster-label / "
                    "--default-cluster)"
                )
        return CodedUsage(
            series=self.series,
            code=_joined(self.codes, np.int32),
            timestamp=_joined(self.times, np.int64),
            value=_joined(self.values, np.float64),
        )


def _joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


# ----------------------------------------------------------------- Arrow readers


def _parquet_batches(path: Path) -> Iterator[pa.RecordBatch]:
    import pyarrow.parquet as pq

    file = pq.ParquetFile(path)
    columns = [c for c in USAGE_COLUMNS if c in file.schema_arrow.names]
    yield from file.iter_batches(batch_size=BATCH_ROWS, columns=columns)


def _csv_batches(path: Path) -> Iterator[pa.RecordBatch]:
    import pyarrow.csv as pacsv

    with path.open(encoding="utf-8", newline="") as fh:
        header = next(csv.reader(fh), [])
    missing = [c for c in USAGE_COLUMNS if c not in header]
    if missing:
        raise AnalyticsError(
            f"{path}:1: header: missing column(s) {', '.join(missing)} "
            f"(expected {', '.join(USAGE_COLUMNS)})"
        )
    reader = pacsv.open_csv(
        path,
        read_options=pacsv.ReadOptions(block_size=_BLOCK_BYTES),
        parse_options=pacsv.ParseOptions(newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(
            column_types={c: pa.string() for c in header},
            include_columns=list(USAGE_COLUMNS),
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
    )
    yield from reader


def _jsonl_batches(path: Path) -> Iterator[pa.RecordBatch]:
    import pyarrow.json as pajson

    text = ("cluster", "broker", "timestamp", "metric", "user", "client_id", "ip")
    reader = pajson.open_json(
        path,
        read_options=pajson.ReadOptions(block_size=_BLOCK_BYTES),
        parse_options=pajson.ParseOptions(
            explicit_schema=pa.schema([(c, pa.string()) for c in text]),
            unexpected_field_behavior="infer",
        ),
    )
    yield from reader


def _jsonl_line_numbers(path: Path, records: Sequence[int]) -> dict[int, int]:
    """The line numbers of the given record indices (0-based) of a JSON Lines
    file: blank lines are skipped by both readers but numbered."""
    wanted = set(records)
    found: dict[int, int] = {}
    index = 0
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            if index in wanted:
                found[index] = number
                if len(found) == len(wanted):
                    break
            index += 1
    return found


def _arrow_file(path: Path, kind: str, builder: _Builder, rejected: Rejections) -> None:
    """One Parquet, CSV or JSON Lines file through Arrow.

    Raises:
        pa.ArrowInvalid: Arrow cannot read it as a table (the caller reads it
            with the Python reader instead).
    """
    batches = {"parquet": _parquet_batches, "csv": _csv_batches, "json": _jsonl_batches}[kind]
    offset = 0
    for batch in batches(path):
        checked = check_batch(batch)
        if checked is None:
            _python_records(_records_of(path, kind, batch, offset), builder, rejected)
        else:
            _count_rejected(path, kind, batch, checked, offset, rejected)
            builder.add(checked)
        offset += batch.num_rows


def _records_of(
    path: Path, kind: str, batch: pa.RecordBatch, offset: int
) -> Iterator[tuple[str, Mapping[str, Any] | str]]:
    """A batch's rows as the Python readers' ``(file:row, record)``."""
    first = {"parquet": 1, "csv": 2, "json": 1}[kind]
    records = batch.to_pylist()
    numbers = (
        _jsonl_line_numbers(path, range(offset, offset + len(records)))
        if kind == "json"
        else {offset + i: offset + i + first for i in range(len(records))}
    )
    for i, record in enumerate(records):
        yield f"{path}:{numbers[offset + i]}", record


def _count_rejected(
    path: Path,
    kind: str,
    batch: pa.RecordBatch,
    checked: CheckedBatch,
    offset: int,
    rejected: Rejections,
) -> None:
    counts = np.bincount(checked.reason, minlength=len(REASONS))
    failed = int(counts[1:].sum())
    if not failed:
        return
    room = EXAMPLES_KEPT - len(rejected.examples)
    if room > 0:
        rows = np.flatnonzero(checked.reason != 0)[:room]
        if kind == "json":
            lines = _jsonl_line_numbers(path, [offset + int(i) for i in rows])
            numbers = [lines[offset + int(i)] for i in rows]
        else:
            first = 1 if kind == "parquet" else 2
            numbers = [offset + int(i) + first for i in rows]
        for i, number in zip(rows, numbers, strict=True):
            record = batch.slice(int(i), 1).to_pylist()[0]
            reason = check_row(record)
            # The message is check_row's own; the columns found the same row.
            assert isinstance(reason, str), (path, number, record)
            rejected.examples.append(f"{path}:{number}: {reason}")
    rejected.count += failed
    for code, name in enumerate(REASONS):
        if code and counts[code]:
            rejected.by_reason[name] += int(counts[code])


# ----------------------------------------------------------------- Python readers


def _python_records(
    records: Iterable[tuple[str, Mapping[str, Any] | str]],
    builder: _Builder,
    rejected: Rejections,
) -> None:
    """Records of the Python parsers, checked by ``check_row``, added in chunks."""
    names = ("cluster", "broker", "timestamp", "metric", "user", "client_id", "ip", "value")
    iterator = iter(records)
    while True:
        chunk = list(itertools.islice(iterator, BATCH_ROWS))
        if not chunk:
            return
        columns: dict[str, list[Any]] = {name: [] for name in names}
        for where, record in chunk:
            checked = check_row(record) if not isinstance(record, str) else record
            if isinstance(checked, str):
                rejected.reject(where, checked)
                continue
            for name in names:
                columns[name].append(getattr(checked, name))
        columns["ip"] = [ip or "" for ip in columns["ip"]]
        builder.add_rows(columns)


def read_coded_usage(
    paths: Sequence[Path],
    *,
    clusters: Collection[str],
    fmt: UsageFormat = UsageFormat.auto,
    labels: LabelMap | None = None,
    cluster: str | None = None,
    broker: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> tuple[CodedUsage, Rejections]:
    """Every usable row of every file with ``since <= timestamp < until`` of
    a cluster in ``clusters``, coded by series, and what was rejected or
    skipped (as :func:`quotaform.analytics.usage.read_usage` and ``analyze``
    count them).

    Args:
        clusters: the configured clusters; rows of others are rejected
            (``cluster``) after the time filter.
        fmt, labels, cluster, broker: as :func:`~quotaform.analytics.usage.read_usage`.
        since, until: the time range (naive times are UTC); ``None``: open.

    Raises:
        AnalyticsError: a file cannot be read at all (named), or rows were
            read but none of a configured cluster.
    """
    builder = _Builder(clusters, since, until)
    rejected = Rejections()
    for path in usage_files(paths):
        kind = detect_format(path) if fmt is UsageFormat.auto else fmt
        if kind is UsageFormat.prometheus:
            records = prometheus_rows(path, labels or LabelMap(), rejected)
            _python_records(records, builder, rejected)
            continue
        if kind is UsageFormat.jmxtool:
            _python_records(
                jmxtool_rows(path, cluster=cluster, broker=broker, skipped=rejected),
                builder,
                rejected,
            )
            continue
        arrow_kind = (
            "parquet" if path.suffix == ".parquet" else "csv" if path.suffix == ".csv" else "json"
        )
        mark, before = builder.mark(), deepcopy(rejected)
        try:
            _arrow_file(path, arrow_kind, builder, rejected)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            builder.restore(mark)
            rejected.count, rejected.by_reason = before.count, before.by_reason
            rejected.examples, rejected.skipped = before.examples, before.skipped
            _python_records(generic_records(path), builder, rejected)
    return builder.finish(rejected), rejected
