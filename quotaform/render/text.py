"""Human renderings of a plan and its review: rich text for a terminal,
markdown for a pull request."""

from __future__ import annotations

from rich.text import Text

from quotaform.kafka.units import format_quota_value
from quotaform.plan.model import Action, EntityChange, KeyAction, Plan
from quotaform.plan.review import PlanReview
from quotaform.render.words import blocked_deletes_warning, fallback_text, violation_line

__all__ = ["plan_warnings", "render_markdown", "render_text", "summary_line"]

_STYLE = {
    Action.CREATE: "green",
    Action.UPDATE: "yellow",
    Action.DELETE: "bold red",
    Action.NO_OP: "dim",
}
_KEY_SYMBOL = {KeyAction.ADD: "+", KeyAction.CHANGE: "~", KeyAction.REMOVE: "-"}
_KEY_STYLE = {KeyAction.ADD: "green", KeyAction.CHANGE: "yellow", KeyAction.REMOVE: "red"}


def plan_warnings(plan: Plan, review: PlanReview | None) -> list[str]:
    """The manifests' warnings, then the review's note on blocked deletes."""
    warnings = list(plan.warnings)
    if review is not None and review.blocked_deletes:
        warnings.append(blocked_deletes_warning(review.blocked_deletes))
    return warnings


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


def render_text(plan: Plan, review: PlanReview | None = None) -> Text:
    """The plan as rich ``Text``: print it with a ``Console`` (colour on a TTY),
    or take ``.plain`` for plain text. Changes sorted by entity; no-ops
    omitted; with ``review``, removed keys' fallbacks, blocked deletes and
    guard-rail violations."""
    out = Text()
    where = f'cluster "{plan.cluster}"' + (f" (id {plan.cluster_id})" if plan.cluster_id else "")
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
            out.append(f"  ({change.source})", style="dim")
        out.append("\n")
        for action, body in _key_lines(change, review):
            out.append(f"      {_KEY_SYMBOL[action]} {body}\n", style=_KEY_STYLE[action])
        out.append("\n")
    warnings = plan_warnings(plan, review)
    for warning in warnings:
        out.append(f"Warning: {warning}\n", style="bold yellow")
    if warnings:
        out.append("\n")
    if review is not None and review.violations:
        out.append("Refused by guard rails: apply will not run this plan.\n", style="bold red")
        for violation in review.violations:
            out.append(f"  ! {violation_line(violation)}\n", style="red")
        out.append("\n")
    if not pending:
        out.append(f"{where}: ", style="bold")
    out.append(summary_line(plan) + "\n", style="bold")
    out.append(_footer(plan) + "\n", style="dim")
    return out


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(plan: Plan, review: PlanReview | None = None) -> str:
    """The plan as GitHub-flavoured markdown for a pull-request comment."""
    lines = [f"### quotaform plan: `{plan.cluster}`", ""]
    if plan.cluster_id:
        lines += [f"Cluster id `{plan.cluster_id}`", ""]
    lines += [f"**{summary_line(plan)}**", ""]
    for warning in plan_warnings(plan, review):
        lines += [f"> **Warning:** {_md_cell(warning)}", ""]
    if review is not None and review.violations:
        lines += ["> **Refused by guard rails:** apply will not run this plan.", ">"]
        lines += [f"> - {_md_cell(violation_line(v))}" for v in review.violations]
        lines.append("")
    pending = plan.pending
    if pending:
        lines += [
            "| | Entity | Quota key | Before | After |",
            "|---|---|---|---|---|",
        ]
        for change in pending:
            label = f"`{_md_cell(change.entity.label())}`"
            if change.action is Action.DELETE:
                label = f"**DELETE** {label}"
            first = True
            for kc in change.key_changes:
                after = _value(kc.key, kc.after)
                fallback = review.fallbacks.get((change.entity, kc.key)) if review else None
                if kc.action is KeyAction.REMOVE and fallback is not None:
                    after = f"_{_md_cell(fallback_text(fallback))}_"
                lines.append(
                    f"| {change.action.symbol if first else ''} "
                    f"| {label if first else ''} "
                    f"| {_KEY_SYMBOL[kc.action]} `{kc.key}` "
                    f"| {_value(kc.key, kc.before)} "
                    f"| {after} |"
                )
                first = False
        lines.append("")
    lines += [f"<sub>{_md_cell(_footer(plan))}</sub>", ""]
    return "\n".join(lines)
