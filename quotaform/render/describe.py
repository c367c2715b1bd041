"""Renderings of the live view (``quotaform describe``): text in the very lines
``kafka-configs --describe`` prints, markdown as a table with readable units
(JSON: :mod:`quotaform.formats.describe`)."""

from __future__ import annotations

from rich.text import Text

from quotaform.kafka.entity import config_command_label
from quotaform.kafka.units import format_quota_value, java_double_text
from quotaform.plan.state import LiveState
from quotaform.render.md import md_code, md_text

__all__ = ["render_describe_markdown", "render_describe_text"]


def render_describe_text(live: LiveState) -> Text:
    """One line per entity, as ``ConfigCommand`` words it: ``Quota configs for
    user-principal 'alice' are consumer_byte_rate=2.097152E7,
    producer_byte_rate=1048576.0`` (values as Java prints doubles), sorted by
    entity and key. Nothing when nothing matched."""
    lines = []
    for entity, quotas in sorted(live.entities.items(), key=lambda p: p[0].sort_key()):
        values = ", ".join(f"{k}={java_double_text(v)}" for k, v in sorted(quotas.items()))
        lines.append(f"Quota configs for {config_command_label(entity)} are {values}")
    return Text("\n".join(lines))


def render_describe_markdown(live: LiveState) -> str:
    """A table: entity (kafka-configs words), quota key, value (readable units)."""
    lines = ["| entity | quota key | value |", "|---|---|---|"]
    for entity, quotas in sorted(live.entities.items(), key=lambda p: p[0].sort_key()):
        for key, value in sorted(quotas.items()):
            lines.append(
                f"| {md_text(config_command_label(entity))} | {md_code(key)} | "
                f"{md_text(format_quota_value(key, value))} |"
            )
    if len(lines) == 2:
        return "No client quotas match.\n"
    return "\n".join(lines) + "\n"
