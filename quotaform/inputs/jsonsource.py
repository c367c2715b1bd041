"""Line numbers in a JSON text, for the problems found after it was parsed.

:func:`json.loads` keeps no positions. When a parsed document fails
validation, its text is scanned once more (on that error path only) for the
lines of the failing fields and of the mappings and lists holding them;
everything else is skipped without being built, so a refused 40 MiB plan
file is scanned, not parsed a second time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass

__all__ = ["json_lines"]

Loc = tuple[int | str, ...]

_SPACE = re.compile(r"[ \t\n\r]*")
_SCALAR = re.compile(r"[^ \t\n\r,\]}]*")
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
# Everything up to the next bracket outside a string: skipping a value
# stops only at its brackets.
_RUN = re.compile(rf'(?:[^"\[\]{{}}]+|{_STRING.pattern})*')


def json_lines(text: str, locs: Iterable[Loc]) -> Callable[[Loc], int | None]:
    """The 1-based line of each of ``locs`` in ``text``, a JSON document
    :func:`json.loads` accepted: a member at its key's line, a list item
    where it starts. A location that does not exist (a required field left
    out) gets the line of its nearest existing parent; ``None``: not even
    the document is there (``text`` is not the JSON that was validated).
    """
    wanted = {loc[:n] for loc in locs for n in range(len(loc) + 1)}
    offsets: dict[Loc, int] = {}
    with suppress(IndexError, ValueError):  # not the JSON it should be: keep what was found
        _scan(text, wanted, offsets)
    lines: dict[int, int] = {}
    line, last = 1, 0
    for at in sorted(set(offsets.values())):
        line += text.count("\n", last, at)
        lines[at], last = line, at

    def locate(loc: Loc) -> int | None:
        for n in range(len(loc), -1, -1):
            at = offsets.get(loc[:n])
            if at is not None:
                return lines[at]
        return None

    return locate


@dataclass(slots=True)
class _Open:
    """A mapping or list being walked: its location, kind, next item's index."""

    loc: Loc
    mapping: bool
    index: int = 0


def _scan(text: str, wanted: set[Loc], found: dict[Loc, int]) -> None:
    """Record the offset of each wanted location in ``found``: one pass,
    descending only into the mappings and lists on the way to one."""
    i = _after_space(text, 0)
    if () in wanted:
        found[()] = i
    if text[i] not in "[{":
        return
    stack = [_Open((), text[i] == "{")]
    i += 1
    while stack:
        i = _after_space(text, i)
        char = text[i]
        if char == ",":
            i += 1
            continue
        if char in "]}":
            stack.pop()
            i += 1
            continue
        top, mark = stack[-1], i
        if top.mapping:
            i = _past(_STRING, text, i)
            key = json.loads(text[mark:i])
            i = _after_space(text, _after_space(text, i) + 1)  # past the ":"
            loc: Loc = (*top.loc, key)
        else:
            loc = (*top.loc, top.index)
            top.index += 1
        if loc in wanted:
            found[loc] = mark
        char = text[i]
        if char in "[{" and loc in wanted:
            stack.append(_Open(loc, char == "{"))
            i += 1
        elif char in "[{":
            i = _skip(text, i)
        elif char == '"':
            i = _past(_STRING, text, i)
        else:
            i = _past(_SCALAR, text, i)


def _after_space(text: str, i: int) -> int:
    match = _SPACE.match(text, i)
    return match.end() if match else i


def _past(token: re.Pattern[str], text: str, i: int) -> int:
    """The offset past the ``token`` at ``i``; ValueError when there is none
    (the text is not JSON: stop rather than loop)."""
    match = token.match(text, i)
    if match is None or match.end() == i:
        raise ValueError(f"no JSON token at offset {i}")
    return match.end()


def _skip(text: str, start: int) -> int:
    """The offset just past the mapping or list starting at ``start``."""
    depth, i = 0, start
    while True:
        char = text[i]
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth == 0:
                return i + 1
        else:
            raise ValueError(f"a mapping or list without its end at offset {i}")
        i = _end_of_run(text, i + 1)


def _end_of_run(text: str, i: int) -> int:
    match = _RUN.match(text, i)
    return match.end() if match else i
