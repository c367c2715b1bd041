"""Renderings of explanations (``quotaform explain``) and of the probe view
of plans and drift reports: text for a terminal or a log, markdown for a pull
request (JSON: :mod:`quotaform.formats.explain`). Every sentence comes from
:mod:`quotaform.words`."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

from quotaform.kafka.resolution import Match, Resolution
from quotaform.kafka.units import format_quota_value
from quotaform.plan.enforcement import QuotaEnforcement
from quotaform.plan.explain import ChangedKey, Explanation, KeyExplanation, ProbeImpact
from quotaform.render.md import md_code, md_text
from quotaform.words import (
    NO_SENSOR,
    change_text,
    effective_text,
    enforcement_mark,
    enforcement_warning,
    group_text,
    level_text,
    per_broker_sentence,
    principal_text,
    probe_enforcement_line,
    tags_text,
    unnamed_text,
    value_text,
)

if TYPE_CHECKING:  # rich for explain's own text only: a plan's probes are plain lines
    from rich.text import Text

__all__ = [
    "VARIANTS_SHOWN",
    "WIDTH",
    "probe_markdown",
    "probe_text",
    "render_explain_markdown",
    "render_explain_text",
]

#: Entries listed for a name left unknown; the rest are counted.
VARIANTS_SHOWN = 5
#: Columns the text explanation is wrapped to (a terminal passes its own width).
WIDTH = 80
_KEY_WIDTH = 26
#: How much deeper than its line a wrapped line's continuation is indented.
_HANG = 2
_NAMES = {"user": "users", "client-id": "client ids"}
#: A level (``level 2 {user=U, client-id=<default>}``) stays on one line.
_UNBROKEN = re.compile(r"(?:level \d+ )?\{[^{}]*\}")
_GLUE = "\x00"  # not whitespace to textwrap; never in a rendered line (escaped)


def _wrap(lines: Sequence[str], width: int, indent: int = 2 + _KEY_WIDTH) -> list[str]:
    """Each of ``lines`` wrapped at ``width`` columns, continuations indented
    ``indent`` + 2 (never at column 0, and deeper than the text they continue);
    names, MBeans and hyphenated words are never broken, so a longer one
    overflows rather than splits."""
    out = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        kept = _UNBROKEN.sub(lambda m: m.group().replace(" ", _GLUE), line)
        out += [
            wrapped.replace(_GLUE, " ")
            for wrapped in textwrap.wrap(
                kept,
                width=width,
                subsequent_indent=" " * (indent + _HANG),
                break_long_words=False,
                break_on_hyphens=False,
            )
        ]
    return out


def _match_text(key: str, match: Match) -> str:
    return (
        f"{match.entity.label()} {format_quota_value(key, match.value)} ({level_text(match.level)})"
    )


def _unknown(explained: KeyExplanation, principal_unknown: Sequence[str]) -> str | None:
    if not explained.variants:
        return None
    key = explained.resolution.key
    shown = "; ".join(_match_text(key, m) for m in explained.variants[:VARIANTS_SHOWN])
    more = len(explained.variants) - VARIANTS_SHOWN
    extra = f"; and {more} more" if more > 0 else ""
    what = " and ".join(principal_unknown) or "an unknown name"
    names = _NAMES[principal_unknown[0]] if len(principal_unknown) == 1 else "names"
    return (
        f"depends on the {what}: the value above is for {names} without entries of their "
        f"own. {names.capitalize()} with entries of their own get these instead: {shown}{extra}"
    )


def _group_line(res: Resolution) -> str:
    if not res.recorded:  # no tags to name: nothing is recorded
        return group_text(res)
    return f"quota group {tags_text(res.tags)}: {group_text(res)}"


def _overridden_lines(key: str, explained: KeyExplanation) -> list[str]:
    return [
        f"  {'':<{_KEY_WIDTH}}* overridden: {_match_text(key, m)}" for m in explained.overridden
    ]


def _mark(enforcement: QuotaEnforcement | None, key: str) -> str:
    """``[not enforced] `` before a value the brokers do not (or may not) enforce."""
    if enforcement is None:
        return ""
    mark = enforcement_mark(enforcement.enforced_for([key]))
    return f"{mark} " if mark else ""


def _key_lines(
    explanation: Explanation,
    key: str,
    explained: KeyExplanation,
    enforcement: QuotaEnforcement | None = None,
) -> list[str]:
    unknown = [t for t, n in explanation.principal.as_dict().items() if n is None and t != "ip"]
    effective = effective_text(explained.resolution)
    mark = _mark(enforcement, key)  # a callback picks the quota group too
    lines = [f"  {key:<{_KEY_WIDTH}}{mark}{effective}"]
    lines.append(f"  {'':<{_KEY_WIDTH}}{mark}{_group_line(explained.resolution)}")
    lines += _overridden_lines(key, explained)
    note = _unknown(explained, unknown)
    if note is not None:
        lines.append(f"  {'':<{_KEY_WIDTH}}{note}")
    return lines


def _hints(explanation: Explanation) -> list[str]:
    """The names no entry gives (a typo answered from the defaults)."""
    return [
        "Hint: " + unnamed_text(u.entity_type, u.name, u.named, u.closest)
        for u in explanation.unnamed
    ]


def _unlimited_sentence(
    explanation: Explanation, enforcement: QuotaEnforcement | None = None
) -> str:
    who = principal_text(explanation.principal)
    if enforcement is not None and enforcement.enforced_for(explanation.keys) is not True:
        return (
            f"No entry applies to {who}: under Kafka's default resolution every quota key "
            "would be unlimited, but that is not what the brokers are known to enforce (see "
            "above)."
        )
    return f"No entry applies to {who}: every quota key is unlimited (nothing throttles it)."


def _enforcement_lines(explanation: Explanation, enforcement: QuotaEnforcement | None) -> list[str]:
    """How the brokers enforce the answer: per broker, and the warning that a
    quota callback (or an unreadable broker) makes the resolution shown not
    (or not surely) what they enforce. Nothing when not known (offline)."""
    if enforcement is None:
        return []
    lines = [per_broker_sentence(enforcement.count)]
    warning = enforcement_warning(enforcement, explanation.keys)
    if warning is not None:
        lines.append(f"Warning: {warning}")
    return lines


def render_explain_text(
    explanation: Explanation,
    *,
    where: str,
    before: Explanation | None = None,
    changed: Sequence[ChangedKey] = (),
    width: int = WIDTH,
    enforcement: QuotaEnforcement | None = None,
) -> Text:
    """One principal, every key: value and source (level), quota group, the
    entries it overrides, what an unknown name changes. With ``before`` (a
    saved plan): each key before -> after and what moved. With
    ``enforcement`` (the live cluster, or a plan that recorded it): the
    number of brokers each limit applies on, and values a quota callback
    decides instead marked ``[not enforced]`` under a warning naming it.
    Lines longer than ``width`` wrap with their indent kept."""
    from rich.text import Text

    out = Text()
    head = f"quotaform explain: {principal_text(explanation.principal)}"
    first, *rest = _wrap([f"{head}  ({where})"], width, indent=0)
    out.append(head, style="bold")
    out.append(first[len(head) :] + "".join(f"\n{line}" for line in rest) + "\n\n")
    said = _enforcement_lines(explanation, enforcement)
    if said:
        out.append("\n".join(_wrap(said, width, indent=0)) + "\n\n")
    hints = _hints(explanation)
    if hints:
        out.append("\n".join(_wrap(hints, width, indent=4)) + "\n\n")
    if before is None:
        if explanation.unlimited:
            unlimited = _unlimited_sentence(explanation, enforcement)
            out.append("\n".join(_wrap([unlimited], width, 0)) + "\n\n")
        for key, explained in explanation.keys.items():
            lines = _key_lines(explanation, key, explained, enforcement)
            out.append("\n".join(_wrap(lines, width)) + "\n")
        return out
    moved = [c for c in changed if c.changed]
    out.append(
        f"The plan changes {len(moved)} of {len(changed)} quota key(s) for this client.\n\n"
        if moved
        else "The plan changes nothing for this client.\n\n"
    )
    for change in changed:
        lines = _change_lines(change, enforcement) + _overridden_lines(change.key, change.after)
        out.append("\n".join(_wrap(lines, width)) + "\n")
    return out


def _change_lines(change: ChangedKey, enforcement: QuotaEnforcement | None = None) -> list[str]:
    was, now = change.before.resolution, change.after.resolution
    mark = "~" if change.changed else " "
    if change.value_changed or change.source_changed:
        head = change_text(was, now)
    else:
        head = f"{effective_text(now)} (unchanged)"
    lines = [f"{mark} {change.key:<{_KEY_WIDTH}}{_mark(enforcement, change.key)}{head}"]
    lines.append(f"  {'':<{_KEY_WIDTH}}{_group_change(change)}")
    return lines


def _group_change(change: ChangedKey) -> str:
    """``quota group moves: A -> B (who shares B)``, or the group as it stays."""
    was, now = change.before.resolution, change.after.resolution
    if not change.group_changed:
        return _group_line(now)
    if not was.recorded:
        return f"new quota group {tags_text(now.tags)}: {group_text(now)}"
    if not now.recorded:
        return f"quota group {tags_text(was.tags)} ends: {NO_SENSOR}"
    return f"quota group moves: {tags_text(was.tags)} -> {tags_text(now.tags)} ({group_text(now)})"


def _group_cell(change: ChangedKey) -> str:
    was, now = change.before.resolution, change.after.resolution
    if not change.group_changed:
        return tags_text(now.tags) if now.recorded else "no quota group"
    if not was.recorded:
        return f"new: {tags_text(now.tags)}"
    if not now.recorded:
        return f"ends: {tags_text(was.tags)}"
    return f"moves: {tags_text(was.tags)} → {tags_text(now.tags)}"


def _overridden_cell(key: str, explained: KeyExplanation) -> str:
    return "".join(
        f"<br>* overridden: {md_text(_match_text(key, m))}" for m in explained.overridden
    )


def render_explain_markdown(
    explanation: Explanation,
    *,
    where: str,
    before: Explanation | None = None,
    changed: Sequence[ChangedKey] = (),
    enforcement: QuotaEnforcement | None = None,
) -> str:
    """:func:`render_explain_text` as a GitHub table."""
    lines = [
        f"### quotaform explain: {md_text(principal_text(explanation.principal))}",
        "",
        md_text(where),
        "",
    ]
    for said in _enforcement_lines(explanation, enforcement):
        lines += [f"> {md_text(said)}", ""]
    for hint in _hints(explanation):
        lines += [f"> {md_text(hint)}", ""]
    if before is None:
        if explanation.unlimited:
            lines += [f"**{md_text(_unlimited_sentence(explanation, enforcement))}**", ""]
        lines += ["| Quota key | Effective | Quota group |", "|---|---|---|"]
        for key, explained in explanation.keys.items():
            res = explained.resolution
            extra = _overridden_cell(key, explained)
            mark = _mark(enforcement, key)
            lines.append(
                f"| {md_code(key)} | {md_text(mark + effective_text(res))}{extra} | "
                f"{md_text(mark + _group_line(res))} |"
            )
        return "\n".join(lines) + "\n"
    lines += ["| | Quota key | Before | After | Quota group |", "|---|---|---|---|---|"]
    for change in changed:
        was, now = change.before.resolution, change.after.resolution
        group = _group_cell(change)
        if was.entity == now.entity and now.entity is not None and change.value_changed:
            after = f"{value_text(now)}, source unchanged"
        else:
            after = effective_text(now)
        extra = _overridden_cell(change.key, change.after)
        after = _mark(enforcement, change.key) + after
        lines.append(
            f"| {'~' if change.changed else ''} | {md_code(change.key)} | "
            f"{md_text(effective_text(was))} | {md_text(after)}{extra} | {md_text(group)} |"
        )
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ probes


def _probe_summary(impacts: Sequence[ProbeImpact], heading: str) -> str:
    hit = sum(1 for i in impacts if i.affected)
    if not hit:
        return f"{heading}: none of the {len(impacts)} declared probe(s) is affected."
    return f"{heading}: {hit} of {len(impacts)} declared probe(s) affected."


def _probe_mark(impact: ProbeImpact, enforcement: QuotaEnforcement | None) -> str:
    if enforcement is None:
        return ""
    mark = enforcement_mark(enforcement.enforced_for_principal(impact.probe.principal))
    return f"  {mark}" if mark else ""


def probe_text(
    impacts: Sequence[ProbeImpact],
    heading: str = "Probes",
    enforcement: QuotaEnforcement | None = None,
) -> list[str]:
    """The probe view of a plan or drift report as text lines (nothing when
    no probe is declared): per affected probe and changed key, before ->
    after with the source of each and whether the quota group moves. With
    ``enforcement`` (read from the cluster): how many brokers each limit
    applies on, and probes whose quotas a custom quota callback decides
    marked ``[not enforced]``, the callback named."""
    if not impacts:
        return []
    lines = [_probe_summary(impacts, heading)]
    if enforcement is not None:
        lines.append(f"  {probe_enforcement_line(enforcement)}")
    for impact in impacts:
        if not impact.affected:
            continue
        source = impact.probe.source
        lines.append(
            f"  {principal_text(impact.probe.principal)}  ({source.path}:{source.line})"
            + _probe_mark(impact, enforcement)
        )
        for change in impact.keys:
            lines += [f"    {line}" for line in _change_lines(change)]
    return lines


def probe_markdown(
    impacts: Sequence[ProbeImpact],
    heading: str = "Probes",
    enforcement: QuotaEnforcement | None = None,
) -> list[str]:
    """:func:`probe_text` as markdown lines: a summary and a table."""
    if not impacts:
        return []
    lines = [f"**{md_text(_probe_summary(impacts, heading))}**"]
    if enforcement is not None:
        lines += ["", md_text(probe_enforcement_line(enforcement))]
    affected = [i for i in impacts if i.affected]
    if not affected:
        return lines
    lines += [
        "",
        "| Probe | Quota key | Before | After | Quota group |",
        "|---|---|---|---|---|",
    ]
    for impact in affected:
        for change in impact.keys:
            was, now = change.before.resolution, change.after.resolution
            group = _group_cell(change) if change.group_changed else "unchanged"
            probe = principal_text(impact.probe.principal) + _probe_mark(impact, enforcement)
            lines.append(
                f"| {md_text(probe)} | {md_code(change.key)} | "
                f"{md_text(effective_text(was))} | {md_text(effective_text(now))} | "
                f"{md_text(group)} |"
            )
    return lines
