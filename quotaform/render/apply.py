"""The human rendering of an apply result (JSON: ``quotaform.formats.apply``)."""

from __future__ import annotations

from rich.text import Text

from quotaform.plan.outcome import (
    ApplyResult,
    ApplyStatus,
    BrokerReadBack,
    BrokerState,
    EntityOutcome,
)

__all__ = ["render_apply_text"]

_AFTER_A_LOSS = (
    "What the cluster holds now is not fully known: run `quotaform plan` once the "
    "cluster answers again, and apply again to finish (re-applying is safe)."
)


def render_apply_text(result: ApplyResult) -> Text:
    """The result as rich ``Text``: a validate_only rejection lists every
    rejected entity; a lost connection before any real alter says nothing was
    applied; otherwise failed, unknown, not-applied and unconverged entities
    one per line, then every broker the read-back could not confirm (a
    cluster of several brokers), then one summary line with the counts and
    the read-back, and what to do when the outcome is not fully known."""
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
    if result.status is ApplyStatus.NOTHING_APPLIED:
        out.append(
            f"\nNothing was applied: {result.error}. No AlterClientQuotas request with "
            "changes left quotaform, so the cluster is as it was.\n",
            style="bold red",
        )
        return out
    counts = {o: len(result.by_outcome(o)) for o in EntityOutcome}
    for r in result.entities:
        label = r.change.entity.label()
        if r.outcome is EntityOutcome.FAILED:
            out.append(f"  failed       {label}: {r.message}\n", style="red")
        elif r.outcome is EntityOutcome.UNKNOWN:
            if r.live_after is None:
                seen = "not read back"
            else:
                seen = "read-back matches the plan" if r.converged else "read-back differs"
            out.append(f"  unknown      {label}: {r.message}; {seen}\n", style="yellow")
        elif r.outcome is EntityOutcome.NOT_APPLIED:
            out.append(f"  not applied  {label}: {r.message}\n", style="yellow")
        elif r.live_after is not None and not r.converged:
            out.append(
                f"  applied      {label}, but read-back shows {dict(r.live_after)} "
                f"instead of {dict(r.change.after)}\n",
                style="yellow",
            )
    unconfirmed = result.unconfirmed_brokers
    for b in unconfirmed:
        out.append(
            f"  {b.state.value:<12} {b.broker.label()}: {_broker_detail(b)}\n", style="yellow"
        )
    rpcs = ", ".join(f"{n} {api}" for api, n in result.rpc_counts.items())
    on = ""
    if result.brokers:
        on = f" on all {len(result.brokers)} brokers"
        if unconfirmed:
            names = ", ".join(f"{b.broker.label()} {b.state.value}" for b in unconfirmed)
            on = f" on {len(unconfirmed)} of {len(result.brokers)} brokers ({names})"
    if result.readback_error is not None:
        readback = f"read-back FAILED ({result.readback_error})"
    else:
        matched = all(r.converged for r in result.entities) and not unconfirmed
        readback = (
            f"read-back {'matched' if matched else 'did NOT match'}{on} "
            f"after {result.readback_seconds:.1f}s"
        )
    line = (
        f"Apply {'complete' if result.status is ApplyStatus.APPLIED else 'incomplete'}: "
        f"{counts[EntityOutcome.APPLIED]} applied, {counts[EntityOutcome.FAILED]} failed, "
        f"{counts[EntityOutcome.UNKNOWN]} unknown, {counts[EntityOutcome.NOT_APPLIED]} "
        f"not applied; {readback} ({rpcs}).\n"
    )
    style = "bold green" if result.status is ApplyStatus.APPLIED else "bold red"
    out.append("\n" + line, style=style)
    if result.uncertain or counts[EntityOutcome.NOT_APPLIED]:
        out.append(_AFTER_A_LOSS + "\n", style="bold")
    return out


_SHOWN = 5


def _broker_detail(found: BrokerReadBack) -> str:
    """Why a broker is not confirmed, in a few words."""
    if found.state is BrokerState.FENCED:
        return "fenced: it serves no clients and could not be read"
    if found.state is BrokerState.UNREACHABLE:
        return f"no answer ({found.error})"
    shown = ", ".join(e.label() for e in found.differing[:_SHOWN])
    more = f" and {len(found.differing) - _SHOWN} more" if len(found.differing) > _SHOWN else ""
    n = len(found.differing)
    return f"{n} applied entit{'y' if n == 1 else 'ies'} not shown as planned: {shown}{more}"
