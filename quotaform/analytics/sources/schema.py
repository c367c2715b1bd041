"""The usage table as Arrow, declared once, and the one normalisation of
types every source applies where its data comes in.

Every source turns its input into record batches of :data:`USAGE_SCHEMA`
(the columns of :data:`quotaform.analytics.model.USAGE_COLUMNS`), and every
engine, check and report reads only that. What users really write differs in
types, not in meaning, so the types are made one here, before any check:

* ``timestamp``: ``TIMESTAMP(NANOS | MICROS | MILLIS)`` with or without a
  zone, ``INT96`` (older Spark jobs), ``TIMESTAMP_NTZ``: microseconds since
  the epoch, UTC (:data:`~quotaform.analytics.usage.NAIVE_TIME_NOTE` when a
  column had no zone: it is taken as UTC, and said so). Nanoseconds are
  truncated to microseconds, the usage table's resolution; text stays text
  (the checks parse ISO-8601);
* ``cluster``, ``broker``, ``metric``, ``user``, ``client_id``, ``ip``:
  ``large_string``, ``string_view`` and integer columns (a broker written as
  ``1``) become ``string``; dictionary-encoded text stays a dictionary of
  ``string`` (codes are cheaper than strings);
* ``value``: any integer or floating-point column becomes ``float64``.

The Spark engine reads generic files where they are, in parallel, and
applies the same rules as column expressions
(:mod:`quotaform.analytics.spark.sources`): a test reads every layout on
both engines and compares the rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from quotaform.analytics.model import SERIES_COLUMNS, USAGE_COLUMNS

__all__ = [
    "STAGED_SCHEMA",
    "TEXT_COLUMNS",
    "USAGE_SCHEMA",
    "naive_timestamp",
    "normalise_batch",
    "normalise_record",
]

#: The usage table's text columns: the series' own.
TEXT_COLUMNS = SERIES_COLUMNS
#: The usage table as Arrow: timestamps are UTC microseconds.
USAGE_SCHEMA = pa.schema(
    [
        (
            c,
            pa.timestamp("us", tz="UTC")
            if c == "timestamp"
            else pa.float64()
            if c == "value"
            else pa.string(),
        )
        for c in USAGE_COLUMNS
    ]
)
#: Parsed usage (Prometheus answers, JmxTool, the collector) as the engines
#: are handed it: every column text as a JSON Lines file would hold it, and
#: ``_where`` naming the row (``file: series 3 sample 7``).
STAGED_SCHEMA = pa.schema([(c, pa.string()) for c in (*USAGE_COLUMNS, "_where")])
def _is_text(kind: pa.DataType) -> bool:
    return (
        pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)
    )


def _text_column(column: pa.Array) -> pa.Array:
    kind = column.type
    if pa.types.is_dictionary(kind):
        values = kind.value_type
        if pa.types.is_string(values):
            return column
        if _is_text(values) or pa.types.is_integer(values):
            return column.cast(pa.dictionary(kind.index_type, pa.string()))
        return column
    if pa.types.is_string(kind):
        return column
    if _is_text(kind) or pa.types.is_integer(kind):
        return column.cast(pa.string())
    return column


def _timestamp_column(column: pa.Array) -> pa.Array:
    kind = column.type
    if pa.types.is_dictionary(kind):
        column = column.dictionary_decode()
        kind = column.type
    if not pa.types.is_timestamp(kind):
        return _text_column(column) if _is_text(kind) else column
    if kind.unit != "us":
        # Truncated: the usage table holds microseconds (as Spark does).
        column = column.cast(pa.timestamp("us", tz=kind.tz), safe=False)
    # A naive time is taken as UTC; a zoned one is an instant already.
    return column.cast(pa.timestamp("us", tz="UTC"))


def _value_column(column: pa.Array) -> pa.Array:
    kind = column.type
    if pa.types.is_dictionary(kind):
        column = column.dictionary_decode()
        kind = column.type
    if (pa.types.is_integer(kind) or pa.types.is_floating(kind)) and not pa.types.is_float64(kind):
        return column.cast(pa.float64())
    if _is_text(kind) and not pa.types.is_string(kind):
        return column.cast(pa.string())
    return column


def naive_timestamp(schema: pa.Schema, utc_columns: frozenset[str] = frozenset()) -> bool:
    """True when ``schema``'s ``timestamp`` is a timestamp without a time
    zone (taken as UTC: say :data:`~quotaform.analytics.usage.NAIVE_TIME_NOTE`).

    Args:
        utc_columns: naive columns known to hold UTC instants (Parquet
            ``INT96``, which Arrow reads without a zone).
    """
    if "timestamp" not in schema.names or "timestamp" in utc_columns:
        return False
    kind = schema.field("timestamp").type
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return pa.types.is_timestamp(kind) and kind.tz is None


def normalise_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with the usage columns' types made one (the module
    docstring); other columns and values of other types (booleans, nested
    data) are left for the checks to reject."""
    arrays = []
    changed = False
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        if name == "timestamp":
            new = _timestamp_column(column)
        elif name == "value":
            new = _value_column(column)
        elif name in TEXT_COLUMNS:
            new = _text_column(column)
        else:
            new = column
        changed |= new is not column
        arrays.append(new)
    if not changed:
        return batch
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


def normalise_record(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """A parsed record (a JSON Lines object) with the text columns' integers
    as text (``"broker": 1`` is broker ``"1"``, as Arrow and Spark read it);
    booleans and other values are left for the checks to reject."""
    fixed = None
    for name in TEXT_COLUMNS:
        value = record.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            fixed = fixed or dict(record)
            fixed[name] = str(value)
    return record if fixed is None else fixed
