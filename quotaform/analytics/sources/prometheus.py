"""Prometheus ``query_range`` answers (JSON, ``resultType`` matrix) of the
exporters' quota metrics: saved by hand, by ``--prometheus``
(:mod:`quotaform.analytics.sources.live`) or by Grafana's inspector.

Streamed series by series (ijson), never read as one document; each series
decoded by :func:`quotaform.analytics.exporters.decode_series` (every naming
convention, JMX-quoted and URL-encoded label values, ``"NaN"``); labels map
to (cluster, broker) by :class:`~quotaform.analytics.usage.LabelMap`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from quotaform.analytics.exporters import OLD_RULES_NOTE, decode_series
from quotaform.analytics.sources.base import ReadOptions, Records, Source
from quotaform.analytics.sources.text import OPEN, json_kind
from quotaform.analytics.usage import EXAMPLES_KEPT, LabelMap, Rejections
from quotaform.errors import AnalyticsError, InputError
from quotaform.inputs.depth import DepthScanner
from quotaform.inputs.files import open_input
from quotaform.inputs.jsondoc import BLOCK_BYTES
from quotaform.inputs.limits import LIMITS
from quotaform.kafka.entity import escape_unprintable

__all__ = ["SOURCE", "prometheus_rows"]


def prometheus_rows(
    path: Path, labels: LabelMap, skipped: Rejections, *, label: str | None = None
) -> Records:
    """Generic records of a ``query_range`` export, streamed series by series
    (what is skipped, unusable, matched or assumed counted in ``skipped``).

    Args:
        label: how rows are named in messages (default: the path).

    Raises:
        AnalyticsError: not a ``query_range`` matrix document.
    """
    import ijson

    name = label or str(path)
    try:
        fh, _ = open_input(path, OPEN)
    except InputError as exc:
        raise AnalyticsError(str(exc)) from None
    with fh:
        # ijson's prefixes grow with the depth (a 200 KiB answer 100,000 deep
        # took gigabytes): the nesting is measured on the bytes first.
        scanner = DepthScanner(escape_unprintable(name), LIMITS["prometheus-answer"], numbers=True)
        try:
            while block := fh.read(BLOCK_BYTES):
                scanner.feed(block)
        except InputError as exc:
            raise AnalyticsError(f"{exc}: not a Prometheus query_range document") from None
        fh.seek(0)
        try:
            status = None
            for prefix, _event, value in ijson.parse(fh):
                if prefix == "status":
                    status = value
                    break
                if prefix == "data.resultType" and value != "matrix":
                    raise AnalyticsError(f"{name}: data.resultType is {value!r}, expected matrix")
            if status not in (None, "success"):
                raise AnalyticsError(f"{name}: status is {status!r}, expected success")
            fh.seek(0)
            yield from _stream_series(ijson.parse(fh), name, labels, skipped)
        except ijson.JSONError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise AnalyticsError(
                f"{name}: not a Prometheus query_range document: {first}"
            ) from None


_ITEM = "data.result.item"
_METRIC = f"{_ITEM}.metric"
_VALUES = f"{_ITEM}.values"
_PAIR = f"{_VALUES}.item"
#: Samples kept while a series' ``values`` come before its ``metric`` (Prometheus
#: writes ``metric`` first; ``query_range`` answers at most 11,000 points per
#: series, its ``maximum resolution``).
MAX_VALUES_BEFORE_METRIC = 11_000


class _Series:
    """One ``data.result`` item being read: whether its ``metric`` was a
    mapping (``None``: not seen yet), the row fields its labels give, whether
    its ``values`` was an array, and the samples that came before the labels."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.labelled: bool | None = None
        self.base: Mapping[str, Any] | None = None  # None: skipped or unusable labels
        self.values: bool | None = None  # None: no values key; False: not an array
        self.early: list[tuple[int, Any]] = []
        self.samples = 0


def _stream_series(events: Any, name: str, labels: LabelMap, skipped: Rejections) -> Records:
    """The records of ``data.result`` read from ijson's event stream, sample by
    sample: a series of millions of samples is never held whole (ijson's
    ``items`` built a 300 MB series as Python lists: gigabytes, then a crash).

    Raises:
        AnalyticsError: ``data.result`` is not a list, or a series' ``values``
            before its ``metric`` hold more than
            :data:`MAX_VALUES_BEFORE_METRIC` samples.
    """
    from ijson.common import ObjectBuilder

    series: _Series | None = None
    number = 0
    builder: Any = None  # ObjectBuilder of the metric, a sample or a discarded value
    target = ""
    depth = 0

    def build(event: str, value: Any, what: str) -> None:
        nonlocal builder, target, depth
        builder, target, depth = ObjectBuilder(), what, 1
        builder.event(event, value)

    for prefix, event, value in events:
        if builder is not None:
            builder.event(event, value)
            depth += event in ("start_map", "start_array")
            depth -= event in ("end_map", "end_array")
            if depth:
                continue
            built, builder = builder.value, None
            if series is not None and target == "metric":
                yield from _labelled(series, built, labels, skipped)
            elif series is not None and target == "sample":
                yield from _sample(series, built)
            continue
        if prefix == "data.result" and event not in ("start_array", "end_array", "null"):
            raise AnalyticsError(f"{name}: data.result: expected a list of series")
        if prefix == _ITEM:
            if event == "start_map":
                number += 1
                series = _Series(f"{name}: series {number}")
            elif event == "end_map" and series is not None:
                yield from _finished(series)
                series = None
            elif event != "map_key":
                number += 1
                yield f"{name}: series {number}", "series: expected {metric, values}"
                if event == "start_array":
                    build(event, value, "discard")
            continue
        if series is None:
            continue
        if prefix == _METRIC:
            if event in ("start_map", "start_array"):
                build(event, value, "metric")
            else:
                yield from _labelled(series, value, labels, skipped)
        elif prefix == _VALUES and event != "end_array":
            series.values = event == "start_array"
            if event == "start_map":
                build(event, value, "discard")
        elif prefix == _PAIR:
            if event in ("start_map", "start_array"):
                build(event, value, "sample")
            elif event != "end_array":
                yield from _sample(series, value)


def _labelled(series: _Series, tags: Any, labels: LabelMap, skipped: Rejections) -> Records:
    """Take ``tags`` as the series' labels; the samples that came first follow."""
    series.labelled = isinstance(tags, dict)
    early, series.early = series.early, []
    if not isinstance(tags, dict):
        return
    series.base = _series_base(tags, labels, skipped)
    for i, pair in early:
        yield from _record(series, i, pair)


def _sample(series: _Series, pair: Any) -> Records:
    series.samples += 1
    if series.labelled is None:  # values before metric
        if len(series.early) >= MAX_VALUES_BEFORE_METRIC:
            raise AnalyticsError(
                f"{series.where}: more than {MAX_VALUES_BEFORE_METRIC:,} samples before the "
                "series' metric (Prometheus writes metric first)"
            )
        series.early.append((series.samples, pair))
        return
    yield from _record(series, series.samples, pair)


def _finished(series: _Series) -> Records:
    if not series.labelled:
        yield series.where, "series: expected {metric, values}"
    elif series.base is not None and not series.values:
        yield series.where, "values: expected [[time, value], ...]"


def _series_base(
    tags: Mapping[str, Any], labels: LabelMap, skipped: Rejections
) -> Mapping[str, Any] | None:
    """The row fields a series' labels give (``None``: skipped or unusable,
    counted in ``skipped``)."""
    meaning = decode_series(tags, metric=labels.metric)
    name = str(tags.get("__name__", "")) or "(no __name__)"
    if meaning.metric is None:
        (skipped.unusable if meaning.unusable else skipped.skipped)[meaning.reason] += 1
        if meaning.unusable and len(skipped.unusable_names) < EXAMPLES_KEPT:
            skipped.unusable_names.append(name)
        return None
    skipped.matched[f"{name} -> {meaning.metric} ({meaning.convention})"] += 1
    if meaning.convention == "quota-folded":
        skipped.notes[OLD_RULES_NOTE] += 1
    cluster = tags.get(labels.cluster) or labels.default_cluster
    if not cluster and labels.assumed_cluster:
        cluster = labels.assumed_cluster
        skipped.notes[
            f"series without a {labels.cluster!r} label: assumed the one configured cluster "
            f"{cluster!r} (--default-cluster NAME says so)"
        ] += 1
    return {
        "cluster": cluster,
        "broker": tags.get(labels.broker),
        "metric": meaning.metric,
        "user": meaning.user,
        "client_id": meaning.client_id,
        "ip": meaning.ip,
    }


def _record(series: _Series, i: int, pair: Any) -> Records:
    if series.base is None:
        return
    where = f"{series.where} sample {i}"
    if not isinstance(pair, list) or len(pair) != 2:
        yield where, "values: expected [time, value]"
        return
    try:
        when = datetime.fromtimestamp(float(pair[0]), UTC)
    except (TypeError, ValueError, OverflowError):
        yield where, f"timestamp: {pair[0]!r} is not unix seconds"
        return
    yield where, {**series.base, "timestamp": when, "value": str(pair[1])}


def _records(path: Path, options: ReadOptions, skipped: Rejections) -> Records:
    return prometheus_rows(path, options.labels, skipped)


SOURCE = Source(
    name="prometheus",
    suffixes=(".json",),
    sniff=lambda name, head: name.endswith(".json") and json_kind(head()) == "prometheus",
    records=_records,
    describe='a Prometheus query_range answer ({"status": ..., "data": {"resultType": '
    '"matrix", ...}})',
)
