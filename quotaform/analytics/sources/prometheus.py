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
            for number, series in enumerate(ijson.items(fh, "data.result.item"), 1):
                yield from _series_records(f"{name}: series {number}", series, labels, skipped)
        except ijson.JSONError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise AnalyticsError(
                f"{name}: not a Prometheus query_range document: {first}"
            ) from None


def _series_records(where: str, series: Any, labels: LabelMap, skipped: Rejections) -> Records:
    if not isinstance(series, dict) or not isinstance(series.get("metric"), dict):
        yield where, "series: expected {metric, values}"
        return
    tags = series["metric"]
    meaning = decode_series(tags, metric=labels.metric)
    name = str(tags.get("__name__", "")) or "(no __name__)"
    if meaning.metric is None:
        (skipped.unusable if meaning.unusable else skipped.skipped)[meaning.reason] += 1
        if meaning.unusable and len(skipped.unusable_names) < EXAMPLES_KEPT:
            skipped.unusable_names.append(name)
        return
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
    base: Mapping[str, Any] = {
        "cluster": cluster,
        "broker": tags.get(labels.broker),
        "metric": meaning.metric,
        "user": meaning.user,
        "client_id": meaning.client_id,
        "ip": meaning.ip,
    }
    values = series.get("values")
    if not isinstance(values, list):
        yield where, "values: expected [[time, value], ...]"
        return
    for i, pair in enumerate(values, 1):
        if not isinstance(pair, list) or len(pair) != 2:
            yield f"{where} sample {i}", "values: expected [time, value]"
            continue
        try:
            when = datetime.fromtimestamp(float(pair[0]), UTC)
        except (TypeError, ValueError, OverflowError):
            yield f"{where} sample {i}", f"timestamp: {pair[0]!r} is not unix seconds"
            continue
        yield f"{where} sample {i}", {**base, "timestamp": when, "value": str(pair[1])}


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
