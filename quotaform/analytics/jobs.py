"""``quotaform analyze``: one request in, one engine run, the table out.

The pipeline's one descent: :func:`run_analysis` takes the
:class:`~quotaform.analytics.request.AnalyzeRequest` the CLI built and the
quota configurations the application layer read, fetches a live read
(:mod:`quotaform.analytics.sources.live`), chooses the engine and runs it:
:func:`quotaform.analytics.local.run.run_local` or
:func:`quotaform.analytics.spark.run.run_spark`, each reading the usage
through the sources (:mod:`quotaform.analytics.sources`).

Outputs in ``--out DIR``: ``<command>.parquet`` (the contract table),
``summary.json`` (``format_version``, ``schemas/analyze.schema.json``),
``report.md`` (for a pull-request comment) and ``report.html`` (self-contained:
tables and plots inline). The engine is ``python`` (the local engine: Arrow
and numpy, explain's resolution, no JVM; :mod:`quotaform.analytics.local`),
``spark`` (PySpark, ``local[*]`` or ``--master``), or ``auto``: Spark for a
remote, a master or a Hadoop URI, else from :data:`AUTO_SPARK_BYTES` of usage
input on.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from quotaform.analytics.configs import QuotaConfig, by_cluster
from quotaform.analytics.model import DEFAULT_ALIGN_S, align_micros
from quotaform.analytics.paths import DataPath, is_uri
from quotaform.analytics.remote import redact_remote
from quotaform.analytics.request import AnalyzeRequest, Command, Engine
from quotaform.analytics.results import (
    BUCKET_LABELS,
    BUCKETS,
    TOP_ROWS,
    AnalyzeResult,
    UsageSeries,
    group_label,
)
from quotaform.analytics.sources.live import fetch_answers
from quotaform.analytics.sources.registry import parquet_bytes, usage_files
from quotaform.errors import AnalyticsError

__all__ = [
    "AUTO_SPARK_BYTES",
    "BUCKETS",
    "BUCKET_LABELS",
    "TOP_ROWS",
    "AnalyzeRequest",
    "AnalyzeResult",
    "Command",
    "Engine",
    "UsageSeries",
    "choose_engine",
    "group_label",
    "run_analysis",
    "table_rows",
    "write_files",
]

log = logging.getLogger(__name__)

#: ``--engine auto`` uses Spark from this much Parquet usage input on (bytes on
#: disk). The local engine (Arrow, no JVM) was faster than Spark ``local[2]``
#: at every size measured, 300k to 10M rows (``benchmarks/results/analytics_local.json``:
#: at 10M rows, 104 MiB, about 15 s against more than 60 s), so on one
#: machine there is no crossover; its peak memory grows by about 70 MiB per
#: million rows (0.96 GiB at 10M), so from 1 GiB of Parquet (about 100M rows,
#: some 7 GiB of memory) a Spark cluster (``--master``) is the safer choice.
AUTO_SPARK_BYTES = 1024 * 1024 * 1024


def choose_engine(request: AnalyzeRequest) -> Engine:
    """``request.engine``, with ``auto`` resolved: Spark for a remote, a
    master, or a Hadoop URI (usage or output), else by the usage input's size.

    Raises:
        AnalyticsError: ``--engine python`` with a remote, or with a URI it
            cannot reach.
    """
    if request.remote is not None:
        if request.engine is Engine.python:
            raise AnalyticsError(
                f"--remote {redact_remote(request.remote)} runs the Spark engine: drop "
                "--engine python (or the remote)"
            )
        return Engine.spark
    uris = [str(p) for p in (*request.usage, request.out) if is_uri(p)]
    if request.engine is Engine.python and uris:
        raise AnalyticsError(
            f"{uris[0]}: a URI is read and written through Spark; --engine python reads "
            "local paths only (use --engine spark, or a local path)"
        )
    if request.engine is not Engine.auto:
        return request.engine
    if uris or request.master is not None:  # a cluster named is a cluster used
        return Engine.spark
    if not request.usage:
        return Engine.python  # a live read only: small, parsed on the driver
    # Text input counts as its Parquet equivalent: it stays on Python a bit longer.
    size = sum(
        parquet_bytes(p.name, p.stat().st_size)
        for p in usage_files([Path(p) for p in request.usage], limits=request.read.limits)
    )
    return Engine.spark if size >= AUTO_SPARK_BYTES else Engine.python


def _check_usage(request: AnalyzeRequest) -> None:
    """Refuse a request whose usage cannot be read as given.

    Raises:
        AnalyticsError: no usage at all; ``--step`` without ``--prometheus``;
            ``--prometheus`` with a ``--usage-format`` other than its own.
    """
    if request.prometheus is None:
        if not request.usage:
            raise AnalyticsError("give the usage: --usage PATH (repeatable) or --prometheus URL")
        return
    if request.usage_format not in ("auto", "prometheus"):
        raise AnalyticsError(
            f"--usage-format {request.usage_format}: --prometheus answers are query_range "
            "JSON; read other files in a run of their own"
        )


@contextlib.contextmanager
def _with_live(request: AnalyzeRequest, say: Callable[[str], None]) -> Iterator[AnalyzeRequest]:
    """``request`` with a live read's answers fetched and added to its usage
    (saved in ``--out``'s ``prometheus/`` when local, so the run can be
    repeated offline, else in a temporary directory removed after the run),
    the range kept set to the range fetched, and the alignment bucket, when
    not given, no longer than the step (the answers are aligned already:
    one sample per broker and bucket)."""
    live = request.prometheus
    if live is None:
        yield request
        return
    with tempfile.TemporaryDirectory(prefix="quotaform-prometheus-") as scratch:
        into = request.out / "prometheus" if isinstance(request.out, Path) else Path(scratch)
        fetched = fetch_answers(live, request.since, request.until, into, progress=say)
        align = request.align_s
        if align is None and fetched.step_s < DEFAULT_ALIGN_S:
            align = fetched.step_s
        yield replace(
            request,
            usage=(*request.usage, *fetched.files),
            since=fetched.since,
            until=fetched.until,
            align_s=align,
        )


def run_analysis(
    request: AnalyzeRequest,
    configs: Sequence[QuotaConfig],
    *,
    after: Sequence[QuotaConfig] = (),
    progress: Callable[[str], None] | None = None,
) -> AnalyzeResult:
    """Read the usage of ``request`` (fetching a live read first), run one
    engine against the quota configurations and write the table (the
    reports are written by :mod:`quotaform.analytics.report`).

    Args:
        configs: the quota configuration per cluster (before the change,
            for impact).
        after: impact: the configuration after the change.

    Raises:
        AnalyticsError: bad inputs (named), no usage row for any configured
            cluster, or Spark cannot start.
    """
    say = progress or (lambda _m: None)
    _check_usage(request)
    try:
        align_micros(request.align)
    except ValueError as exc:
        raise AnalyticsError(f"--align {exc}") from None
    if isinstance(request.out, Path):
        request.out.mkdir(parents=True, exist_ok=True)
    by_name = by_cluster(configs)
    after_by_name = by_cluster(after) if after else {}
    if request.command is Command.impact:
        missing = sorted(set(by_name) - set(after_by_name))
        if missing:
            raise AnalyticsError(f"no configuration after the change for {', '.join(missing)}")
    chosen = choose_engine(request)
    with _with_live(request, say) as request:
        say(f"engine: {chosen.value}")
        if chosen is Engine.python:
            from quotaform.analytics.local.run import run_local

            result = run_local(request, by_name, after_by_name, say)
        else:
            result = _spark_run(request, by_name, after_by_name, say)
    result.request, result.configs, result.after = request, tuple(configs), tuple(after)
    return result


def _spark_run(
    request: AnalyzeRequest,
    configs: Mapping[str, QuotaConfig],
    after: Mapping[str, QuotaConfig],
    say: Callable[[str], None],
) -> AnalyzeResult:
    from quotaform.analytics.spark.run import run_spark

    try:
        return run_spark(request, configs, after, say)
    except AnalyticsError:
        raise
    except Exception as exc:  # PySpark's, Py4J's and the Connect client's errors
        from quotaform.analytics.spark.session import spark_error

        failure = spark_error(exc, master=request.master, remote=request.remote)
        if failure is None:
            raise
        raise failure from exc


def write_files(request: AnalyzeRequest, files: Mapping[str, str]) -> dict[str, DataPath]:
    """Write small text files (name -> text) into ``request.out``: with the
    local file system for a local directory, through Spark for a URI
    (:func:`quotaform.analytics.spark.job.write_texts`); returns name ->
    where it went."""
    out = request.out
    if isinstance(out, Path):
        for name, text in files.items():
            (out / name).write_text(text, encoding="utf-8")
        return {name: out / name for name in files}
    from quotaform.analytics.spark.run import write_texts

    return write_texts(request, files)


def table_rows(request: AnalyzeRequest, result: AnalyzeResult) -> list[dict[str, Any]]:
    """Every row of the written table, as dicts (pyarrow for a local table,
    Spark for a URI)."""
    if isinstance(result.table, Path):
        import pyarrow.parquet as pq

        # A directory of parts, from either engine (write_parquet_dataset).
        return pq.read_table(result.table).to_pylist()
    from quotaform.analytics.spark.run import table_rows as spark_rows

    return spark_rows(request, result.table)


