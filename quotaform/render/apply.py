"""The human rendering of an apply result (JSON: ``quotaform.formats.apply``)."""

from __future__ import annotations

from rich.text import Text

from quotaform.cluster.apply import ApplyResult, ApplyStatus, EntityOutcome

__all__ = ["render_apply_text"]


def render_apply_text(result: ApplyResult) -> Text:
    """The result as rich ``Text``: a validate_only rejection lists every
    rejected entity; otherwise failed, unknown and unconverged entities one
    per line, then one summary line with the counts and the read-back."""
    out = Text()
    if result.status is ApplyStatus.REJECTED:
        rejected = [r for r in result.entities if r.message]
        out.append(
            f"\nApply refused by the validate_only pre-check: {len(rejected)} "
            f"entit{'y' if len(rejected) == 1 else 'ies'} rejected. Nothing was applied.\n",
            style="bold red",
        )
        for r in rejected:
            out.append(f"  ! {r.change.entity.label()}: {r.message}\n")
        return out
    counts = {o: len(result.by_outcome(o)) for o in EntityOutcome}
    for r in result.entities:
        label = r.change.entity.label()
        if r.outcome is EntityOutcome.FAILED:
            out.append(f"  failed   {label}: {r.message}\n", style="red")
        elif r.outcome is EntityOutcome.UNKNOWN:
            seen = "matches the plan" if r.converged else "does not match the plan"
            out.append(f"  unknown  {label}: {r.message}; read-back {seen}\n", style="yellow")
        elif not r.converged:
            out.append(
                f"  applied  {label}, but read-back shows {dict(r.live_after or {})} "
                f"instead of {dict(r.change.after)}\n",
                style="yellow",
            )
    rpcs = ", ".join(f"{n} {api}" for api, n in result.rpc_counts.items())
    line = (
        f"Apply {'complete' if result.status is ApplyStatus.APPLIED else 'incomplete'}: "
        f"{counts[EntityOutcome.APPLIED]} applied, {counts[EntityOutcome.FAILED]} failed, "
        f"{counts[EntityOutcome.UNKNOWN]} unknown; read-back "
        f"{'matched' if all(r.converged for r in result.entities) else 'did NOT match'} "
        f"after {result.readback_seconds:.1f}s ({rpcs}).\n"
    )
    style = "bold green" if result.status is ApplyStatus.APPLIED else "bold red"
    out.append("\n" + line, style=style)
    return out
