"""The generic layout (``schemas/usage.schema.json``): Parquet, CSV or JSON
Lines with the usage columns, the table most tools write.

Read three ways, one set of rules (:mod:`quotaform.analytics.sources.schema`):

* :func:`arrow_batches`: Arrow's own readers, streamed by record batches,
  types normalised: the local engine;
* :func:`generic_records`: row by row in Python, for a file Arrow cannot
  read as a table (a short row, a line that is not a JSON object, ``NaN``
  literals, a column whose type changes), so each row is judged and named;
* ``quotaform.analytics.spark.sources:generic_frame``: Spark's readers,
  where the files are, in parallel: the Spark engine.

Rows are named ``file:row``: Parquet rows from 1, CSV records from 2 (after
the header), JSON lines from 1 (blank lines numbered).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from quotaform.analytics.model import USAGE_COLUMNS
from quotaform.analytics.sources.base import ReadOptions, Records, Source
from quotaform.analytics.sources.schema import (
    TEXT_COLUMNS,
    naive_timestamp,
    normalise_batch,
    normalise_record,
)
from quotaform.analytics.sources.text import LINE_TOO_LONG, OPEN, bounded_lines, json_kind
from quotaform.analytics.usage import NAIVE_TIME_NOTE, Rejections
from quotaform.errors import AnalyticsError, InputError
from quotaform.inputs.files import open_input, shown
from quotaform.inputs.jsondoc import json_lines, scan_json_lines
from quotaform.inputs.limits import LIMITS, MAX_LINE_BYTES

__all__ = [
    "BATCH_ROWS",
    "SOURCE",
    "FallBack",
    "arrow_batches",
    "check_csv_header",
    "first_row",
    "generic_records",
    "layout",
]

#: Rows per record batch read: large enough that merging each batch's codes
#: into the run's stays cheap, small enough to bound one batch (~100 MiB).
BATCH_ROWS = 1 << 20
_BLOCK_BYTES = 64 << 20


def layout(path: Path | str) -> str:
    """``parquet``, ``csv`` or ``json`` (JSON Lines), by the file's name."""
    name = str(path)
    return "parquet" if name.endswith(".parquet") else "csv" if name.endswith(".csv") else "json"


def first_row(kind: str) -> int:
    """The number of a layout's first row (CSV: after the header line)."""
    return 2 if kind == "csv" else 1


def check_csv_header(path: Path | str, header: Sequence[str]) -> None:
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


# ----------------------------------------------------------------- Arrow


class FallBack(Exception):
    """A file Arrow must not read (it would crash): read it with
    :func:`generic_records`, which judges it row by row."""


def _int96(file: Any) -> frozenset[str]:
    """Columns stored as Parquet ``INT96``: UTC instants Arrow reads naive."""
    schema = file.schema
    return frozenset(
        schema.column(i).name
        for i in range(len(schema))
        if schema.column(i).physical_type == "INT96"
    )


def _parquet_batches(path: Path, notes: Rejections) -> Iterator[pa.RecordBatch]:
    import pyarrow.parquet as pq

    # Judged by the reading layer (a regular file), then read by Arrow's own
    # file reader: through a Python file object every read would hold the GIL.
    open_input(path, OPEN)[0].close()
    schema = pq.read_schema(path)
    text = [
        c for c in TEXT_COLUMNS if c in schema.names and (pa.types.is_string(schema.field(c).type))
    ]
    # Text columns stay dictionary-encoded as Parquet stores them: codes, not strings.
    file = pq.ParquetFile(path, read_dictionary=text)
    if naive_timestamp(file.schema_arrow, _int96(file)):
        notes.notes[NAIVE_TIME_NOTE] += 1
    columns = [c for c in USAGE_COLUMNS if c in schema.names]
    for batch in file.iter_batches(batch_size=BATCH_ROWS, columns=columns):
        yield normalise_batch(batch)


def _csv_batches(path: Path, _notes: Rejections) -> Iterator[pa.RecordBatch]:
    import pyarrow.csv as pacsv

    fh, _ = open_input(path, OPEN)
    with fh:
        first = fh.readline(MAX_LINE_BYTES + 1)
    if len(first) > MAX_LINE_BYTES:
        raise AnalyticsError(
            f"{path}:1: header: longer than {MAX_LINE_BYTES // 1024} KiB: not a usage header"
        )
    try:
        header = next(csv.reader([first.decode("utf-8", errors="replace")]), [])
    except csv.Error as exc:
        raise AnalyticsError(f"{path}:1: header: not CSV ({exc})") from None
    check_csv_header(path, header)
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


def _jsonl_batches(path: Path, _notes: Rejections) -> Iterator[pa.RecordBatch]:
    import pyarrow.json as pajson

    # Arrow's JSON parser recurses per level on the C stack (a segmentation
    # fault at 100,000): a file with a line nested too deeply is left to the
    # Python reader, which names that line among the rejected rows.
    fh, _ = open_input(path, OPEN)
    with fh:
        try:
            scan_json_lines(fh, str(path), LIMITS["usage"])
        except InputError as exc:
            raise FallBack(str(exc)) from None
    text = [c for c in USAGE_COLUMNS if c != "value"]
    # Only the usage columns: a field Arrow had to infer is a column more,
    # and lines naming a million distinct fields took it past 2 GiB. A value
    # written as text ("NaN") or a broker as a number makes Arrow refuse the
    # file: the Python reader reads it.
    reader = pajson.open_json(
        path,
        read_options=pajson.ReadOptions(block_size=_BLOCK_BYTES),
        parse_options=pajson.ParseOptions(
            explicit_schema=pa.schema([*((c, pa.string()) for c in text), ("value", pa.float64())]),
            unexpected_field_behavior="ignore",
        ),
    )
    yield from reader


def arrow_batches(path: Path, notes: Rejections) -> Iterator[pa.RecordBatch]:
    """The file's usage columns as normalised record batches (a file of
    naive timestamps counted in ``notes.notes``).

    Raises:
        pyarrow.ArrowInvalid, FallBack: Arrow cannot (or must not) read the
            file as a table: read it with :func:`generic_records`.
        AnalyticsError: a CSV header lacks a usage column.
    """
    readers = {"parquet": _parquet_batches, "csv": _csv_batches, "json": _jsonl_batches}
    yield from readers[layout(path)](path, notes)


# ----------------------------------------------------------------- Python


def generic_records(path: Path, notes: Rejections | None = None) -> Records:
    """``(file:row, record or why it is unreadable)`` of a generic file, row
    by row, values normalised as :func:`arrow_batches` normalises them.

    Raises:
        AnalyticsError: a CSV header lacks a usage column; a Parquet file
            Arrow cannot read.
    """
    kind = layout(path)
    if kind == "parquet":
        import pyarrow.parquet as pq

        fh, _ = open_input(path, OPEN)
        with fh:
            number = 0
            try:
                file = pq.ParquetFile(fh)
                if notes is not None and naive_timestamp(file.schema_arrow, _int96(file)):
                    notes.notes[NAIVE_TIME_NOTE] += 1
                for batch in file.iter_batches(batch_size=1 << 16):
                    for record in _parquet_rows(normalise_batch(batch)):
                        number += 1
                        yield f"{path}:{number}", record
            except (pa.ArrowException, OSError) as exc:
                first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
                raise AnalyticsError(
                    f"{shown(path)}: not a Parquet file quotaform can read "
                    f"({first or type(exc).__name__}) after {number:,} row(s)"
                ) from None
    elif kind == "csv":
        yield from _csv_records(path)
    else:
        for line in json_lines(path, OPEN):
            where = f"{path}:{line.number}"
            if line.problem is not None:
                yield where, line.problem
            elif isinstance(line.value, dict):
                yield where, normalise_record(line.value)
            else:
                yield where, "line: not a JSON object"


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


def _csv_records(path: Path) -> Records:
    """:func:`generic_records` of a CSV file: lines longer than
    :data:`~quotaform.inputs.limits.MAX_LINE_BYTES` and rows the csv module
    refuses are problems of their row, never a reason to stop."""
    too_long: list[int] = []
    fh, _ = open_input(path, OPEN)
    with fh:
        text = io.TextIOWrapper(fh, encoding="utf-8", errors="replace", newline="")
        reader = csv.DictReader(bounded_lines(text, too_long))
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
                yield f"{path}:{too_long.pop(0)}", LINE_TOO_LONG
            number += 1
            yield f"{path}:{number}", record
        while too_long:
            yield f"{path}:{too_long.pop(0)}", LINE_TOO_LONG


def _records(path: Path, _options: ReadOptions, skipped: Rejections) -> Records:
    return generic_records(path, skipped)


def _sniff(name: str, head: Callable[[], bytes]) -> bool:
    if name.endswith((".parquet", ".csv", ".jsonl", ".ndjson")):
        return True
    return name.endswith(".json") and json_kind(head()) == "rows"


SOURCE = Source(
    name="generic",
    suffixes=(".parquet", ".csv", ".jsonl", ".ndjson", ".json"),
    sniff=_sniff,
    records=_records,
    describe="usage rows (Parquet, CSV or JSON Lines with the usage columns)",
    arrow=arrow_batches,
    spark="generic_frame",
)
