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
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from quotaform.analytics.jobs import BUCKETS, AnalyzeRequest, AnalyzeResult, Command
from quotaform.formats.analyze import AnalyzeSummary, RejectedDoc, render_summary_json
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.units import format_quota_value

__all__ = ["summary_of", "write_reports"]

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
    ),
    Command.impact: (
        ("group", None),
        ("quota_key", "quota_key"),
        ("before", "quota_before"),
        ("after", "quota_after"),
        ("level", None),
        ("group change", "group_change"),
        ("p99", "p99"),
        ("predicted throttle", "predicted_throttle_ms"),
        ("newly throttled", "newly_throttled"),
    ),
    Command.recommend: (
        ("group", None),
        ("quota_key", "quota_key"),
        ("now", "quota_value"),
        ("peak p99", "peak_p99"),
        ("recommended", "recommended_text"),
        ("censored", "censored"),
        ("note", "note"),
    ),
}


def summary_of(request: AnalyzeRequest, result: AnalyzeResult) -> AnalyzeSummary:
    """The JSON summary of a run."""
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
            ),
            "configurations": [f"{c.cluster}: {c.source}" for c in request.configs],
            "counts": result.extra,
            "histogram": result.histogram,
            "top": [{k: _jsonable(v) for k, v in row.items()} for row in result.top],
            "seconds": {k: round(v, 3) for k, v in result.seconds.items()},
        }
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _group(row: Mapping[str, Any]) -> str:
    if row.get("ip"):
        where = f"ip={row['ip']}"
    else:
        where = (
            ", ".join(
                f"{n}={row[c]}" for n, c in (("user", "user"), ("client-id", "client_id")) if row[c]
            )
            or "(no tags)"
        )
    broker = f" @{row['broker']}" if row.get("broker") else ""
    return f"{row['cluster']}: {where}{broker}"


def _cell(key: str, column: str | None, row: Mapping[str, Any]) -> str:
    if column is None:
        if key == "group":
            return _group(row)
        return f"{row.get('level_before')} -> {row.get('level_after')}"
    value = row.get(column)
    if value is None:
        return "unlimited" if column in ("quota_value", "quota_before", "quota_after") else ""
    if column in ("quota_value", "quota_before", "quota_after", "p99", "peak_p99"):
        if not math.isfinite(value):
            return ""
        shown = round(value) if QUOTA_KEYS[row["quota_key"]].unit == "bytes/s" else value
        return format_quota_value(row["quota_key"], float(shown))
    if column in ("utilisation_p99", "throttled_share"):
        return f"{value:.0%}"
    if column == "predicted_throttle_ms":
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


def _markdown(request: AnalyzeRequest, result: AnalyzeResult) -> str:
    def md(text: str) -> str:
        return html.escape(text, quote=False).replace("|", "\\|")

    lines = [
        f"### quotaform analyze {request.command.value}",
        "",
        f"**{md(_headline(request, result))}**",
        "",
    ]
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
    return "\n".join(lines)


def _png(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _plots(request: AnalyzeRequest, result: AnalyzeResult) -> list[tuple[str, str]]:
    """``(caption, base64 PNG)`` per plot."""
    if request.command is not Command.utilisation:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots = []
    if result.histogram:
        order = [f"< {b:g}" for b in BUCKETS] + [f">= {BUCKETS[-1]:g}", "unlimited"]
        labels = [o for o in order if o in result.histogram]
        figure, axis = plt.subplots(figsize=(6, 2.6))
        axis.bar(labels, [result.histogram[label] for label in labels], color="#4c72b0")
        axis.set_xlabel("usage p99 / quota")
        axis.set_ylabel("group series")
        axis.set_title("Utilisation at p99")
        plots.append(
            ("How close every group runs to its quota (p99 of usage / quota).", _png(figure))
        )
        plt.close(figure)
    for label, points in result.series.items():
        if not points:
            continue
        figure, axis = plt.subplots(figsize=(6, 2.4))
        times: Any = [p[0] for p in points]
        axis.plot(times, [p[1] for p in points], lw=1, label="usage")
        quota = points[0][2]
        if quota is not None:
            axis.axhline(quota, ls="--", color="#c44e52", label="quota")
        axis.set_title(label, fontsize=9)
        axis.legend(fontsize=7, loc="upper left")
        figure.autofmt_xdate()
        plots.append((f"Usage against the quota over time: {label}", _png(figure)))
        plt.close(figure)
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
        for caption, data in _plots(request, result)
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


def write_reports(request: AnalyzeRequest, result: AnalyzeResult) -> dict[str, Path]:
    """Write ``summary.json``, ``report.md`` and ``report.html`` next to the
    table; returns their paths by kind."""
    summary = summary_of(request, result)
    paths = {
        "summary": request.out / "summary.json",
        "markdown": request.out / "report.md",
        "html": request.out / "report.html",
    }
    paths["summary"].write_text(render_summary_json(summary), encoding="utf-8")
    paths["markdown"].write_text(_markdown(request, result), encoding="utf-8")
    paths["html"].write_text(_html(request, result, summary), encoding="utf-8")
    return paths
