"""JSON in, within bounds: whole documents and JSON Lines, parsed by the
standard library's ``json`` after the bytes passed the size, UTF-8 and
depth checks (:mod:`quotaform.inputs.files`, :mod:`quotaform.inputs.depth`),
with numbers bounded in length by the parser's own hooks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any

from quotaform.errors import InputError
from quotaform.inputs.depth import DepthScanner, check_depth
from quotaform.inputs.files import decode_text, open_input, read_bytes, shown
from quotaform.inputs.limits import Limits

__all__ = [
    "BLOCK_BYTES",
    "JsonLine",
    "json_lines",
    "load_json",
    "loads_json",
    "parse_json_line",
    "scan_json_lines",
]

#: Bytes read at a time from a streamed input.
BLOCK_BYTES = 8 << 20


class _Refused(Exception):
    """A token the bounded parser refuses, with the text to find it by."""

    def __init__(self, message: str, token: str) -> None:
        super().__init__(message)
        self.token = token


def _number(convert: Callable[[str], Any], limits: Limits) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        if len(text) > limits.max_number_chars:
            raise _Refused(
                f"a number of {len(text)} characters: too long (at most "
                f"{limits.max_number_chars} for a {limits.kind})",
                text[:40],
            )
        return convert(text)

    return parse


def _no_constant(name: str) -> Any:
    raise _Refused(f"{name} is not a number JSON allows", name)


def _line_of(text: str, token: str) -> int | None:
    at = text.find(token)
    return None if at < 0 else text.count("\n", 0, at) + 1


def loads_json(text: str, source: str, limits: Limits, *, constants: bool = False) -> Any:
    """The JSON document ``text`` (already within size and depth bounds),
    with numbers of at most ``limits.max_number_chars`` characters and,
    unless ``constants``, no ``NaN`` / ``Infinity``.

    Raises:
        InputError: not JSON (with the line and column), a number too long,
            a constant refused.
    """
    try:
        return json.loads(
            text,
            parse_int=_number(int, limits),
            parse_float=_number(float, limits),
            parse_constant=float if constants else _no_constant,
        )
    except json.JSONDecodeError as exc:
        raise InputError(
            source, f"not JSON: {exc.msg} (column {exc.colno})", line=exc.lineno
        ) from None
    except _Refused as exc:
        raise InputError(source, str(exc), line=_line_of(text, exc.token)) from None


def load_json(
    source: str | os.PathLike[str] | bytes,
    limits: Limits,
    *,
    name: str | None = None,
    constants: bool = False,
) -> tuple[Any, str]:
    """``(document, text)`` of a JSON file (a path) or of bytes already
    received (``name`` says what they are), read within ``limits``: a
    regular file of at most ``max_bytes``, UTF-8 (a byte-order mark is
    dropped), no NUL, nesting at most ``max_depth`` (checked on the bytes
    before parsing), numbers of at most ``max_number_chars``.

    Raises:
        InputError: the first bound passed, or not JSON; one line naming the
            file, the line where known and the limit.
    """
    if isinstance(source, bytes):
        data, label = source, name or "(answer)"
        if len(data) > limits.max_bytes:
            raise InputError(
                label, f"larger than {limits.size_text()}, the limit for a {limits.kind}"
            )
    else:
        data, label = read_bytes(source, limits), name or shown(source)
    check_depth(data, label, limits)
    text = decode_text(data, label, limits)
    return loads_json(text, label, limits, constants=constants), text


class JsonLine:
    """One line of a JSON Lines input.

    Attributes:
        number: 1-based line number.
        value: the parsed JSON (``None`` with a ``problem``).
        problem: why the line cannot be used (too long, not JSON, a number
            too long), ``None`` when it parsed.
    """

    __slots__ = ("number", "problem", "value")

    def __init__(self, number: int, value: Any, problem: str | None = None) -> None:
        self.number = number
        self.value = value
        self.problem = problem


def parse_json_line(raw: bytes, number: int, source: str, limits: Limits) -> JsonLine:
    """One line as a :class:`JsonLine`: a line that is not UTF-8, nests
    deeper than ``limits.max_depth`` or is not JSON is a problem of that
    line, never an exception."""
    if raw.count(b"[") + raw.count(b"{") > limits.max_depth:
        try:
            check_depth(raw, source, limits, lines=True)
        except InputError as exc:
            return JsonLine(number, None, f"line: {exc.reason}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return JsonLine(
            number, None, f"line: not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
        )
    try:
        return JsonLine(number, loads_json(text, source, limits))
    except InputError as exc:
        return JsonLine(number, None, f"line: {exc.reason}")


def json_lines(path: str | os.PathLike[str], limits: Limits) -> Iterator[JsonLine]:
    """The non-blank lines of a JSON Lines file, streamed in blocks within
    ``limits``: a line longer than ``max_line_bytes`` is a problem of that
    line, skipped without being held; a line nesting deeper than
    ``max_depth``, not UTF-8 or not JSON is a problem of that line
    (:func:`parse_json_line`). A byte-order mark at the start is dropped.

    Raises:
        InputError: the file cannot be opened or is too large.
    """
    fh, _ = open_input(path, limits)
    label = shown(path)
    with fh:
        number = 0
        tail = b""
        skipping = False  # inside a line already reported as too long
        read = 0
        first = True
        while True:
            block = fh.read(BLOCK_BYTES)
            if first:
                block, first = block.removeprefix(b"\xef\xbb\xbf"), False
            read += len(block)
            if read > limits.max_bytes:
                raise InputError(
                    label, f"larger than {limits.size_text()}, the limit for a {limits.kind}"
                )
            if not block:
                if tail.strip() and not skipping:
                    number += 1
                    yield parse_json_line(tail, number, label, limits)
                return
            lines = (tail + block).split(b"\n")
            tail = lines.pop()
            for raw in lines:
                number += 1
                if skipping:
                    skipping = False
                    continue
                if len(raw) > limits.max_line_bytes:
                    yield _too_long(number, limits)
                elif raw.strip():
                    yield parse_json_line(raw, number, label, limits)
            if len(tail) > limits.max_line_bytes and not skipping:
                yield _too_long(number + 1, limits)
                skipping, tail = True, b""
            elif skipping:
                tail = b""


def _too_long(number: int, limits: Limits) -> JsonLine:
    return JsonLine(
        number,
        None,
        f"line: longer than {limits.max_line_bytes // 1024} KiB, the limit for a line "
        f"of a {limits.kind}",
    )


def scan_json_lines(fh: Any, source: str, limits: Limits) -> None:
    """Check the nesting of a JSON Lines file (an open binary file, read to
    its end and left there) before a reader that recurses sees it (Arrow).

    Raises:
        InputError: a line nests deeper than ``limits.max_depth``.
    """
    scanner = DepthScanner(source, limits, lines=True)
    while block := fh.read(BLOCK_BYTES):
        scanner.feed(block)
