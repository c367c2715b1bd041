"""Escaping for GitHub-flavoured markdown, shared by every markdown renderer."""

from __future__ import annotations

import html

from quotaform.kafka.entity import escape_unprintable

__all__ = ["md_code", "md_text"]


def md_text(text: str) -> str:
    """``text`` for GitHub markdown outside a code span: ``<`` ``>`` ``&`` as
    entities (``<default>`` would vanish as an HTML tag), ``|`` escaped (table
    cells), one line, unprintable characters escaped."""
    escaped = html.escape(escape_unprintable(text), quote=False)
    return escaped.replace("|", "\\|").replace("\n", " ")


def md_code(text: str) -> str:
    """``text`` as a code span (backticks inside doubled; ``|`` escaped for tables)."""
    body = escape_unprintable(text).replace("|", "\\|")
    fence = "``" if "`" in body else "`"
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{fence}{pad}{body}{pad}{fence}"
