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

from quotaform.analytics.usage import parse_timestamp, parse_value
from quotaform.kafka.keys import METRICS, QUOTA_KEYS
from quotaform.kafka.metrics import ISO_TIMESTAMP

__all__ = ["REASONS", "CheckedBatch", "check_batch"]

#: Why a row is rejected, by code (0: usable): the part of ``check_row``'s
#: message before ``:``, in the order ``check_row`` tests them.
REASONS = ("", "cluster", "broker", "metric", "timestamp", "value", "user", "ip")
_CODE = {name: code for code, name in enumerate(REASONS)}
_METRICS = pa.array(sorted(METRICS))
_IP_METRICS = pa.array(
    sorted(m for m, (k, _) in METRICS.items() if "ip" in QUOTA_KEYS[k].entity_types)
)
#: Numbers both Python's ``float`` and Arrow's cast read the same way.
_NUMBER = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_ZONED = r"(Z|[+-][0-9]{2}:?[0-9]{2})$"


@dataclass(frozen=True, slots=True)
class CheckedBatch:
    """One batch's rows, checked and normalised.

    Attributes:
        reason: int8 per row: 0 usable, else the index in :data:`REASONS`.
        cluster, broker, metric, user, client_id: string arrays (an empty
            tag ``""``); meaningful where ``reason`` is 0.
        ip: string array, ``""`` where the row has no ip.
        timestamp: int64 microseconds since the epoch (UTC).
        value: float64 (NaN kept).
    """

    reason: np.ndarray
    cluster: pa.Array
    broker: pa.Array
    metric: pa.Array
    user: pa.Array
    client_id: pa.Array
    ip: pa.Array
    timestamp: np.ndarray
    value: np.ndarray


def _column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    if name not in batch.schema.names:
        return None
    column = batch.column(name)
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _text(column: pa.Array | None, rows: int) -> pa.Array | None:
    """The column as a string array, or ``None`` when it holds non-text values."""
    if column is None or pa.types.is_null(column.type):
        return pa.nulls(rows, pa.string())
    kind = column.type
    if pa.types.is_dictionary(kind):
        column = column.dictionary_decode()
        kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return column.cast(pa.string())
    return None


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
        return (
            np.asarray(pc.fill_null(values, 0.0).to_numpy(zero_copy_only=False), dtype=np.float64),
            _np(pc.is_valid(column)),
        )
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
    return values, ok


def check_batch(batch: pa.RecordBatch) -> CheckedBatch | None:
    """Every row of ``batch`` (generic usage columns, typed or text) checked
    as :func:`~quotaform.analytics.usage.check_row` would.

    Returns:
        The checked batch, or ``None`` when ``user``, ``client_id`` or ``ip``
        hold values that are neither text nor null (JSON numbers, say): the
        caller checks such a batch row by row with ``check_row``.
    """
    rows = batch.num_rows
    cluster, broker, metric, user, client_id, ip = (
        _text(_column(batch, name), rows)
        for name in ("cluster", "broker", "metric", "user", "client_id", "ip")
    )
    if user is None or client_id is None or ip is None:
        return None
    fails: list[tuple[str, np.ndarray]] = []
    for name, text in (("cluster", cluster), ("broker", broker)):
        fails.append((name, np.ones(rows, dtype=bool) if text is None else _empty(text)))
    fails.append(
        (
            "metric",
            np.ones(rows, dtype=bool) if metric is None else ~_np(pc.is_in(metric, _METRICS)),
        )
    )
    micros, ts_ok = _timestamps(_column(batch, "timestamp"), rows)
    fails.append(("timestamp", ~ts_ok))
    values, value_ok = _values(_column(batch, "value"), rows)
    fails.append(("value", ~value_ok))
    ip = pc.fill_null(ip, "")
    has_ip = ~_empty(ip)
    is_ip = _np(pc.is_in(metric, _IP_METRICS)) if metric is not None else np.zeros(rows, dtype=bool)
    fails.append(("ip", is_ip != has_ip))
    reason = np.zeros(rows, dtype=np.int8)
    for name, failed in fails:
        reason[(reason == 0) & failed] = _CODE[name]
    empty = pa.nulls(rows, pa.string())
    return CheckedBatch(
        reason=reason,
        cluster=cluster if cluster is not None else empty,
        broker=broker if broker is not None else empty,
        metric=metric if metric is not None else empty,
        user=pc.fill_null(user, ""),
        client_id=pc.fill_null(client_id, ""),
        ip=ip,
        timestamp=micros,
        value=values,
    )
