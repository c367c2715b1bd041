"""The reports of ``quotaform analyze``: a JSON summary, a markdown report for
a pull-request comment, and a self-contained HTML report (tables, and plots
made with matplotlib embedded as PNG data URIs: one file to archive or mail).

The HTML report of ``utilisation`` shows usage against the quota over time
for the most loaded groups (one small plot each, the quota as a dashed line,
the broker's throttling implied where usage sits on it) and the distribution
of ``utilisation_p99`` over all groups (a bar chart by bucket); every report
has the ranked table and the rejected-rows section.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from quotaform.analytics.configs import QuotaConfig
from quotaform.analytics.jobs import (
    BUCKET_LABELS,
    AnalyzeRequest,
    AnalyzeResult,
    Command,
    UsageSeries,
    group_label,
    write_files,
)
from quotaform.analytics.paths import DataPath
from quotaform.analytics.usage import note_line
from quotaform.formats.analyze import AnalyzeSummary, RejectedDoc, render_summary_json
from quotaform.formats.explain import enforcement_doc
from quotaform.kafka.keys import QUOTA_KEYS, enforcing_nodes
from quotaform.kafka.units import BINARY_UNITS, format_bytes, format_measured, format_quota_value
from quotaform.words import enforcement_warning

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "REPORT_FILES",
    "enforcement_warnings",
    "histogram_figure",
    "report_figures",
    "series_figure",
    "summary_of",
    "write_reports",
]

_COLUMNS = {
    Command.utilisation: (
        ("group", None),
        ("quota_key", "quota_key"),
        ("quota", "quota_value"),
        ("level", "level"),
        ("p99", "p99"),
        ("utilisation", "utilisation_p99"),
        ("throttled", "throttled_share"),
        ("censored", "censored"),
        ("brokers", "brokers_observed"),
        ("cluster p99", "cluster_p99"),
        ("cluster ceiling", "cluster_ceiling"),
    ),
    Command.impact: (
        ("group", None),
        ("quota_key", "quota_key"),
        ("before", "quota_before"),
        ("after", "quota_after"),
        ("level", None),
        ("group change", "group_change"),
        ("p99", "p99"),
        ("throughput after", "throughput_after"),
        ("demand cut", "demand_cut"),
        ("steady throttle", "predicted_throttle_ms"),
        ("first throttle", "first_throttle_ms"),
        ("newly throttled", "newly_throttled"),
        ("brokers", "brokers_observed"),
        ("cluster p99", "cluster_p99"),
        ("cluster ceiling after", "cluster_ceiling_after"),
    ),
    Command.recommend: (
        ("group", None),
        ("quota_key", "quota_key"),
        ("now", "quota_value"),
        ("peak p99", "peak_p99"),
        ("recommended", "recommended_text"),
        ("samples over", "share_over"),
        ("throttle at max", "throttle_at_max_ms"),
        ("brokers", "brokers_observed"),
        ("cluster p99", "cluster_p99"),
        ("across brokers", "recommended_cluster_ceiling"),
        ("censored", "censored"),
        ("note", "note"),
    ),
}


def _configs(result: AnalyzeResult) -> list[QuotaConfig]:
    return [*result.configs, *result.after]


def enforcement_warnings(configs: Sequence[QuotaConfig]) -> list[str]:
    """Per cluster whose brokers were read: why the quotas and levels the
    analysis resolved Kafka's default way are not (or not surely) what the
    brokers enforce (a custom quota callback, named; unreadable brokers)."""
    said: dict[str, str] = {}
    for config in configs:
        if config.enforcement is None or config.cluster in said:
            continue
        warning = enforcement_warning(config.enforcement, QUOTA_KEYS)
        if warning is not None:
            said[config.cluster] = (
                f"cluster {config.cluster!r}: {warning} The analysis joins usage with those "
                "values and quota groups."
            )
    return list(said.values())


def _resolution_enforced(configs: Sequence[QuotaConfig]) -> bool | None:
    """``False`` when some cluster's brokers use a quota callback, ``True``
    when every configuration's brokers were read and use the default
    resolution, else ``None`` (from files: not known)."""
    known = [c.enforcement.resolution_enforced if c.enforcement else None for c in configs]
    if False in known:
        return False
    return True if known and all(known) else None


def summary_of(request: AnalyzeRequest, result: AnalyzeResult) -> AnalyzeSummary:
    """The JSON summary of a run."""
    configs = _configs(result)
    callbacks = sorted({name for c in configs if c.enforcement for name in c.enforcement.classes})
    return AnalyzeSummary.model_validate(
        {
            "format_version": 1,
            "command": request.command.value,
            "engine": result.engine.value,
            "table": str(result.table),
            "rows": result.rows,
            "usage_rows": result.usage_rows,
            "rejected": RejectedDoc(
                count=result.rejected.count,
                by_reason=dict(result.rejected.by_reason),
                examples=list(result.rejected.examples),
                skipped=dict(result.rejected.skipped),
                duplicates=result.rejected.duplicates,
                matched=dict(result.rejected.matched),
                notes=dict(result.rejected.notes),
            ),
            "configurations": [f"{c.cluster}: {c.source}" for c in result.configs],
            "counts": result.extra,
            "histogram": result.histogram,
            "align_s": request.align,
            "top": [{k: _jsonable(v) for k, v in row.items()} for row in result.top],
            "seconds": {k: round(v, 3) for k, v in result.seconds.items()},
            "resolution_enforced": _resolution_enforced(configs),
            "quota_callback": ", ".join(callbacks) or None,
            "enforcement": {
                c.cluster: enforcement_doc(c.enforcement) for c in configs if c.enforcement
            },
            "warnings": enforcement_warnings(configs),
        }
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    return value


_QUOTA_COLUMNS = (
    "quota_value",
    "quota_before",
    "quota_after",
    "cluster_ceiling",
    "cluster_ceiling_before",
    "cluster_ceiling_after",
    "recommended_cluster_ceiling",
)
_MEASURED_COLUMNS = ("p99", "peak_p99", "throughput_after", "cluster_p99")


def _cell(key: str, column: str | None, row: Mapping[str, Any]) -> str:
    """One table cell for people: quotas exact as a manifest writes them
    (:func:`format_quota_value`, pasteable), measured usage with three
    significant digits in the same units (:func:`format_measured`); the
    Parquet table and summary.json keep the exact numbers."""
    if column is None:
        if key == "group":
            return group_label(row)
        return f"{row.get('level_before')} -> {row.get('level_after')}"
    value = row.get(column)
    if value is None:
        return "unlimited" if column in _QUOTA_COLUMNS else ""
    if column in _QUOTA_COLUMNS:
        if not math.isfinite(value):
            return ""
        return format_quota_value(row["quota_key"], float(value))
    if column in _MEASURED_COLUMNS:
        return format_measured(row["quota_key"], float(value)) if math.isfinite(value) else ""
    if column in ("utilisation_p99", "throttled_share", "demand_cut", "share_over"):
        return f"{value:.0%}"
    if column in ("predicted_throttle_ms", "first_throttle_ms", "throttle_at_max_ms"):
        return f"{value:,.0f} ms"
    if isinstance(value, bool):
        return "yes" if value else ""
    return str(value)


def _headline(request: AnalyzeRequest, result: AnalyzeResult) -> str:
    extra = result.extra
    if request.command is Command.utilisation:
        return (
            f"{extra.get('groups', 0):,} quota group series; {extra.get('over_quota', 0):,} at or "
            f"over their quota at p99; {extra.get('censored', 0):,} throttled (censored: true "
            "demand unknown)."
        )
    if request.command is Command.impact:
        return (
            f"{extra.get('changed', 0):,} observed group series change; "
            f"{extra.get('newly_throttled', 0):,} would be throttled that are not today."
        )
    return (
        f"{extra.get('recommendations', 0):,} recommendations; {extra.get('censored', 0):,} from "
        "censored groups (at least the current quota)."
    )


def _per_broker(request: AnalyzeRequest, result: AnalyzeResult) -> str:
    """The line saying quotas are enforced per broker and what that allows
    across the brokers a group reaches (the cluster_* columns)."""
    summed = f"usage summed across brokers in {request.align:g} s buckets"
    if request.command is Command.impact:
        return (
            "Quotas are enforced per broker: a group may use the quota after the change on "
            f"each broker it reaches (cluster ceiling after); cluster p99: its {summed}."
        )
    if request.command is Command.recommend:
        return (
            "Recommendations are per-broker quotas, sized on the busiest broker (Kafka "
            "enforces a quota on each broker): across brokers is what a group may use on "
            f"all the brokers it was observed on; cluster p99: its {summed}."
        )
    extra = result.extra
    text = (
        f"Quotas are enforced per broker: {extra.get('multi_broker_groups', 0):,} of "
        f"{extra.get('cluster_groups', 0):,} groups were observed on more than one broker "
        f"(at most {extra.get('max_brokers_observed', 0):,}) and may use their quota on each "
        f"(cluster ceiling); cluster p99: their {summed}."
    )
    example = next(
        (
            r
            for r in result.top
            if r.get("cluster_ceiling") is not None
            and enforcing_nodes(r["quota_key"], r["brokers_observed"]) > 1
        ),
        None,
    )
    if example is not None:
        key = example["quota_key"]
        text += (
            f" {group_label({**example, 'broker': None})} {key}: "
            f"{format_quota_value(key, float(example['quota_value']))} on each of "
            f"{example['brokers_observed']} brokers, "
            f"{format_quota_value(key, float(example['cluster_ceiling']))} across them"
        )
        if example.get("cluster_p99") is not None:
            text += f" (cluster p99 {format_measured(key, float(example['cluster_p99']))})"
        text += "."
    return text


def _markdown(request: AnalyzeRequest, result: AnalyzeResult) -> str:
    def md(text: str) -> str:
        return html.escape(text, quote=False).replace("|", "\\|")

    lines = [
        f"### quotaform analyze {request.command.value}",
        "",
        f"**{md(_headline(request, result))}**",
        "",
        md(_per_broker(request, result)),
        "",
    ]
    for warning in enforcement_warnings(_configs(result)):
        lines += [f"> **Warning:** {md(warning)}", ""]
    lines += [
        f"<sub>{result.usage_rows:,} usage rows, {result.rejected.count:,} rejected; engine "
        f"{result.engine.value}; table {md(str(result.table))}</sub>",
        "",
    ]
    columns = _COLUMNS[request.command]
    if result.top:
        lines += ["| " + " | ".join(name for name, _ in columns) + " |"]
        lines += ["|" + "---|" * len(columns)]
        for row in result.top:
            lines.append("| " + " | ".join(md(_cell(n, c, row)) for n, c in columns) + " |")
        lines.append("")
    else:
        lines += ["Nothing to show.", ""]
    if result.rejected.count:
        lines += [f"**{result.rejected.count:,} usage rows rejected** (never used):", ""]
        lines += [f"- {md(example)}" for example in result.rejected.examples]
        lines.append("")
    if result.rejected.duplicates:
        lines += [
            f"{result.rejected.duplicates:,} usage rows repeated a (series, time) already "
            "read and were counted once.",
            "",
        ]
    if result.rejected.notes:
        lines += [
            f"- Note: {md(note_line(note, n))}"
            for note, n in result.rejected.notes.items()
        ]
        lines.append("")
    return "\n".join(lines)


def _png(figure: Figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def histogram_figure(histogram: Mapping[str, int], *, clusters: Sequence[str] = ()) -> Figure:
    """The distribution of ``utilisation_p99``: one bar per bucket, in
    :data:`BUCKET_LABELS` order (``< 0.25`` ... ``< 1``, ``>= 1``,
    ``unlimited``), whole-number counts."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    figure = Figure(figsize=(6, 2.8))
    axis = figure.add_subplot()
    labels = list(BUCKET_LABELS)
    colours = ["#c44e52" if label == ">= 1" else "#4c72b0" for label in labels]
    axis.bar(labels, [histogram.get(label, 0) for label in labels], color=colours)
    axis.set_xlabel("usage p99 / quota")
    axis.set_ylabel("group series")
    axis.yaxis.set_major_locator(MaxNLocator(integer=True))
    axis.set_ylim(bottom=0)
    where = f" ({', '.join(clusters)})" if clusters else ""
    axis.set_title(f"Utilisation at p99{where}")
    return figure


def _unit_formatter(quota_key: str) -> Any:
    """Tick labels in the quota key's unit: bytes/s in binary units
    (``512KiB``), never a ``1e6`` offset."""
    from matplotlib.ticker import FuncFormatter

    if QUOTA_KEYS[quota_key].unit == "bytes/s":
        return FuncFormatter(lambda v, _pos: format_bytes(v))
    return FuncFormatter(lambda v, _pos: format_measured(quota_key, v))


def _binary_step(top: float) -> float:
    """A tick step for a bytes/s axis up to ``top``: a power-of-two fraction
    or multiple of a binary unit (256KiB, 512KiB, 1MiB...), at most 6 ticks."""
    size = next((size for _, size in BINARY_UNITS if top >= size), 1)
    factor = 1 / 8
    while top / (size * factor) > 6:
        factor *= 2
    return size * factor


def series_figure(series: UsageSeries) -> Figure:
    """One group's usage over time against its quota (a dashed line): a rate
    axis from zero in the key's unit, UTC times as month-day hours, the
    cluster in the title, the legend below the plot (never over the line)."""
    import matplotlib.dates as mdates
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 3.0))
    axis = figure.add_subplot()
    times: Any = [t if t.tzinfo else t.replace(tzinfo=UTC) for t, _ in series.points]
    values = [v for _, v in series.points]
    unit = QUOTA_KEYS[series.quota_key].unit
    axis.plot(times, values, lw=1, label=f"usage ({series.quota_key})")
    top = max(values, default=0.0)
    if series.quota is not None:
        axis.axhline(
            series.quota,
            ls="--",
            color="#c44e52",
            label=f"quota {format_quota_value(series.quota_key, float(series.quota))}",
        )
        top = max(top, series.quota)
    axis.set_ylim(bottom=0, top=top * 1.15 if top > 0 else 1)
    if unit == "bytes/s" and top > 0:
        from matplotlib.ticker import MultipleLocator

        axis.yaxis.set_major_locator(MultipleLocator(_binary_step(top * 1.15)))
    axis.yaxis.set_major_formatter(_unit_formatter(series.quota_key))
    axis.set_ylabel(f"usage ({unit})")
    locator = mdates.AutoDateLocator(tz=UTC)
    axis.xaxis.set_major_locator(locator)
    axis.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M", tz=UTC))
    axis.set_xlabel("time (UTC)")
    axis.set_title(series.title, fontsize=9)
    axis.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.32), ncol=2, frameon=False)
    for tick in axis.get_xticklabels():
        tick.set_rotation(20)
        tick.set_horizontalalignment("right")
    return figure


def report_figures(request: AnalyzeRequest, result: AnalyzeResult) -> list[tuple[str, Figure]]:
    """``(caption, figure)`` per plot of the HTML report (utilisation only)."""
    if request.command is not Command.utilisation:
        return []
    plots: list[tuple[str, Figure]] = []
    if result.histogram:
        clusters = sorted({c.cluster for c in result.configs})
        plots.append(
            (
                "How close every group runs to its quota (p99 of usage / quota).",
                histogram_figure(result.histogram, clusters=clusters),
            )
        )
    for series in result.series:
        plots.append((f"Usage against the quota over time: {series.title}", series_figure(series)))
    return plots


def _html(request: AnalyzeRequest, result: AnalyzeResult, summary: AnalyzeSummary) -> str:
    columns = _COLUMNS[request.command]
    head = "".join(f"<th>{html.escape(n)}</th>" for n, _ in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(n, c, row))}</td>" for n, c in columns) + "</tr>"
        for row in result.top
    )
    figures = "".join(
        f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        for caption, data in ((c, _png(f)) for c, f in report_figures(request, result))
    )
    rejected = "".join(f"<li>{html.escape(e)}</li>" for e in result.rejected.examples)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>quotaform analyze {request.command.value}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; max-width: 70em; }}
table {{ border-collapse: collapse; font-size: 0.9em; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; }}
th {{ background: #f0f0f0; }}
figure {{ display: inline-block; margin: 0.5em; }}
figcaption {{ font-size: 0.8em; color: #555; }}
</style></head><body>
<h1>quotaform analyze {request.command.value}</h1>
<p><strong>{html.escape(_headline(request, result))}</strong></p>
<p>{html.escape(_per_broker(request, result))}</p>
{"".join(f"<p><strong>Warning:</strong> {html.escape(w)}</p>" for w in summary.warnings)}
<p>{result.usage_rows:,} usage rows; {result.rejected.count:,} rejected;
engine {result.engine.value}; configurations: {html.escape("; ".join(summary.configurations))}.</p>
{figures}
<h2>Top {len(result.top)} of {result.rows:,}</h2>
<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>
<h2>Rejected rows</h2>
<p>{result.rejected.count:,} rows could not be used.</p><ul>{rejected}</ul>
<h2>Summary</h2>
<pre>{html.escape(json.dumps(summary.counts, indent=2))}</pre>
</body></html>
"""


#: The report files by kind, written next to the table.
REPORT_FILES = {"summary": "summary.json", "markdown": "report.md", "html": "report.html"}


def write_reports(request: AnalyzeRequest, result: AnalyzeResult) -> dict[str, DataPath]:
    """Write ``summary.json``, ``report.md`` and ``report.html`` next to the
    table (a local directory, or a Hadoop URI through Spark:
    :func:`quotaform.analytics.jobs.write_files`); returns where each kind went."""
    summary = summary_of(request, result)
    texts = {
        "summary": render_summary_json(summary),
        "markdown": _markdown(request, result),
        "html": _html(request, result, summary),
    }
    written = write_files(request, {REPORT_FILES[kind]: text for kind, text in texts.items()})
    return {kind: written[REPORT_FILES[kind]] for kind in texts}
