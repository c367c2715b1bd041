"""The local engine's run (Arrow and numpy, no JVM): usage read by the
sources and coded by series (:mod:`quotaform.analytics.local.reader`),
statistics in numpy (:mod:`quotaform.analytics.local.aggregate`), Kafka's
rules once per group (:mod:`quotaform.analytics.engine`), the table written
as Spark lays a table out."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from quotaform.analytics import engine as py_engine
from quotaform.analytics.configs import QuotaConfig
from quotaform.analytics.local import aggregate
from quotaform.analytics.local.reader import read_coded_usage
from quotaform.analytics.model import TABLE_COLUMNS, rank_key
from quotaform.analytics.request import AnalyzeRequest, Command, Engine
from quotaform.analytics.results import (
    PLOTTED,
    TOP_ROWS,
    AnalyzeResult,
    UsageSeries,
    refuse_unusable,
    say_matched,
    series_of,
    summarise,
)

__all__ = ["PART_FILE", "run_local", "write_parquet_dataset"]


def run_local(
    request: AnalyzeRequest,
    configs: Mapping[str, QuotaConfig],
    after: Mapping[str, QuotaConfig],
    say: Callable[[str], None],
) -> AnalyzeResult:
    """The local engine (Arrow, no JVM): usage read as Arrow and coded by
    series (:mod:`quotaform.analytics.local`), statistics in numpy, Kafka's
    rules once per group (:mod:`quotaform.analytics.engine`)."""
    times: dict[str, float] = {}
    start = time.perf_counter()
    usage, rejected = read_coded_usage(
        [Path(p) for p in request.usage],
        clusters=configs,
        fmt=request.usage_format,
        options=request.read,
        since=request.since,
        until=request.until,
    )
    times["read"] = time.perf_counter() - start
    say_matched(rejected, say)
    refuse_unusable(usage.rows, rejected, request.read.labels)
    say(f"read {usage.rows:,} usage rows ({rejected.count:,} rejected)")
    start = time.perf_counter()
    util = aggregate.utilisation(
        usage, {c: cfg.index for c, cfg in configs.items()}, align_s=request.align
    )
    path = Path(request.out) / f"{request.command.value}.parquet"
    if request.command is Command.utilisation:
        order = aggregate.ranked_order(util.table)
        top = util.table.take(order[:TOP_ROWS]).to_pylist()
        times["compute"] = time.perf_counter() - start
        start = time.perf_counter()
        write_parquet_dataset(util.table, path)
        times["write"] = time.perf_counter() - start
        rows = util.table.num_rows
        summarised: Sequence[Mapping[str, Any]] = util.table.select(
            ["utilisation_p99", "censored", "brokers_observed"]
        ).to_pylist()
    else:
        util_rows = util.table.to_pylist()
        if request.command is Command.impact:
            table = py_engine.impact(
                util_rows,
                {c: cfg.index for c, cfg in after.items()},
                window_s=request.window_s,
                request_sizes=request.request_sizes,
            )
        else:
            table = py_engine.recommend(
                util_rows,
                quantile=request.quantile,
                headroom=request.headroom,
                request_sizes=request.request_sizes,
            )
        times["compute"] = time.perf_counter() - start
        start = time.perf_counter()
        _write_arrow(table, TABLE_COLUMNS[request.command], path)
        times["write"] = time.perf_counter() - start
        rows = len(table)
        top = sorted(table, key=rank_key(request.command.value))[:TOP_ROWS]
        summarised = table
    result = AnalyzeResult(
        engine=Engine.python,
        table=path,
        rows=rows,
        top=top,
        usage_rows=usage.rows,
        rejected=rejected,
        seconds=times,
    )
    summarise(request.command, summarised, result)
    if request.command is Command.utilisation:
        result.series = _series_python(usage, util, order)
    return result


def _write_arrow(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], path: Path) -> None:
    import pyarrow as pa

    schema = aggregate.arrow_schema(columns)
    table = pa.Table.from_pylist([{c: r[c] for c in columns} for r in rows], schema=schema)
    write_parquet_dataset(table, path)


#: The one part file of a table the local engine writes.
PART_FILE = "part-00000.parquet"


def write_parquet_dataset(table: Any, path: Path) -> None:
    """Write an Arrow table as Spark lays a table out: ``path`` is a
    directory holding ``part-00000.parquet`` and an empty ``_SUCCESS``
    marker, replacing what is there, so both engines' tables are read the
    same way (``spark.read.parquet``, ``pyarrow.parquet.read_table``,
    pandas, DuckDB's ``path/*.parquet``)."""
    import pyarrow.parquet as pq

    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    path.mkdir(parents=True)
    pq.write_table(table, path / PART_FILE)
    (path / "_SUCCESS").touch()


def _series_python(usage: Any, util: Any, order: Any) -> list[UsageSeries]:
    """The plotted groups' samples (the first :data:`PLOTTED` of ``order``,
    the ranked rows of ``util.table``, with samples), from the coded usage."""
    ranked = order[:PLOTTED]
    rows = util.table.take(ranked).to_pylist()
    picked = [(row, int(util.group[i])) for row, i in zip(rows, ranked, strict=True)]
    wanted = [(row, group) for row, group in picked if row["samples"]]
    points = aggregate.sample_points(usage, [group for _, group in wanted])
    return series_of([row for row, _ in wanted], points)


