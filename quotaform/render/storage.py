"""How storage-aware quotas read: the scaling in plans and drift reports,
and ``storage status`` (text and markdown)."""

from __future__ import annotations

from quotaform.kafka.units import format_bytes, format_duration, format_readable
from quotaform.plan.storage_types import (
    SCALED_KEY,
    StorageEvaluation,
    StoragePolicy,
    StorageScaling,
    applied_factor_text,
    computed_factor_text,
    volumes_factor_text,
)
from quotaform.render.md import md_code, md_text

__all__ = [
    "policy_line",
    "scaling_headline",
    "scaling_lines",
    "scaling_markdown",
    "status_markdown",
    "status_text",
]


def _rate(value: float) -> str:
    return format_readable(SCALED_KEY, value)


def _age(age_s: float | None) -> str:
    return "no snapshot" if age_s is None else format_duration(age_s)


def _ages(scaling: StorageScaling) -> str:
    return ", ".join(f"broker {b} {_age(a)}" for b, a in scaling.ages.items())


def scaling_headline(scaling: StorageScaling) -> str:
    """``Storage policy: THROTTLE, factor 0.50 (volumes give 0.505; ...)``:
    the factor written first, the one the volumes give beside it (``no
    volume judged`` when every broker was unknown)."""
    held = " (kept: within one step of the live factor)" if scaling.held else ""
    why = f"; {scaling.reason}" if scaling.reason else ""
    return (
        f"Storage policy: {scaling.state.value}, factor {applied_factor_text(scaling.factor)}"
        f"{held} ({volumes_factor_text(scaling.computed, judged=scaling.judged)}{why})"
    )


def scaling_lines(scaling: StorageScaling) -> list[str]:
    """The scaling as plain lines: the state, factor and reason, snapshot
    ages, then per scaled entity declared x factor -> written."""
    lines = [scaling_headline(scaling), f"  snapshot ages: {_ages(scaling) or 'none'}"]
    for key in scaling.scaled:
        lines.append(
            f"  {key.entity.label()}: {SCALED_KEY} declared {_rate(key.declared)} x "
            f"{applied_factor_text(scaling.factor)} ({scaling.state.value}) -> writes "
            f"{_rate(key.written)}"
        )
    for entity in scaling.exempt:
        lines.append(f"  {entity.label()}: exempt, {SCALED_KEY} as declared")
    return lines


def scaling_markdown(scaling: StorageScaling) -> list[str]:
    """The scaling as markdown lines (a table of the scaled entities)."""
    lines = [f"**{md_text(scaling_headline(scaling))}**", ""]
    lines += [f"Snapshot ages: {md_text(_ages(scaling) or 'none')}", ""]
    if scaling.scaled:
        lines += ["| Entity | Declared | Factor | State | Written |", "|---|---|---|---|---|"]
        lines += [
            f"| {md_code(k.entity.label())} | {md_text(_rate(k.declared))} | "
            f"{applied_factor_text(scaling.factor)} | {scaling.state.value} | "
            f"{md_text(_rate(k.written))} |"
            for k in scaling.scaled
        ]
        lines.append("")
    if scaling.exempt:
        exempt = ", ".join(md_code(e.label()) for e in scaling.exempt)
        lines += [f"Exempt ({SCALED_KEY} as declared): {exempt}", ""]
    return lines


def policy_line(policy: StoragePolicy) -> str:
    """``soft MinFreeBytes 100GiB, hard MinFreeBytes 50GiB, staleAfter 5m,
    onUnknown PAUSE, pauseRate 1KiB``: in the manifests' units."""
    return (
        f"soft {policy.soft}, hard {policy.hard}, staleAfter "
        f"{format_duration(policy.stale_after_s)}, onUnknown {policy.on_unknown.value}, "
        f"pauseRate {_rate(policy.pause_rate)}"
    )


def _where(cluster: str, source: str) -> str:
    return f'cluster "{cluster}", volume usage from {source}'


def status_text(
    policy: StoragePolicy,
    evaluation: StorageEvaluation,
    scaling: StorageScaling,
    *,
    cluster: str,
    source: str,
) -> str:
    """``storage status`` as text: the scaling's headline (the factor
    written first), where the numbers come from, the policy, then per broker
    and volume, then what each scaled entity's ``producer_byte_rate``
    becomes. Bytes and durations in the manifests' units; exact bytes are in
    ``-o json``."""
    lines = [
        scaling_headline(scaling),
        f"Source: {_where(cluster, source)}",
        f"Policy: {policy_line(policy)}",
        "",
    ]
    for broker in evaluation.brokers:
        head = f"broker {broker.broker_id}: {broker.status}, "
        if broker.status in ("stale", "missing") and broker.reason:
            head += broker.reason  # it says the age (or that there is none) itself
        else:
            head += "no snapshot" if broker.age_s is None else f"snapshot {_age(broker.age_s)} old"
            if broker.state is not None and broker.factor is not None:
                head += f", {broker.state.value} {computed_factor_text(broker.factor)}"
            if broker.reason:
                head += f" ({broker.reason})"
        lines.append(head)
        for v in broker.volumes:
            vol = v.volume
            binding = f", {v.binding} limit binds" if v.binding else ""
            lines.append(
                f"  {vol.name}: capacity {format_bytes(vol.capacity)}, consumed "
                f"{format_bytes(vol.consumed)}, free {format_bytes(vol.free)}; soft at "
                f"{format_bytes(vol.capacity - v.soft_at)} free, hard at "
                f"{format_bytes(vol.capacity - v.hard_at)} free{binding}: {v.state.value} "
                f"{computed_factor_text(v.factor)}"
            )
    lines += ["", *scaling_lines(scaling)[1:]]
    if not evaluation.expected_known:
        lines += [
            "",
            "Note: no cluster connection, so only the brokers in the snapshots were judged.",
        ]
    return "\n".join(lines) + "\n"


def status_markdown(
    policy: StoragePolicy,
    evaluation: StorageEvaluation,
    scaling: StorageScaling,
    *,
    cluster: str,
    source: str,
) -> str:
    """``storage status`` as markdown, for a ticket or a review: the
    scaling's headline, the source and the policy, one table row per
    volume, and the scaled entities' ``producer_byte_rate`` values."""
    scaled = scaling_markdown(scaling)
    lines = [
        "### quotaform storage status",
        "",
        scaled[0],
        "",
        f"Source: {md_text(_where(cluster, source))}  ",
        f"Policy: {md_text(policy_line(policy))}",
        "",
        "| Broker | Snapshot age | Volume | Capacity | Consumed | Free | Binds | State | Factor |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for b in evaluation.brokers:
        age = "-" if b.age_s is None else format_duration(b.age_s)
        if not b.volumes:
            lines.append(
                f"| {b.broker_id} | {age} | _{md_text(b.status)}: {md_text(b.reason or '')}_ "
                "| | | | | | |"
            )
        for v in b.volumes:
            vol = v.volume
            lines.append(
                f"| {b.broker_id} | {age} | {md_code(vol.name)} | {format_bytes(vol.capacity)} | "
                f"{format_bytes(vol.consumed)} | {format_bytes(vol.free)} | {v.binding or ''} | "
                f"{v.state.value} | {computed_factor_text(v.factor)} |"
            )
    lines += ["", *scaled[2:]]
    return "\n".join(lines)
