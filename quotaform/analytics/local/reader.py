"""Usage files into :class:`CodedUsage`: integer-coded series with a time and
a value per sample, and the rows that could not be used.

Each file is read by its source (:mod:`quotaform.analytics.sources`): the
generic layout's normalised Arrow record batches (Parquet streamed with only
the usage columns, CSV and JSON Lines by Arrow's streaming readers) are
checked as columns (:func:`~quotaform.analytics.local.checks.check_batch`);
other sources' records (Prometheus ``query_range``, JmxTool) go through
``check_row`` in chunks fed into the same arrays. A CSV or JSON Lines file
Arrow cannot read as a table (a short row, a line that is not a JSON
object, ``NaN`` literals, a column whose type changes) is read again by its
source's records, so its rows are checked and named as before.

Rejected rows are counted by reason and the first
:data:`~quotaform.analytics.usage.EXAMPLES_KEPT` named ``file:row: field:
message`` in file order, as :func:`quotaform.analytics.sources.registry.read_usage`
names them (the message comes from ``check_row`` itself); rows of clusters
without a configuration are counted after the time filter, as ``analyze``
always counted them.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Mapping, Sequence
from copy import deepcopy
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from quotaform.analytics.local.checks import (
    METRIC_CODES,
    REASONS,
    CheckedBatch,
    Coded,
    check_batch,
    coded,
)
from quotaform.analytics.model import SERIES_COLUMNS, USAGE_COLUMNS
from quotaform.analytics.sources import generic
from quotaform.analytics.sources.base import ReadOptions, Records, Source
from quotaform.analytics.sources.generic import BATCH_ROWS, FallBack, first_row
from quotaform.analytics.sources.registry import AUTO, usage_inputs
from quotaform.analytics.sources.text import OPEN
from quotaform.analytics.usage import EXAMPLES_KEPT, Rejections, check_row
from quotaform.errors import AnalyticsError
from quotaform.inputs.files import open_input

__all__ = ["BATCH_ROWS", "CodedUsage", "code_checked", "read_coded_usage"]

_TEXT = tuple(c for c in SERIES_COLUMNS if c != "metric")
#: The bits a packed key may use (tests lower it to exercise the paired keys).
_KEY_BITS = 63
_LOW31 = (1 << 31) - 1
#: A row's key: (cluster, broker) pair id << 36 | (user, client id, ip) id
#: << 5 | metric code.
_WHO_SHIFT, _PLACE_SHIFT = 5, 36
assert len(METRIC_CODES) <= 1 << _WHO_SHIFT


class _Names:
    """One text column's distinct values over the run, by code."""

    def __init__(self) -> None:
        self.values = pa.array([], pa.string())

    def codes(self, names: pa.Array) -> np.ndarray:
        """The run's code of each of ``names`` (new ones are appended)."""
        seen = len(self.values)
        merged = pc.dictionary_encode(pa.concat_arrays([self.values, names]))
        self.values = merged.dictionary
        return merged.indices.slice(seen).to_numpy(zero_copy_only=False).astype(np.int64)


class _Pairs:
    """Dense ids for pairs ``(a, b)`` of ids below 2**31, the same over the run."""

    def __init__(self) -> None:
        self.keys = pa.array([], pa.int64())

    def ids(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The id of each row's pair (new pairs get the next ids)."""
        encoded = pc.dictionary_encode(pa.array((a << 31) | b))
        found = pc.index_in(encoded.dictionary, value_set=self.keys)
        ids = np.asarray(pc.fill_null(found, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
        new = np.flatnonzero(ids < 0)
        if len(new):
            ids[new] = len(self.keys) + np.arange(len(new))
            self.keys = pa.concat_arrays([self.keys, encoded.dictionary.take(pa.array(new))])
        return ids[encoded.indices.to_numpy(zero_copy_only=False)]

    def parts(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(a, b)`` of each id."""
        keys = self.keys.to_numpy(zero_copy_only=False)[ids]
        return keys >> 31, keys & _LOW31


@dataclass
class CodedUsage:
    """The usable usage rows of a run, as integer keys.

    Attributes:
        key: int64 per row, the row's series: its cluster, broker, user,
            client id and ip codes packed in the bit ``widths`` (high to low),
            then 5 bits of metric code; when they do not fit in 63 bits,
            ``(cluster, broker) id << 36 | (user, client id, ip) id << 5 |
            metric`` (``widths`` is ``None``). :meth:`series` reads it back.
        timestamp: int64 microseconds since the epoch (UTC) per row.
        value: float64 per row (NaN kept: a throttle time of nothing).
        names: each text column's values by code.
    """

    key: np.ndarray
    timestamp: np.ndarray
    value: np.ndarray
    names: dict[str, pa.Array]
    widths: tuple[int, ...] | None
    pairs: tuple[_Pairs, _Pairs, _Pairs]

    @property
    def rows(self) -> int:
        """How many usable rows."""
        return len(self.key)

    def series(self, keys: np.ndarray) -> dict[str, Any]:
        """The parts of row keys: ``cluster``, ``broker``, ``user``,
        ``client_id``, ``ip`` (string arrays; no ip is ``""``) and ``metric``
        (int64 codes into :data:`~quotaform.analytics.local.checks.METRIC_CODES`)."""
        if self.widths is not None:
            codes = dict(zip(_TEXT, _unpack(keys >> _WHO_SHIFT, self.widths), strict=True))
        else:
            principals, whos, places = self.pairs
            place, who = keys >> _PLACE_SHIFT, (keys >> _WHO_SHIFT) & _LOW31
            cluster, broker = places.parts(place)
            principal, ip = whos.parts(who)
            user, client_id = principals.parts(principal)
            codes = {"cluster": cluster, "broker": broker, "user": user, "client_id": client_id}
            codes["ip"] = ip
        out: dict[str, Any] = {name: self.names[name].take(pa.array(codes[name])) for name in _TEXT}
        out["metric"] = keys & ((1 << _WHO_SHIFT) - 1)
        return out


def _pack(columns: Sequence[np.ndarray], widths: Sequence[int]) -> np.ndarray:
    packed = np.zeros(len(columns[0]), dtype=np.int64)
    for column, width in zip(columns, widths, strict=True):
        packed = (packed << width) | column
    return packed


def _unpack(packed: np.ndarray, widths: Sequence[int]) -> list[np.ndarray]:
    parts = []
    for width in reversed(widths):
        parts.append(packed & ((1 << width) - 1))
        packed = packed >> width
    return parts[::-1]


def _micros(when: datetime | None) -> int | None:
    if when is None:
        return None
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    delta = when - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


class _Builder:
    """Accumulates checked batches: the time range, the clusters, the keys."""

    def __init__(
        self,
        clusters: Collection[str],
        since: datetime | None,
        until: datetime | None,
    ) -> None:
        self.clusters = frozenset(clusters)
        self.since = _micros(since)
        self.until = _micros(until)
        self.names = {name: _Names() for name in _TEXT}
        self.principals, self.whos, self.places = _Pairs(), _Pairs(), _Pairs()
        self.keys: list[np.ndarray] = []
        self.layouts: list[tuple[int, ...] | None] = []
        self.times: list[np.ndarray] = []
        self.values: list[np.ndarray] = []
        self.seen: set[str] = set()
        self.unconfigured = 0
        self.outside = 0  # usable rows outside since/until
        self.unconfigured_names: list[str] = []

    def mark(self) -> tuple[Any, ...]:
        return (
            len(self.keys),
            set(self.seen),
            self.unconfigured,
            list(self.unconfigured_names),
            self.outside,
        )

    def restore(self, mark: tuple[Any, ...]) -> None:
        size, self.seen, self.unconfigured, self.unconfigured_names, self.outside = mark
        del self.keys[size:], self.layouts[size:], self.times[size:], self.values[size:]

    def add(self, checked: CheckedBatch) -> None:
        keep = checked.reason == 0
        usable = int(keep.sum())
        if self.since is not None:
            keep &= checked.timestamp >= self.since
        if self.until is not None:
            keep &= checked.timestamp < self.until
        rows = np.flatnonzero(keep)
        self.outside += usable - len(rows)
        if not len(rows):
            return
        codes = {}
        for name in _TEXT:
            column = getattr(checked, name)
            codes[name] = self.names[name].codes(column.names)[column.index[rows]]
        clusters = self.names["cluster"].values.to_pylist()
        present = np.flatnonzero(np.bincount(codes["cluster"]))
        self.seen.update(clusters[i] for i in present)
        configured = np.array([name in self.clusters for name in clusters], dtype=bool)
        known = configured[codes["cluster"]]
        if not known.all():
            unknown = np.flatnonzero(~known)
            self.unconfigured += len(unknown)
            room = EXAMPLES_KEPT - len(self.unconfigured_names)
            self.unconfigured_names += [clusters[codes["cluster"][i]] for i in unknown[:room]]
            rows = rows[known]
            codes = {name: code[known] for name, code in codes.items()}
        if not len(rows):
            return
        # Packed in the widths of the run's codes so far; repacked at the end.
        widths = tuple(max((len(self.names[n].values) - 1).bit_length(), 1) for n in _TEXT)
        metric = checked.metric[rows].astype(np.int64)
        if sum(widths) <= _KEY_BITS - _WHO_SHIFT:
            packed = _pack([codes[n] for n in _TEXT], widths)
            self.keys.append((packed << _WHO_SHIFT) | metric)
            self.layouts.append(widths)
        else:
            self.keys.append(self._pair_key(codes, metric))
            self.layouts.append(None)
        self.times.append(checked.timestamp[rows])
        self.values.append(checked.value[rows])

    def _pair_key(self, codes: Mapping[str, np.ndarray], metric: np.ndarray) -> np.ndarray:
        principal = self.principals.ids(codes["user"], codes["client_id"])
        who = self.whos.ids(principal, codes["ip"])
        place = self.places.ids(codes["cluster"], codes["broker"])
        if len(self.places.keys) >= 1 << (63 - _PLACE_SHIFT):
            raise AnalyticsError("more than 2**27 (cluster, broker) pairs in the usage")
        return (place << _PLACE_SHIFT) | (who << _WHO_SHIFT) | metric

    def _final_keys(self) -> tuple[np.ndarray, tuple[int, ...] | None]:
        """Every batch's keys in one layout: the final widths when they fit."""
        widths = tuple(max((len(self.names[n].values) - 1).bit_length(), 1) for n in _TEXT)
        fits = sum(widths) <= _KEY_BITS - _WHO_SHIFT
        keys = []
        for key, layout in zip(self.keys, self.layouts, strict=True):
            if layout == (widths if fits else None):
                keys.append(key)
                continue
            metric = key & ((1 << _WHO_SHIFT) - 1)
            assert layout is not None  # once the codes do not fit, every later batch is paired
            codes = dict(zip(_TEXT, _unpack(key >> _WHO_SHIFT, layout), strict=True))
            if fits:
                keys.append((_pack([codes[n] for n in _TEXT], widths) << _WHO_SHIFT) | metric)
            else:
                keys.append(self._pair_key(codes, metric))
        return _joined(keys, np.int64), widths if fits else None

    def add_rows(self, columns: Mapping[str, list[Any]]) -> None:
        """Rows already checked by ``check_row`` (the Python parsers' chunks)."""
        rows = len(columns["value"])
        if not rows:
            return
        times = pa.array(columns["timestamp"], pa.timestamp("us", "UTC")).cast(pa.int64())
        text = {}
        for name in (*_TEXT, "metric"):
            found = coded(pa.array(columns[name], pa.string()), rows)
            assert found is not None
            text[name] = Coded(found.index, pc.fill_null(found.names, ""))
        metric = pc.fill_null(
            pc.index_in(text["metric"].names, value_set=pa.array(METRIC_CODES)), -1
        )
        self.add(
            CheckedBatch(
                reason=np.zeros(rows, dtype=np.int8),
                cluster=text["cluster"],
                broker=text["broker"],
                user=text["user"],
                client_id=text["client_id"],
                ip=text["ip"],
                metric=metric.to_numpy(zero_copy_only=False).astype(np.int8)[text["metric"].index],
                timestamp=times.to_numpy(zero_copy_only=False),
                value=np.array(columns["value"], dtype=np.float64),
            )
        )

    def finish(self, rejected: Rejections) -> CodedUsage:
        rejected.outside_range += self.outside
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
            if not self.keys:
                raise AnalyticsError(
                    "no usage row belongs to a configured cluster: the usage names "
                    f"{', '.join(sorted(self.seen))}, the configuration "
                    f"{configured} (map Prometheus labels with --cluster-label / "
                    "--default-cluster)"
                )
        key, widths = self._final_keys()
        self.keys = []
        timestamp = _joined(self.times, np.int64)
        value = _joined(self.values, np.float64)
        kept = _one_of_each(key, timestamp, value)
        if kept is not None:
            rejected.duplicates += len(key) - len(kept)
            key, timestamp, value = key[kept], timestamp[kept], value[kept]
        usage = CodedUsage(
            key=key,
            timestamp=timestamp,
            value=value,
            names={name: names.values for name, names in self.names.items()},
            widths=widths,
            pairs=(self.principals, self.whos, self.places),
        )
        self.keys, self.times, self.values = [], [], []
        return usage


def _mixed(key: np.ndarray, timestamp: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each (key, timestamp) pair (splitmix64's finaliser):
    equal pairs hash equal; different pairs almost never do."""
    with np.errstate(over="ignore"):
        x = key.astype(np.uint64)  # the one copy; the rest in place
        x *= np.uint64(0x9E3779B97F4A7C15)
        x += timestamp.view(np.uint64)
        for shift, factor in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
            x ^= x >> np.uint64(shift)
            x *= np.uint64(factor)
        x ^= x >> np.uint64(31)
    return x


def _one_of_each(key: np.ndarray, timestamp: np.ndarray, value: np.ndarray) -> np.ndarray | None:
    """The rows to keep when a (series, timestamp) comes more than once (the
    same series in two files, overlapping exports): one per pair, the one
    with the largest value (NaN only when every value is NaN), as the Spark
    engine keeps it; ``None`` when every pair is unique. The usage table
    has one row per series and time (``schemas/usage.schema.json``).

    One sort of a 64-bit hash of each pair finds the candidates (10M rows:
    about a second); only rows whose hash repeats are compared exactly.
    """
    if len(key) < 2:
        return None
    hashed = _mixed(key, timestamp)
    ordered = np.sort(hashed)
    if not (ordered[1:] == ordered[:-1]).any():
        return None  # the common case: one sort, no index array
    del ordered
    order = np.argsort(hashed, kind="stable")
    ordered = hashed[order]
    repeats = ordered[1:] == ordered[:-1]
    in_run = np.zeros(len(order), dtype=bool)
    in_run[1:] |= repeats
    in_run[:-1] |= repeats
    candidates = order[in_run]
    ranked = np.where(np.isnan(value[candidates]), -np.inf, value[candidates])
    exact = np.lexsort((ranked, timestamp[candidates], key[candidates]))
    rows = candidates[exact]
    k, t = key[rows], timestamp[rows]
    last = np.ones(len(rows), dtype=bool)
    last[:-1] = (k[1:] != k[:-1]) | (t[1:] != t[:-1])
    if last.all():
        return None  # the hashes collided, the pairs differ
    keep = np.ones(len(key), dtype=bool)
    keep[rows[~last]] = False
    return np.flatnonzero(keep)


def _joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


# ----------------------------------------------------------------- Arrow batches


def _jsonl_line_numbers(path: Path, records: Sequence[int]) -> dict[int, int]:
    """The line numbers of the given record indices (0-based) of a JSON Lines
    file: blank lines are skipped by both readers but numbered."""
    wanted = set(records)
    found: dict[int, int] = {}
    index = 0
    fh, _ = open_input(path, OPEN)
    with fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            if index in wanted:
                found[index] = number
                if len(found) == len(wanted):
                    break
            index += 1
    return found


def _arrow_file(path: Path, source: Source, builder: _Builder, rejected: Rejections) -> None:
    """One file through its source's Arrow batches, checked as columns.

    Raises:
        pa.ArrowInvalid, FallBack: Arrow cannot read it as a table (the
            caller reads it with the source's records instead).
    """
    assert source.arrow is not None
    kind = generic.layout(path)
    offset = 0
    for batch in source.arrow(path, rejected):
        checked = check_batch(batch)
        if checked is None:
            _python_records(_records_of(path, kind, batch, offset), builder, rejected)
        else:
            _count_rejected(path, kind, batch, checked, offset, rejected)
            builder.add(checked)
        offset += batch.num_rows


def _records_of(
    path: Path, kind: str, batch: pa.RecordBatch, offset: int
) -> Records:
    """A batch's rows as the Python readers' ``(file:row, record)``."""
    first = first_row(kind)
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
            numbers = [offset + int(i) + first_row(kind) for i in rows]
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
    records: Records | Iterable[tuple[str, Mapping[str, Any] | str]],
    builder: _Builder,
    rejected: Rejections,
) -> None:
    """Records of the Python parsers, checked by ``check_row``, added in chunks."""
    names = USAGE_COLUMNS
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
    fmt: str = AUTO,
    options: ReadOptions | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> tuple[CodedUsage, Rejections]:
    """Every usable row of every file with ``since <= timestamp < until`` of
    a cluster in ``clusters``, coded by series, and what was rejected or
    skipped (as :func:`quotaform.analytics.sources.registry.read_usage` and
    the Spark engine count them). Each file is read by its source
    (:mod:`quotaform.analytics.sources`): its Arrow batches when it has them,
    else its records.

    Args:
        clusters: the configured clusters; rows of others are rejected
            (``cluster``) after the time filter.
        fmt: a source's name, or ``auto`` (detected per file).
        options: labels, the cluster and broker of JmxTool files, the
            bounds of a usage file.
        since, until: the time range (naive times are UTC); ``None``: open.

    Raises:
        AnalyticsError: a file cannot be read at all (named), or rows were
            read but none of a configured cluster.
    """
    options = options or ReadOptions()
    builder = _Builder(clusters, since, until)
    rejected = Rejections()
    for path, source in usage_inputs(paths, rejected, fmt=fmt, limits=options.limits):
        rejected.read_file(path, source.name)
        if source.arrow is None:
            _python_records(source.records(path, options, rejected), builder, rejected)
            continue
        mark, before = builder.mark(), deepcopy(rejected)
        try:
            _arrow_file(path, source, builder, rejected)
        except (pa.ArrowException, OSError, UnicodeDecodeError, FallBack):
            builder.restore(mark)
            rejected.count, rejected.by_reason = before.count, before.by_reason
            rejected.examples, rejected.skipped = before.examples, before.skipped
            rejected.notes = before.notes
            _python_records(source.records(path, options, rejected), builder, rejected)
    return builder.finish(rejected), rejected


def code_checked(
    batches: Iterable[pa.RecordBatch], clusters: Collection[str]
) -> tuple[CodedUsage, int]:
    """Usage rows another reader has already checked and kept (the Spark
    engine's: :func:`quotaform.analytics.spark.job.checked`, the same rules
    as :func:`~quotaform.analytics.local.checks.check_batch`), coded by
    series as :func:`read_coded_usage` codes them, a (series, time) read
    more than once kept once.

    Args:
        batches: the generic usage columns (``timestamp`` typed or text).
        clusters: the configured clusters (every row's must be one).

    Returns:
        ``(usage, duplicates)``: the coded rows, and how many rows repeated
        a (series, time) and were left out.

    Raises:
        AnalyticsError: a row the local checks refuse or of a cluster not in
            ``clusters``: the two engines' checks disagree (never silently
            dropped).
    """
    builder = _Builder(clusters, None, None)
    for batch in batches:
        checked = check_batch(batch)
        if checked is None or (checked.reason != 0).any():
            raise AnalyticsError(
                "a usage row the Spark checks kept is refused by the local checks: "
                "the engines' checks disagree (a defect: please report it)"
            )
        builder.add(checked)
    if builder.unconfigured:
        named = ", ".join(builder.unconfigured_names)
        raise AnalyticsError(
            f"usage rows of clusters without a configuration ({named}) reached the "
            "aggregation: the engines' checks disagree (a defect: please report it)"
        )
    rejected = Rejections()
    usage = builder.finish(rejected)
    return usage, rejected.duplicates
