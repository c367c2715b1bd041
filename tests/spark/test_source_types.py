"""Issue 32, item 2: the same logical usage table written the ways people
write it (pandas' ``to_parquet`` with a zone, nanoseconds, microseconds and
milliseconds with and without a zone, INT96, Spark's own TIMESTAMP_NTZ,
dictionary and ``large_string`` columns, an integer broker, integer values,
CSV, JSON Lines with a number for a broker) gives the same rows on the local
engine and on Spark, local paths and ``file://`` URIs alike, and the
zone-less forms say so in a ``Note:`` on both."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from quotaform.analytics.local.checks import METRIC_CODES
from quotaform.analytics.local.reader import read_coded_usage
from quotaform.analytics.model import USAGE_COLUMNS
from quotaform.analytics.spark import job
from quotaform.analytics.usage import NAIVE_TIME_NOTE

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

T0 = datetime(2026, 11, 23, 10, 0, 0, 123456, tzinfo=UTC)


def _frame() -> pd.DataFrame:
    """A small usage table: two groups, two brokers, usage and throttle
    metrics, an ip group, times with microseconds. (No NaN: pandas writes a
    NaN as a null, which both engines reject alike.)"""
    rows: list[dict[str, Any]] = []
    for i in range(12):
        when = T0 + timedelta(seconds=15 * i, microseconds=7 * i)
        broker = 1 + i % 2
        rows += [
            {"broker": broker, "metric": "produce-byte-rate", "user": "alice",
             "client_id": "ingest", "ip": None, "value": 1000 + 10 * i},
            {"broker": broker, "metric": "produce-throttle-time", "user": "alice",
             "client_id": "ingest", "ip": None, "value": 0 if i % 3 else 5 * i},
            {"broker": broker, "metric": "connection-accept-rate", "user": "",
             "client_id": "", "ip": "192.0.2.10", "value": i},
        ]  # fmt: skip
        for row in rows[-3:]:
            row.update(cluster="prod-eu", timestamp=when)
    frame = pd.DataFrame(rows)[list(USAGE_COLUMNS)]
    frame["broker"] = frame["broker"].astype("int64")
    frame["value"] = frame["value"].astype("float64")
    return frame


def _text_broker(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    frame["broker"] = frame["broker"].astype(str)
    return frame


def _arrow(frame: pd.DataFrame, timestamp: pa.DataType, **types: pa.DataType) -> pa.Table:
    table = pa.Table.from_pandas(_text_broker(frame), preserve_index=False)
    zone = getattr(timestamp, "tz", None)
    times = table.column("timestamp").cast(pa.timestamp("us", tz="UTC"))
    if zone is None:
        times = times.cast(pa.timestamp("us"))
    table = table.set_column(
        table.schema.get_field_index("timestamp"), "timestamp", times.cast(timestamp, safe=False)
    )
    for name, kind in types.items():
        index = table.schema.get_field_index(name)
        table = table.set_column(index, name, table.column(name).cast(kind))
    return table


def _pandas_parquet(path: Path, *, zone: bool, integer_broker: bool = False) -> None:
    frame = _frame() if integer_broker else _text_broker(_frame())
    if not zone:
        frame["timestamp"] = frame["timestamp"].dt.tz_localize(None)
    frame.to_parquet(path)  # pandas' own way: TIMESTAMP(NANOS)


def _write(kind: str, path: Path, spark: SparkSession) -> Path:
    frame = _frame()
    if kind == "pandas-nanos-utc":
        _pandas_parquet(path, zone=True)
    elif kind == "pandas-nanos-naive":
        _pandas_parquet(path, zone=False)
    elif kind == "pandas-integer-broker":
        _pandas_parquet(path, zone=True, integer_broker=True)
    elif kind in ("micros-utc", "millis-utc", "micros-naive", "millis-naive"):
        unit = kind.split("-")[0].replace("micros", "us").replace("millis", "ms")
        zone = "UTC" if kind.endswith("utc") else None
        pq.write_table(_arrow(frame, pa.timestamp(unit, tz=zone)), path)
    elif kind == "int96":
        pq.write_table(
            _arrow(frame, pa.timestamp("us", tz="UTC")), path, use_deprecated_int96_timestamps=True
        )
    elif kind == "dictionary":
        text = pa.dictionary(pa.int32(), pa.string())
        table = _arrow(frame, pa.timestamp("us", tz="UTC"), metric=text, user=text, broker=text)
        pq.write_table(table, path, use_dictionary=True)
    elif kind == "large-string":
        big = pa.large_string()
        table = _arrow(frame, pa.timestamp("us", tz="UTC"), cluster=big, user=big, client_id=big)
        pq.write_table(table, path)
    elif kind == "integer-value":
        table = _arrow(frame.fillna({"value": 0}), pa.timestamp("us", tz="UTC"))
        table = table.set_column(
            table.schema.get_field_index("value"), "value", table.column("value").cast(pa.int64())
        )
        pq.write_table(table, path)
    elif kind == "spark-timestamp-ntz":
        naive = _text_broker(frame)
        naive["timestamp"] = naive["timestamp"].dt.tz_localize(None)
        table = pa.Table.from_pandas(naive, preserve_index=False)
        written = spark.createDataFrame(table).withColumn(
            "timestamp", F.col("timestamp").cast("timestamp_ntz")
        )
        written.coalesce(1).write.mode("overwrite").parquet(str(path))
        (part,) = path.glob("part-*.parquet")
        return part
    elif kind == "csv":
        out = _text_broker(frame)
        out["timestamp"] = out["timestamp"].map(lambda t: t.isoformat().replace("+00:00", "Z"))
        out.to_csv(path, index=False)
    elif kind == "jsonl-integer-broker":
        with path.open("w", encoding="utf-8") as fh:
            for record in frame.to_dict("records"):
                record["timestamp"] = record["timestamp"].isoformat()
                record["broker"] = int(record["broker"])  # "broker": 1
                fh.write(json.dumps(record) + "\n")
    else:
        raise AssertionError(kind)
    return path


SUFFIX = {"csv": ".csv", "jsonl-integer-broker": ".jsonl"}
#: Layouts without a time zone: said in a Note on both engines.
NAIVE = {"pandas-nanos-naive", "micros-naive", "millis-naive", "spark-timestamp-ntz"}
KINDS = [
    "pandas-nanos-utc",
    "pandas-nanos-naive",
    "pandas-integer-broker",
    "micros-utc",
    "micros-naive",
    "millis-utc",
    "millis-naive",
    "int96",
    "spark-timestamp-ntz",
    "dictionary",
    "large-string",
    "integer-value",
    "csv",
    "jsonl-integer-broker",
]


def _local_rows(path: Path) -> tuple[list[tuple[Any, ...]], Any]:
    usage, rejected = read_coded_usage([path], clusters=["prod-eu"])
    parts = usage.series(usage.key)
    text = [parts[c].to_pylist() for c in ("cluster", "broker", "user", "client_id", "ip")]
    metrics = [METRIC_CODES[m] for m in parts["metric"].tolist()]
    rows = [
        (c, b, int(t), m, u, i, ip or None, "NaN" if math.isnan(v) else v)
        for c, b, u, i, ip, m, t, v in zip(
            *text, metrics, usage.timestamp.tolist(), usage.value.tolist(), strict=True
        )
    ]
    return sorted(rows, key=repr), rejected


def _spark_rows(spark: SparkSession, where: Path | str) -> tuple[list[tuple[Any, ...]], Any]:
    frame, rejected, usable = job.read_usage_counted(spark, [where], known=["prod-eu"])
    micros = frame.select(
        "cluster",
        "broker",
        F.unix_micros("timestamp").alias("t"),
        "metric",
        "user",
        "client_id",
        "ip",
        "value",
    ).collect()
    rows = [
        (r[0], r[1], r[2], r[3], r[4], r[5], r[6], "NaN" if math.isnan(r[7]) else r[7])
        for r in micros
    ]
    assert usable == len(rows)
    return sorted(rows, key=repr), rejected


@pytest.mark.parametrize("kind", KINDS)
def test_every_layout_gives_the_same_rows_on_both_engines_and_at_a_uri(
    spark: SparkSession, tmp_path: Path, kind: str
) -> None:
    path = _write(kind, tmp_path / f"usage{SUFFIX.get(kind, '.parquet')}", spark)
    local, local_rejected = _local_rows(path)
    assert local_rejected.count == 0, local_rejected.examples
    assert len(local) == 36
    # The microseconds survive every unit that holds them (milliseconds truncate).
    t0 = int(T0.timestamp()) * 1_000_000 + T0.microsecond
    assert min(r[2] for r in local) == t0 - (456 if "millis" in kind else 0)
    assert {r[1] for r in local} == {"1", "2"}
    for where in (path, f"file://{path}"):
        remote, remote_rejected = _spark_rows(spark, where)
        assert remote_rejected.count == 0, (where, remote_rejected.examples)
        assert remote == local, where
        assert (NAIVE_TIME_NOTE in remote_rejected.notes) == (kind in NAIVE), where
    assert (NAIVE_TIME_NOTE in local_rejected.notes) == (kind in NAIVE)


def test_a_directory_of_every_layout_reads_the_same_on_both_engines(
    spark: SparkSession, tmp_path: Path
) -> None:
    folder = tmp_path / "usage"
    folder.mkdir()
    written: list[Path] = []
    for i, kind in enumerate(["pandas-nanos-utc", "csv", "jsonl-integer-broker"]):
        written.append(_write(kind, folder / f"u{i}{SUFFIX.get(kind, '.parquet')}", spark))
    usage, local_rejected = read_coded_usage([folder], clusters=["prod-eu"])
    # The same samples three times: one of each (series, time) kept.
    assert usage.rows == 36 and local_rejected.duplicates == 72
    _, rejected, usable = job.read_usage_counted(spark, [f"file://{folder}"], known=["prod-eu"])
    assert usable == 36 and rejected.duplicates == 72 and rejected.count == 0
