"""Reading a usage file's text within bounds, shared by the sources that
read lines (generic CSV, JmxTool CSV) and the detection of a file's source."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from quotaform.analytics.model import USAGE_COLUMNS
from quotaform.errors import InputError
from quotaform.inputs.depth import check_depth
from quotaform.inputs.files import open_input
from quotaform.inputs.jsondoc import loads_json
from quotaform.inputs.limits import LIMITS, MAX_LINE_BYTES, Limits

__all__ = ["HEAD_BYTES", "LINE_TOO_LONG", "OPEN", "bounded_lines", "head", "json_kind"]

#: How the sources open a usage file: its size was judged when it was listed
#: (:func:`quotaform.analytics.sources.registry.usage_files`).
OPEN = Limits("usage file", 1 << 62)
#: Bytes of a file read to tell its source.
HEAD_BYTES = 64 * 1024
#: A rejected row's reason: a line over the limit.
LINE_TOO_LONG = (
    f"line: longer than {MAX_LINE_BYTES // 1024} KiB, the limit for a line of a usage file"
)


def head(path: Path) -> bytes:
    """The first :data:`HEAD_BYTES` of a local file (a leading byte-order
    mark dropped); empty when it cannot be opened."""
    try:
        fh, _ = open_input(path, OPEN)
    except InputError:
        return b""
    with fh:
        return fh.read(HEAD_BYTES).removeprefix(b"\xef\xbb\xbf")


def bounded_lines(text: IO[str], too_long: list[int]) -> Iterator[str]:
    """The lines of ``text``, none longer than :data:`MAX_LINE_BYTES`
    characters held at once: a longer line is skipped (its number put in
    ``too_long``) and an empty line given in its place."""
    number = 0
    while True:
        line = text.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_LINE_BYTES and not line.endswith("\n"):
            too_long.append(number)
            while (rest := text.readline(MAX_LINE_BYTES)) and not rest.endswith("\n"):
                pass
            yield "\n"
            continue
        yield line


_PROMETHEUS_HEAD = re.compile(r'^\s*\{\s*"(status|data)"\s*:')
_FIRST_KEY = re.compile(rb'\A\s*\{\s*"((?:[^"\\]|\\.){0,64})"')
#: The bounds of the one line read to tell a ``*.json`` file's kind.
_LINE = LIMITS["usage"]


def _line_kind(line: str) -> str | None:
    try:
        check_depth(line.encode("utf-8"), "(first line)", _LINE, lines=True)
        record = loads_json(line, "(first line)", _LINE)
    except (InputError, UnicodeError):
        return "prometheus" if _PROMETHEUS_HEAD.match(line) else None
    if isinstance(record, dict):
        if "data" in record or "status" in record:
            return "prometheus"
        return "rows" if set(record) & set(USAGE_COLUMNS) else None
    return None


def json_kind(first: bytes) -> str | None:
    """What the first bytes of a ``*.json`` file say it is: ``prometheus``
    for a ``query_range`` answer (a JSON object opening with ``status`` or
    ``data``, on one line or pretty-printed), ``rows`` for JSON Lines (one
    object holding usage columns), ``None`` for anything else (other JSON,
    or too little to tell)."""
    first = first.removeprefix(b"\xef\xbb\xbf")
    line = first.lstrip(b" \t\r\n").split(b"\n", 1)[0]
    if len(line) < HEAD_BYTES // 2:
        kind = _line_kind(line.decode("utf-8", errors="replace"))
        if kind is not None or not line.startswith(b"{"):
            return kind
    key = _FIRST_KEY.match(first)
    if key is None:
        return None
    return "prometheus" if key.group(1) in (b"status", b"data") else None
