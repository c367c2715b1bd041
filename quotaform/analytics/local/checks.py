""":func:`quotaform.analytics.usage.check_row` as column expressions over an
Arrow record batch: the same rules in the same order, so a row fails for the
same reason. The wording of a rejected row is not rebuilt here: the reader
runs ``check_row`` itself on the few rows it names.

Strings are parsed by Arrow where Arrow and Python agree (a strict numeric
pattern, ISO-8601 times Arrow's parser takes); anything else is given to
the Python parsers of :mod:`quotaform.analytics.usage`, once per distinct
string (a batch has few: ``NaN``, an empty cell, a handful of odd times).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from quotaform.analytics.model import SERIES_COLUMNS
from quotaform.analytics.usage import parse_timestamp, parse_value
from quotaform.kafka.keys import METRICS, QUOTA_KEYS
from quotaform.kafka.metrics import ISO_TIMESTAMP

__all__ = ["METRIC_CODES", "REASONS", "CheckedBatch", "Coded", "check_batch", "coded"]

#: Why a row is rejected, by code (0: usable): the part of ``check_row``'s
#: message before ``:``, in the order ``check_row`` tests them.
REASONS = ("", "cluster", "broker", "metric", "timestamp", "value", "user", "ip")
_CODE = {name: code for code, name in enumerate(REASONS)}
_METRICS = pa.array(sorted(METRICS))
#: Whether a metric code is a connection (ip) metric; the last entry is code -1.
_IS_IP = np.array(
    [*("ip" in QUOTA_KEYS[METRICS[m][0]].entity_types for m in sorted(METRICS)), False]
)
#: Numbers both Python's ``float`` and Arrow's cast read the same way.
_NUMBER = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_ZONED = r"(Z|[+-][0-9]{2}:?[0-9]{2})$"


#: Every usage metric by its code (the index here), the code a checked row carries.
METRIC_CODES = tuple(sorted(METRICS))


@dataclass(frozen=True, slots=True)
class Coded:
    """A text column as dictionary codes.

    Attributes:
        index: int32 per row, into ``names``.
        names: the distinct values (string array; ``""`` stands for null in
            the columns a checked batch returns).
    """

    index: np.ndarray
    names: pa.Array


@dataclass(frozen=True, slots=True)
class CheckedBatch:
    """One batch's rows, checked and normalised.

    Attributes:
        reason: int8 per row: 0 usable, else the index in :data:`REASONS`.
        cluster, broker, user, client_id, ip: coded text (an empty tag or
            no ip is ``""``); meaningful where ``reason`` is 0.
        metric: int8 per row, the index in :data:`METRIC_CODES` (-1: none).
        timestamp: int64 microseconds since the epoch (UTC).
        value: float64 (NaN kept).
    """

    reason: np.ndarray
    cluster: Coded
    broker: Coded
    user: Coded
    client_id: Coded
    ip: Coded
    metric: np.ndarray
    timestamp: np.ndarray
    value: np.ndarray


def _column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    if name not in batch.schema.names:
        return None
    column = batch.column(name)
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _is_text(kind: pa.DataType) -> bool:
    return (
        pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)
    )


def coded(column: pa.Array | None, rows: int) -> Coded | None:
    """A text (or dictionary-of-text, or all-null) column as codes, with null
    as one more entry at the end of ``names``; ``None`` when the column holds
    values that are not text."""
    if column is None or pa.types.is_null(column.type):
        return Coded(np.zeros(rows, dtype=np.int32), pa.nulls(1, pa.string()))
    if pa.types.is_dictionary(column.type):
        if not _is_text(column.type.value_type):
            return None
        names, indices = column.dictionary.cast(pa.string()), column.indices
    elif _is_text(column.type):
        encoded = pc.dictionary_encode(column.cast(pa.string()))
        names, indices = encoded.dictionary, encoded.indices
    else:
        return None
    index = pc.fill_null(indices.cast(pa.int32()), len(names)).to_numpy(zero_copy_only=False)
    return Coded(index, pa.concat_arrays([names, pa.nulls(1, pa.string())]))


def _filled(column: Coded) -> Coded:
    return Coded(column.index, pc.fill_null(column.names, ""))


def _text(column: pa.Array | None, rows: int) -> pa.Array | None:
    """The column as a string array, or ``None`` when it holds non-text values."""
    if column is None or pa.types.is_null(column.type):
        return pa.nulls(rows, pa.string())
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    return column.cast(pa.string()) if _is_text(column.type) else None


def _np(mask: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), dtype=bool)


def _empty(text: pa.Array) -> np.ndarray:
    return ~_np(pc.not_equal(text, ""))


def _timestamps_of_text(text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(microseconds, ok)`` per row of ISO-8601 text, parsed once per
    distinct string."""
    encoded = pc.dictionary_encode(text)
    unique = encoded.dictionary
    micros = np.zeros(len(unique), dtype=np.int64)
    ok = _np(pc.match_substring_regex(unique, ISO_TIMESTAMP))
    zoned = _np(pc.match_substring_regex(unique, _ZONED))
    for want_zone, kind in ((True, pa.timestamp("us", "UTC")), (False, pa.timestamp("us"))):
        where = np.flatnonzero(ok & (zoned == want_zone))
        if not len(where):
            continue
        strings = unique.take(pa.array(where))
        try:
            parsed = pc.cast(strings, kind).cast(pa.int64()).to_numpy(zero_copy_only=False)
            micros[where] = parsed
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            for i in where:  # Python's parser: the rule's own, for odd strings
                when = parse_timestamp(unique[int(i)].as_py())
                if when is None:
                    ok[i] = False
                else:
                    micros[i] = _micros(when)
    indices = encoded.indices
    present = _np(pc.is_valid(indices))
    index = np.asarray(pc.fill_null(indices, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    if not len(unique):
        return np.zeros(len(text), dtype=np.int64), np.zeros(len(text), dtype=bool)
    return micros[index], ok[index] & present


def _micros(when: object) -> int:
    from datetime import UTC, datetime

    assert isinstance(when, datetime)
    delta = when - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _timestamps(column: pa.Array | None, rows: int) -> tuple[np.ndarray, np.ndarray]:
    if column is not None and pa.types.is_timestamp(column.type):
        target = pa.timestamp("us", "UTC" if column.type.tz else None)
        typed = column.cast(target, safe=False).cast(pa.int64())
        return (
            np.asarray(pc.fill_null(typed, 0).to_numpy(zero_copy_only=False), dtype=np.int64),
            _np(pc.is_valid(column)),
        )
    text = _text(column, rows)
    if text is None:  # numbers, dates: not an ISO-8601 time in check_row either
        return np.zeros(rows, dtype=np.int64), np.zeros(rows, dtype=bool)
    return _timestamps_of_text(text)


def _values(column: pa.Array | None, rows: int) -> tuple[np.ndarray, np.ndarray]:
    if column is not None and (
        pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
    ):
        values = column.cast(pa.float64())
        numbers = np.asarray(
            pc.fill_null(values, 0.0).to_numpy(zero_copy_only=False), dtype=np.float64
        )
        return numbers, _np(pc.is_valid(column)) & ~np.isinf(numbers)
    text = _text(column, rows)
    if text is None:  # booleans and other types are not numbers to check_row
        return np.zeros(rows, dtype=np.float64), np.zeros(rows, dtype=bool)
    strict = _np(pc.match_substring_regex(text, _NUMBER))
    values = np.zeros(rows, dtype=np.float64)
    ok = strict.copy()
    where = np.flatnonzero(strict)
    if len(where):
        values[where] = pc.cast(text.take(pa.array(where)), pa.float64()).to_numpy(
            zero_copy_only=False
        )
    other = np.flatnonzero(~strict & _np(pc.is_valid(text)))
    if len(other):
        encoded = pc.dictionary_encode(text.take(pa.array(other)))
        parsed = [parse_value(s) for s in encoded.dictionary.to_pylist()]
        good = np.array([p is not None for p in parsed], dtype=bool)
        numbers = np.array([p if p is not None else 0.0 for p in parsed], dtype=np.float64)
        index = encoded.indices.to_numpy(zero_copy_only=False)
        values[other] = numbers[index]
        ok[other] = good[index]
    return values, ok & ~np.isinf(values)


def check_batch(batch: pa.RecordBatch) -> CheckedBatch | None:
    """Every row of ``batch`` (generic usage columns, typed or text, plain or
    dictionary-encoded) checked as :func:`~quotaform.analytics.usage.check_row`
    would; text tests run once per distinct value.

    Returns:
        The checked batch, or ``None`` when ``user``, ``client_id`` or ``ip``
        hold values that are neither text nor null (JSON numbers, say): the
        caller checks such a batch row by row with ``check_row``.
    """
    rows = batch.num_rows
    cluster, broker, metric, user, client_id, ip = (
        coded(_column(batch, name), rows) for name in SERIES_COLUMNS
    )
    if user is None or client_id is None or ip is None:
        return None
    everything = np.ones(rows, dtype=bool)
    fails: list[tuple[str, np.ndarray]] = []
    for name, text in (("cluster", cluster), ("broker", broker)):
        fails.append((name, everything if text is None else _empty(text.names)[text.index]))
    if metric is None:
        metric_code = np.full(rows, -1, dtype=np.int8)
    else:
        codes = pc.fill_null(pc.index_in(metric.names, value_set=_METRICS), -1)
        metric_code = codes.to_numpy(zero_copy_only=False).astype(np.int8)[metric.index]
    fails.append(("metric", metric_code < 0))
    micros, ts_ok = _timestamps(_column(batch, "timestamp"), rows)
    fails.append(("timestamp", ~ts_ok))
    values, value_ok = _values(_column(batch, "value"), rows)
    fails.append(("value", ~value_ok))
    has_ip = ~_empty(ip.names)[ip.index]
    is_ip = _IS_IP[metric_code]
    fails.append(("ip", is_ip != has_ip))
    reason = np.zeros(rows, dtype=np.int8)
    for name, failed in fails:
        reason[(reason == 0) & failed] = _CODE[name]
    none = Coded(np.zeros(rows, dtype=np.int32), pa.array([""]))
    return CheckedBatch(
        reason=reason,
        cluster=_filled(cluster) if cluster is not None else none,
        broker=_filled(broker) if broker is not None else none,
        user=_filled(user),
        client_id=_filled(client_id),
        ip=_filled(ip),
        metric=metric_code,
        timestamp=micros,
        value=values,
    )
