"""PromQL text, built from parts: string literals, selectors, ``label_replace``.

Nothing here parses PromQL; it only writes the few forms the rules and the
dashboard need, with every label value quoted as a PromQL string literal
(:func:`string`), so no name (a user ``CN=a,O="x"``, a JMX-quoted client id)
can change an expression's meaning. Prometheus itself (``promtool check
rules`` in the tests) is the parser that judges the result.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

__all__ = [
    "Matcher",
    "label_replace",
    "selector",
    "string",
]

Matcher = tuple[str, str, str]
"""``(label, operator, value)``: ``("user", "!=", "")``; operators ``=``,
``!=``, ``=~``, ``!~``."""

_OPERATORS = frozenset({"=", "!=", "=~", "!~"})


def string(value: str) -> str:
    """``value`` as a PromQL double-quoted string literal.

    PromQL strings take Go's escapes (``\\"``, ``\\\\``, ``\\n``, ``\\uXXXX``);
    JSON's string syntax is a subset of them, so ``json.dumps`` writes one
    (non-ASCII characters kept as they are: PromQL reads UTF-8).
    """
    return json.dumps(value, ensure_ascii=False)


def selector(metric: str | None, matchers: Iterable[Matcher] = ()) -> str:
    """An instant-vector selector: ``kafka_server_produce_byte_rate{user!=""}``.

    Args:
        metric: the metric name (``None``: matchers only, which then must
            not be empty).
        matchers: label matchers, written in the order given.

    Raises:
        ValueError: an unknown operator, or neither a metric nor a matcher.
    """
    parts = []
    for label, op, value in matchers:
        if op not in _OPERATORS:
            raise ValueError(f"not a PromQL label matcher operator: {op!r}")
        parts.append(f"{label}{op}{string(value)}")
    if metric is None and not parts:
        raise ValueError("a selector needs a metric name or a matcher")
    inner = "{" + ", ".join(parts) + "}" if parts else ""
    return f"{metric or ''}{inner}"


def label_replace(expr: str, destination: str, replacement: str, source: str, regex: str) -> str:
    """``label_replace(expr, "dst", "replacement", "src", "regex")``: the
    series of ``expr`` with label ``destination`` set from ``source`` where
    ``regex`` matches it whole (the others unchanged)."""
    args: Sequence[str] = (destination, replacement, source, regex)
    return f"label_replace({expr}, {', '.join(map(string, args))})"
