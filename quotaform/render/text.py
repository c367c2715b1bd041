"""Human renderings of a plan and its review: rich text for a terminal,
markdown for a pull request."""

from __future__ import annotations

from typing import TYPE_CHECKING

from quotaform.kafka.entity import escape_unprintable, quote_name
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.units import format_quota_value
from quotaform.plan.model import Action, EntityChange, KeyAction, Plan
from quotaform.plan.review import PlanReview
from quotaform.render.md import md_code, md_text
from quotaform.render.storage import scaling_lines, scaling_markdown
from quotaform.words import enforcement_warning, fallback_text, missing_permissions, violation_line

if TYPE_CHECKING:  # rich is imported for a styled text only, not for its .plain
    from rich.text import Text

__all__ = ["refusal_line", "render_markdown", "render_plain", "render_text", "summary_line"]

_STYLE = {
    Action.CREATE: "green",
    Action.UPDATE: "yellow",
    Action.DELETE: "bold red",
    Action.NO_OP: "dim",
}
_KEY_SYMBOL = {KeyAction.ADD: "+", KeyAction.CHANGE: "~", KeyAction.REMOVE: "-"}
_KEY_STYLE = {KeyAction.ADD: "green", KeyAction.CHANGE: "yellow", KeyAction.REMOVE: "red"}


def refusal_line(review: PlanReview) -> str:
    """``Refused: apply will not run this plan as it stands. Allow it with
    --allow-deletes --allow-relax after review.`` (every missing permission
    at once), or how to lift a protection."""
    flags = missing_permissions(review.violations)
    protected = any(not v.kind.overridable for v in review.violations)
    parts = ["Refused: apply will not run this plan as it stands."]
    if flags:
        parts.append(f"After review, allow it with: {' '.join(flags)} (on plan and apply).")
    if protected:
        parts.append("Protected entities must be lifted in the manifests first.")
    return " ".join(parts)


def _value(key: str, value: float | None) -> str:
    return "" if value is None else format_quota_value(key, value)


def summary_line(plan: Plan) -> str:
    """``Plan: 1 to create, 2 to update, 0 to delete.`` or the no-changes sentence."""
    s = plan.summary
    if not s.has_changes:
        return (
            f"No changes. The cluster matches the manifests "
            f"({s.no_op} entit{'y' if s.no_op == 1 else 'ies'} in scope)."
        )
    return f"Plan: {s.create} to create, {s.update} to update, {s.delete} to delete."


def _footer(plan: Plan) -> str:
    rpcs = ", ".join(f"{n} {api}" for api, n in sorted(plan.rpc_counts.items())) or "no RPCs"
    return (
        f"{plan.summary.no_op} unchanged in scope; {plan.unmanaged} live "
        f"entit{'y' if plan.unmanaged == 1 else 'ies'} outside the scope left alone; "
        f"live state read with {rpcs}."
    )


def _warnings(plan: Plan) -> list[str]:
    """The manifests' warnings, then why the resolution the plan shows
    (fallbacks, probes) may not be what the brokers enforce."""
    warnings = list(plan.warnings)
    if plan.enforcement is not None:
        said = enforcement_warning(plan.enforcement, QUOTA_KEYS)
        if said is not None:
            warnings.append(said)
    return warnings


def _key_lines(change: EntityChange, review: PlanReview | None) -> list[tuple[KeyAction, str]]:
    lines = []
    for kc in change.key_changes:
        if kc.action is KeyAction.CHANGE:
            body = f"{kc.key} = {_value(kc.key, kc.before)} -> {_value(kc.key, kc.after)}"
        elif kc.action is KeyAction.ADD:
            body = f"{kc.key} = {_value(kc.key, kc.after)}"
        else:
            body = f"{kc.key} = {_value(kc.key, kc.before)}"
            fallback = review.fallbacks.get((change.entity, kc.key)) if review else None
            if fallback is not None:
                body += f"  (then {fallback_text(fallback)})"
        lines.append((kc.action, body))
    return lines


class _TextBuilder:
    """Collects ``(text, style)`` pieces and makes one rich ``Text`` of them:
    the same text and styles as ``Text.append`` for each piece, without its
    per-piece work (a third of a second for a 10,000-entity plan); or only
    the plain text, without importing rich."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._spans: list[tuple[int, int, str]] = []
        self._end = 0

    def append(self, piece: str, style: str | None = None) -> None:
        start, self._end = self._end, self._end + len(piece)
        if style and piece:
            self._spans.append((start, self._end, style))
        self._parts.append(piece)

    def plain(self) -> str:
        return "".join(self._parts)

    def text(self) -> Text:
        from rich.text import Span, Text

        out = Text(self.plain())
        out.spans = [Span(*span) for span in self._spans]
        return out


def render_text(plan: Plan, review: PlanReview | None = None) -> Text:
    """The plan as rich ``Text``: print it with a ``Console`` (colour on a TTY),
    or take ``.plain`` for plain text. Changes sorted by entity; no-ops
    omitted; with ``review``, removed keys' fallbacks and, when apply would
    refuse the plan, every reason and every flag that would allow it."""
    return _build_text(plan, review).text()


def render_plain(plan: Plan, review: PlanReview | None = None) -> str:
    """``render_text(plan, review).plain``, made without rich."""
    return _build_text(plan, review).plain()


def _build_text(plan: Plan, review: PlanReview | None) -> _TextBuilder:
    out = _TextBuilder()
    where = f"cluster {quote_name(plan.cluster)}" + (
        f" (id {plan.cluster_id})" if plan.cluster_id else ""
    )
    pending = plan.pending
    if pending:
        out.append(f"quotaform will perform the following actions on {where}:\n\n")
        out.append("  + create   ~ update   - delete\n\n", style="dim")
    for change in pending:
        style = _STYLE[change.action]
        out.append(f"  {change.action.symbol} {change.entity.label()}", style=style)
        if change.action is Action.DELETE:
            out.append("  (delete: not declared by any manifest)", style="bold red")
        elif change.source:
            out.append(f"  ({escape_unprintable(change.source)})", style="dim")
        out.append("\n")
        for action, body in _key_lines(change, review):
            out.append(f"      {_KEY_SYMBOL[action]} {body}\n", style=_KEY_STYLE[action])
        out.append("\n")
    warnings = _warnings(plan)
    for warning in warnings:
        out.append(f"Warning: {escape_unprintable(warning)}\n", style="bold yellow")
    if warnings:
        out.append("\n")
    if review is not None and review.violations:
        out.append(refusal_line(review) + "\n", style="bold red")
        for violation in review.violations:
            out.append(f"  ! {violation_line(violation)}\n", style="red")
        out.append("\n")
    if review is not None and review.probes:
        from quotaform.render.explain import probe_text  # only with probes declared

        for line in probe_text(review.probes, enforcement=plan.enforcement):
            out.append(escape_unprintable(line) + "\n", style="cyan")
        out.append("\n")
    if plan.storage is not None:
        for line in scaling_lines(plan.storage):
            out.append(escape_unprintable(line) + "\n", style="magenta")
        out.append("\n")
    if not pending:
        out.append(f"{where}: ", style="bold")
    out.append(summary_line(plan) + "\n", style="bold")
    out.append(_footer(plan) + "\n", style="dim")
    return out


#: Plans with more entity changes than this fold their table into <details>.
DETAILS_AFTER = 20


def render_markdown(plan: Plan, review: PlanReview | None = None) -> str:
    """The plan as GitHub-flavoured markdown for a pull-request comment: the
    summary, why apply would refuse it (and which flags would allow it), one
    table row per changed key with the declaration's ``file:line`` and what a
    removed key falls back to; long plans fold the table into ``<details>``.
    Everything outside code spans is escaped (``<default>`` reads as itself)."""
    lines = [f"### quotaform plan: {md_code(plan.cluster)}", ""]
    if plan.cluster_id:
        lines += [f"Cluster id {md_code(plan.cluster_id)}", ""]
    lines += [f"**{summary_line(plan)}**", ""]
    for warning in _warnings(plan):
        lines += [f"> **Warning:** {md_text(warning)}", ""]
    if review is not None and review.violations:
        lines += [f"> **{md_text(refusal_line(review))}**", ">"]
        lines += [f"> - {md_text(violation_line(v))}" for v in review.violations]
        lines.append("")
    pending = plan.pending
    if pending:
        table = [
            "| | Entity | Quota key | Before | After | Source |",
            "|---|---|---|---|---|---|",
        ]
        for change in pending:
            label = md_code(change.entity.label())
            if change.action is Action.DELETE:
                label = f"**DELETE** {label}"
            source = md_text(change.source) if change.source else "_not declared_"
            first = True
            for kc in change.key_changes:
                after = md_text(_value(kc.key, kc.after))
                fallback = review.fallbacks.get((change.entity, kc.key)) if review else None
                if kc.action is KeyAction.REMOVE and fallback is not None:
                    after = f"_{md_text('then ' + fallback_text(fallback))}_"
                table.append(
                    f"| {change.action.symbol if first else ''} "
                    f"| {label if first else ''} "
                    f"| {_KEY_SYMBOL[kc.action]} {md_code(kc.key)} "
                    f"| {md_text(_value(kc.key, kc.before))} "
                    f"| {after} "
                    f"| {source if first else ''} |"
                )
                first = False
        if len(pending) > DETAILS_AFTER:
            lines += [
                f"<details><summary>{len(pending)} entities change (click to expand)</summary>",
                "",
                *table,
                "",
                "</details>",
            ]
        else:
            lines += table
        lines.append("")
    if review is not None and review.probes:
        from quotaform.render.explain import probe_markdown  # only with probes declared

        lines += [*probe_markdown(review.probes, enforcement=plan.enforcement), ""]
    if plan.storage is not None:
        lines += scaling_markdown(plan.storage)
    lines += [f"<sub>{md_text(_footer(plan))}</sub>", ""]
    return "\n".join(lines)
