"""The usage sources, by name: the one place that knows them all.

A source is one module exposing ``SOURCE``
(:class:`~quotaform.analytics.sources.base.Source`), registered by one line
of :data:`SOURCES`. Its file is detected here, once, for both engines
(:func:`detect`: the first source in registry order whose ``sniff`` says
yes; a Hadoop URI's first bytes are read through Spark and asked the same
way); ``--usage-format NAME`` skips the detection. Nothing downstream asks
which source a row came from: every engine, check and report reads the
usage schema only.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from quotaform.analytics.model import UsageRow
from quotaform.analytics.sources import generic, jmxtool, jmxtool_tsv, prometheus
from quotaform.analytics.sources.base import ReadOptions, Source
from quotaform.analytics.sources.text import head
from quotaform.analytics.usage import Rejections, check_row
from quotaform.errors import AnalyticsError, InputError
from quotaform.inputs.files import is_regular_file, open_input, shown
from quotaform.inputs.limits import LIMITS, Limits

__all__ = [
    "AUTO",
    "FORMATS",
    "SOURCES",
    "TEXT_BYTES_PER_PARQUET_BYTE",
    "detect",
    "parquet_bytes",
    "read_usage",
    "source_named",
    "usage_clusters",
    "usage_files",
    "usage_inputs",
]

#: Every file source, in the order detection asks them (the most specific
#: first: generic takes any ``*.csv`` JmxTool's header does not claim).
SOURCES: Mapping[str, Source] = {
    "prometheus": prometheus.SOURCE,
    "jmxtool": jmxtool.SOURCE,
    "jmxtool-tsv": jmxtool_tsv.SOURCE,
    "generic": generic.SOURCE,
}
#: ``--usage-format``'s value that detects the source of each file.
AUTO = "auto"
#: ``--usage-format``'s choices.
FORMATS = (AUTO, *SOURCES)
#: File name endings read as usage from a directory.
SUFFIXES = tuple(sorted({s for source in SOURCES.values() for s in source.suffixes}))
#: Text formats (CSV, JSON Lines, Prometheus, JmxTool) hold fewer rows per byte
#: than Parquet: 7.4x (CSV) and 14.6x (JSON Lines) the bytes for the same
#: 100,000 benchmark rows; 8 is used.
TEXT_BYTES_PER_PARQUET_BYTE = 8


def parquet_bytes(name: str, size: int) -> float:
    """A usage file's ``size`` (bytes) as the Parquet bytes holding as many
    rows: itself for ``*.parquet``, a text file's divided by
    :data:`TEXT_BYTES_PER_PARQUET_BYTE`."""
    return size / (1 if name.endswith(".parquet") else TEXT_BYTES_PER_PARQUET_BYTE)


def source_named(name: str) -> Source:
    """The source registered as ``name``.

    Raises:
        AnalyticsError: no such source.
    """
    try:
        return SOURCES[name]
    except KeyError:
        raise AnalyticsError(f"--usage-format {name!r}: one of {', '.join(FORMATS)}") from None


def detect(name: str, read_head: Callable[[], bytes]) -> Source | None:
    """The source of a file named ``name``, ``None`` when none claims it.

    Args:
        read_head: the file's first bytes
            (:data:`~quotaform.analytics.sources.text.HEAD_BYTES` of them, or
            a URI's first lines read through Spark), called at most once and
            only when a source needs to look inside.
    """
    first: list[bytes] = []

    def head() -> bytes:
        if not first:
            first.append(read_head())
        return first[0]

    for source in SOURCES.values():
        if source.sniff(name, head):
            return source
    return None


def _neither(path: object) -> str:
    return (
        f"{path}: neither a Prometheus query_range answer "
        '({"status": ..., "data": {"resultType": "matrix", ...}}) nor JSON Lines usage rows'
    )


def usage_inputs(
    paths: Sequence[Path],
    skipped: Rejections | None = None,
    *,
    fmt: str = AUTO,
    limits: Limits = LIMITS["usage"],
) -> list[tuple[Path, Source]]:
    """Each local usage file with its source: given files, and the data
    files in given directories (sorted, names starting ``.`` or ``_`` left
    out). A file no source claims (a ``*.json`` of other JSON) is left out
    of a directory, counted in ``skipped`` when given, and refused when
    named; so is a member that is not a regular file (a FIFO).

    Args:
        fmt: a source's name for every file, or :data:`AUTO` (:func:`detect`).

    Raises:
        AnalyticsError: a path does not exist or is not a regular file or a
            directory, a directory holds no data file, a file named is no
            source's, a file is larger than ``limits``.
    """
    forced = None if fmt == AUTO else source_named(fmt)

    def source_of(path: Path) -> Source | None:
        return forced or detect(path.name, lambda: head(path))

    found: list[tuple[Path, Source]] = []
    for path in paths:
        if path.is_dir():
            kept = []
            for p in sorted(path.rglob("*")):
                if not p.name.endswith(SUFFIXES) or any(
                    part.startswith((".", "_")) for part in p.relative_to(path).parts
                ):
                    continue
                if not is_regular_file(p):
                    if skipped is not None and not p.is_dir():
                        skipped.skipped[f"{shown(p)}: not a regular file: skipped"] += 1
                    continue
                source = source_of(p)
                if source is None:
                    if skipped is not None:
                        skipped.skipped[
                            f"{shown(p)}: neither a Prometheus query_range answer nor JSON Lines"
                        ] += 1
                    continue
                kept.append((p, source))
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
            source = source_of(path)
            if source is None:
                raise AnalyticsError(_neither(shown(path)))
            found.append((path, source))
    for path, _ in found:
        _check_size(path, limits)
    return found


def usage_files(
    paths: Sequence[Path],
    skipped: Rejections | None = None,
    *,
    limits: Limits = LIMITS["usage"],
) -> list[Path]:
    """The files of :func:`usage_inputs` (same errors)."""
    return [path for path, _ in usage_inputs(paths, skipped, limits=limits)]


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


def read_usage(
    paths: Sequence[Path],
    *,
    fmt: str = AUTO,
    options: ReadOptions | None = None,
) -> tuple[list[UsageRow], Rejections]:
    """Every usable row of every file, row by row in Python (the reference
    the engines are tested against), and what was rejected or skipped.

    Raises:
        AnalyticsError: a file cannot be read at all (a missing CSV column,
            not a ``query_range`` document), naming it.
    """
    options = options or ReadOptions()
    rows: list[UsageRow] = []
    rejected = Rejections()
    for path, source in usage_inputs(paths, rejected, fmt=fmt, limits=options.limits):
        for where, record in source.records(path, options, rejected):
            checked = check_row(record) if not isinstance(record, str) else record
            if isinstance(checked, str):
                rejected.reject(where, checked)
            else:
                rows.append(checked)
    return rows, rejected


def usage_clusters(
    paths: Sequence[Path],
    *,
    fmt: str = AUTO,
    options: ReadOptions | None = None,
    rows_per_file: int = 10_000,
) -> set[str]:
    """The cluster names in the first ``rows_per_file`` rows of each usage
    file: enough to name a live cluster after the usage, without reading it
    all (rows of other clusters are still counted as rejected later). A file
    that names no cluster (JmxTool) counts as ``options.cluster``."""
    options = options or ReadOptions()
    names: set[str] = set()
    for path, source in usage_inputs(paths, fmt=fmt, limits=options.limits):
        if source is jmxtool.SOURCE:
            if options.cluster:
                names.add(options.cluster)
            continue
        records = source.records(path, options, Rejections())
        for _, record in itertools.islice(records, rows_per_file):
            if not isinstance(record, str) and record.get("cluster"):
                names.add(str(record["cluster"]))
    return names
