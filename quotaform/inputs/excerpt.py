"""How a message quotes a value read from an input: never more than a
line's worth, never a control character, whatever the input held."""

from __future__ import annotations

from typing import Any

from quotaform.kafka.entity import escape_unprintable

__all__ = ["EXCERPT_CHARS", "excerpt"]

#: The longest quotation of a value in a message, in characters.
EXCERPT_CHARS = 80


def excerpt(value: Any, *, quoted: bool = True) -> str:
    """``value`` as a message quotes it: its ``repr`` (its text when not
    ``quoted``), unprintable characters escaped, cut to
    :data:`EXCERPT_CHARS` with the full length said
    (``'aaaa...' (52,428,800 characters)``). A value of the inputs quotaform
    reads nests at most :data:`~quotaform.inputs.limits.MAX_DEPTH` deep, so
    its ``repr`` never recurses far."""
    text = escape_unprintable(repr(value) if quoted or not isinstance(value, str) else value)
    if len(text) <= EXCERPT_CHARS:
        return text
    return f"{text[: EXCERPT_CHARS - 20]}... ({len(text):,} characters)"
