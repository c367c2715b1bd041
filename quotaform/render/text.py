"""Human renderings of a plan: rich text for a terminal, markdown for a pull request."""

from __future__ import annotations

import json

from rich.text import Text

from quotaform.entity import Entity
from quotaform.plan import Action, EntityChange, KeyAction, Plan
from quotaform.units import format_quota_value

__all__ = ["entity_label", "render_markdown", "render_text", "summary_line"]

_STYLE = {
    Action.CREATE: "green",
    Action.UPDATE: "yellow",
    Action.DELETE: "bold red",
    Action.NO_OP: "dim",
}
_KEY_SYMBOL = {KeyAction.ADD: "+", KeyAction.CHANGE: "~", KeyAction.REMOVE: "-"}
_KEY_STYLE = {KeyAction.ADD: "green", KeyAction.CHANGE: "yellow", KeyAction.REMOVE: "red"}


def entity_label(entity: Entity) -> str:
    """``user="svc-a", client-id=<default>``: names JSON-quoted, so a user
    literally named ``"<default>"`` never reads as the default entity."""
    return ", ".join(
        f"{t}=<default>" if n is None else f"{t}={json.dumps(n, ensure_ascii=False)}"
        for t, n in entity.parts
    )


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


def _key_lines(plan: Plan, change: EntityChange) -> list[tuple[KeyAction, str]]:
    lines = []
    for kc in change.key_changes:
        if kc.action is KeyAction.CHANGE:
            body = f"{kc.key} = {_value(kc.key, kc.before)} -> {_value(kc.key, kc.after)}"
        elif kc.action is KeyAction.ADD:
            body = f"{kc.key} = {_value(kc.key, kc.after)}"
        else:
            body = f"{kc.key} = {_value(kc.key, kc.before)}"
            fallback = plan.fallbacks.get((change.entity, kc.key))
            if fallback is not None:
                body += f"  (then {fallback})"
        lines.append((kc.action, body))
    return lines


def render_text(plan: Plan) -> Text:
    """The plan as rich ``Text``: print it with a ``Console`` (colour on a TTY),
    or take ``.plain`` for plain text. Changes sorted by entity; no-ops omitted."""
    out = Text()
    where = f'cluster "{plan.cluster}"' + (f" (id {plan.cluster_id})" if plan.cluster_id else "")
    pending = plan.pending
    if pending:
        out.append(f"quotaform will perform the following actions on {where}:\n\n")
        out.append("  + create   ~ update   - delete\n\n", style="dim")
    for change in pending:
        style = _STYLE[change.action]
        out.append(f"  {change.action.symbol} {entity_label(change.entity)}", style=style)
        if change.action is Action.DELETE:
            out.append("  (delete: not declared by any manifest)", style="bold red")
        elif change.source:
            out.append(f"  ({change.source})", style="dim")
        out.append("\n")
        for action, body in _key_lines(plan, change):
            out.append(f"      {_KEY_SYMBOL[action]} {body}\n", style=_KEY_STYLE[action])
        out.append("\n")
    for warning in plan.warnings:
        out.append(f"Warning: {warning}\n", style="bold yellow")
    if plan.warnings:
        out.append("\n")
    if plan.violations:
        out.append("Refused by guard rails: apply will not run this plan.\n", style="bold red")
        for violation in plan.violations:
            out.append(f"  ! {violation}\n", style="red")
        out.append("\n")
    if not pending:
        out.append(f"{where}: ", style="bold")
    out.append(summary_line(plan) + "\n", style="bold")
    out.append(_footer(plan) + "\n", style="dim")
    return out


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(plan: Plan) -> str:
    """The plan as GitHub-flavoured markdown for a pull-request comment."""
    lines = [f"### quotaform plan: `{plan.cluster}`", ""]
    if plan.cluster_id:
        lines += [f"Cluster id `{plan.cluster_id}`", ""]
    lines += [f"**{summary_line(plan)}**", ""]
    for warning in plan.warnings:
        lines += [f"> **Warning:** {_md_cell(warning)}", ""]
    if plan.violations:
        lines += ["> **Refused by guard rails:** apply will not run this plan.", ">"]
        lines += [f"> - {_md_cell(str(v))}" for v in plan.violations]
        lines.append("")
    pending = plan.pending
    if pending:
        lines += [
            "| | Entity | Quota key | Before | After |",
            "|---|---|---|---|---|",
        ]
        for change in pending:
            label = f"`{_md_cell(entity_label(change.entity))}`"
            if change.action is Action.DELETE:
                label = f"**DELETE** {label}"
            first = True
            for kc in change.key_changes:
                after = _value(kc.key, kc.after)
                fallback = plan.fallbacks.get((change.entity, kc.key))
                if kc.action is KeyAction.REMOVE and fallback is not None:
                    after = f"_{_md_cell(str(fallback))}_"
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
