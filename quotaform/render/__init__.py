"""Renderings of one :class:`~quotaform.plan.Plan`: text, markdown, JSON."""

from quotaform.render.plan_json import PlanDocument, plan_document, render_json
from quotaform.render.text import entity_label, render_markdown, render_text, summary_line

__all__ = [
    "PlanDocument",
    "entity_label",
    "plan_document",
    "render_json",
    "render_markdown",
    "render_text",
    "summary_line",
]
