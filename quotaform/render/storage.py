"""How storage-aware quotas read: the scaling in plans and drift reports,
and ``storage status`` (text and markdown)."""

from __future__ import annotations

from quotaform.kafka.units import format_quota_value
from quotaform.plan.storage_types import (
    SCALED_KEY,
    StorageEvaluation,
    StoragePolicy,
    StorageScaling,
)
from quotaform.render.md import md_code, md_text

__all__ = [
    "scaling_headline",
    "scaling_lines",
    "scaling_markdown",
    "status_markdown",
    "status_text",
]


def _rate(value: float) -> str:
    return format_quota_value(SCALED_KEY, value)


def _ages(scaling: StorageScaling) -> str:
    return ", ".join(
        f"broker {b} {'no snapshot' if a is None else f'{a:.0f} s'}"
        for b, a in scaling.ages.items()
    )


def scaling_headline(scaling: StorageScaling) -> str:
    """``Storage policy: THROTTLE, factor 0.40 (...)``."""
    held = " (kept: within one step of the live factor)" if scaling.held else ""
    why = f"; {scaling.reason}" if scaling.reason else ""
    return (
        f"Storage policy: {scaling.state.value}, factor {scaling.factor:.2f}{held} "
        f"(volumes give {scaling.computed:.3f}{why})"
    )


def scaling_lines(scaling: StorageScaling) -> list[str]:
    """The scaling as plain lines: the state, factor and reason, snapshot
    ages, then per scaled entity declared x factor -> written."""
    lines = [scaling_headline(scaling), f"  snapshot ages: {_ages(scaling) or 'none'}"]
    for key in scaling.scaled:
        lines.append(
            f"  {key.entity.label()}: {SCALED_KEY} declared {_rate(key.declared)} x "
            f"{scaling.factor:.2f} ({scaling.state.value}) -> writes {_rate(key.written)}"
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
            f"{scaling.factor:.2f} | {scaling.state.value} | {md_text(_rate(k.written))} |"
            for k in scaling.scaled
        ]
        lines.append("")
    return lines


def _bytes(n: float) -> str:
    """Bytes for people: ``250.5 GiB``, ``12.0 MiB``, ``512 B`` (JSON keeps exact integers)."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def status_text(policy: StoragePolicy, evaluation: StorageEvaluation) -> str:
    """``storage status`` as text: the cluster state, then per broker and volume."""
    lines = [
        f"Storage: {evaluation.state.value}, factor {evaluation.factor:.3f}"
        + (f" ({evaluation.reason})" if evaluation.reason else ""),
        f"Policy: soft {policy.soft}, hard {policy.hard}, staleAfter {policy.stale_after_s:g} s, "
        f"onUnknown {policy.on_unknown.value}, pauseRate {_rate(policy.pause_rate)}",
        "",
    ]
    for broker in evaluation.brokers:
        age = "no snapshot" if broker.age_s is None else f"snapshot {broker.age_s:.0f} s old"
        head = f"broker {broker.broker_id}: {broker.status}, {age}"
        if broker.state is not None:
            head += f", {broker.state.value} {broker.factor:.3f}"
        if broker.reason:
            head += f" ({broker.reason})"
        lines.append(head)
        for v in broker.volumes:
            vol = v.volume
            binding = f", {v.binding} limit binds" if v.binding else ""
            lines.append(
                f"  {vol.name}: capacity {_bytes(vol.capacity)}, consumed {_bytes(vol.consumed)}, "
                f"free {_bytes(vol.free)}; soft at {_bytes(vol.capacity - v.soft_at)} free, "
                f"hard at {_bytes(vol.capacity - v.hard_at)} free{binding}: "
                f"{v.state.value} {v.factor:.3f}"
            )
    if not evaluation.expected_known:
        lines += [
            "",
            "Note: no cluster connection, so only the brokers in the snapshots were judged.",
        ]
    return "\n".join(lines) + "\n"


def status_markdown(policy: StoragePolicy, evaluation: StorageEvaluation) -> str:
    """``storage status`` as markdown: the state and one table row per volume."""
    lines = [
        "### quotaform storage status",
        "",
        f"**{evaluation.state.value}, factor {evaluation.factor:.3f}**"
        + (f": {md_text(evaluation.reason)}" if evaluation.reason else ""),
        "",
        "| Broker | Snapshot age | Volume | Capacity | Consumed | Free | Binds | State | Factor |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for b in evaluation.brokers:
        age = "-" if b.age_s is None else f"{b.age_s:.0f} s"
        if not b.volumes:
            lines.append(
                f"| {b.broker_id} | {age} | _{md_text(b.status)}: {md_text(b.reason or '')}_ "
                "| | | | | | |"
            )
        for v in b.volumes:
            vol = v.volume
            lines.append(
                f"| {b.broker_id} | {age} | {md_code(vol.name)} | {_bytes(vol.capacity)} | "
                f"{_bytes(vol.consumed)} | {_bytes(vol.free)} | {v.binding or ''} | "
                f"{v.state.value} | {v.factor:.3f} |"
            )
    lines.append("")
    return "\n".join(lines)
