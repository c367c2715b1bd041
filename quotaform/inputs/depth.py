"""How deeply JSON nests, found from the bytes before a parser sees them.

Python's ``json`` recurses per level (a ``RecursionError`` at about 1,000),
Arrow's JSON reader recurses on the C stack (a segmentation fault at about
100,000) and ijson's prefixes grow with the depth (a 200 KiB document 100,000
deep took gigabytes): so the nesting of every JSON input is measured first,
in C-speed passes over the bytes, never by catching the parser's failure.

The scan: escape pairs (``\\x``) are removed, the bytes reduced to quotes and
brackets (``bytes.translate``), strings removed from that short stream, and
the depth of the brackets left bounded by removing innermost pairs (``[]``,
``{}``) a few times; only a stream that still looks deep is walked bracket by
bracket, and only a refused one is read again token by token for the line.
A document is fed in blocks (:class:`DepthScanner` carries the state); JSON
Lines reset at each line end (a string never spans lines in JSON).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable

from quotaform.errors import InputError
from quotaform.inputs.limits import Limits

__all__ = ["DepthScanner", "check_depth"]

_ESCAPE_DOC = re.compile(rb"\\.", re.DOTALL)
#: In JSON Lines an escape never takes a line end: readers split lines first.
_ESCAPE_LINES = re.compile(rb"\\[^\n]")
_KEEP_DOC = bytes(b for b in range(256) if b not in b'"[]{}')
_KEEP_LINES = bytes(b for b in range(256) if b not in b'"[]{}\n')
_STRING_DOC = re.compile(rb'"[^"]*+"?')
_STRING_LINES = re.compile(rb'"[^"\n]*+"?')
_PAIR = re.compile(rb"\[\]|\{\}")
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1
#: Innermost-pair passes before walking the brackets one by one.
_PASSES = 8
#: The precise token walk that finds a refusal's line.
_TOKEN_DOC = re.compile(rb'\\.|["\[\]{}\n]', re.DOTALL)
_TOKEN_LINES = re.compile(rb'\\[^\n]|["\[\]{}\n]')


def _max_prefix(brackets: bytes, start: int) -> int:
    """The deepest point of ``brackets`` (only ``[]{}``) entered at depth ``start``."""
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets), initial=start))


class DepthScanner:
    """Measures the nesting of JSON fed in blocks of bytes (a document, or
    JSON Lines with ``lines=True``), refusing at the first block that passes
    ``limits.max_depth``.

    Blocks may split a string or an escape pair anywhere: the scanner keeps
    whether it is inside a string, a pending backslash and the depth. What it
    measures is the nesting a JSON parser would reach: brackets inside
    strings are not counted; broken JSON (an unclosed string or bracket) is
    measured as written and left to the parser to refuse.
    """

    def __init__(
        self, source: str, limits: Limits, *, lines: bool = False, numbers: bool = False
    ) -> None:
        self.source = source
        self.limits = limits
        self.lines = lines
        # Runs of digits longer than a number may be: ijson's C parser crashed
        # on a 100,000-digit number. Counted on the raw bytes, strings
        # included (no usage label holds 400 digits in a row).
        self._digits: re.Pattern[bytes] | None = (
            re.compile(rb"[0-9]{%d}" % (limits.max_number_chars + 1)) if numbers else None
        )
        self._run = b""  # the digits ending the last block
        self._depth = 0
        self._in_string = False
        self._carry = b""  # a backslash cut from the end of the last block
        self._offset = 0  # bytes fed before this block
        self._newlines = 0  # line ends fed before this block

    def feed(self, block: bytes) -> None:
        """Scan the next block.

        Raises:
            InputError: the nesting passes the limit in this block, with the
                line where it does.
        """
        if self._digits is not None:
            self._check_digits(block)
        base = self._offset - len(self._carry)  # where ``data`` starts in the stream
        data = self._carry + block
        self._carry = b""
        trailing = len(data) - len(data.rstrip(b"\\"))
        if trailing % 2:  # an escape pair cut in two: its backslash waits for the next block
            data, self._carry = data[:-1], b"\\"
        depth, in_string = self._depth, self._in_string
        if not self._within(data):
            self._refuse(data, base, depth, in_string)
        self._offset += len(block)
        self._newlines += block.count(b"\n")

    def _check_digits(self, block: bytes) -> None:
        assert self._digits is not None
        data = self._run + block
        found = self._digits.search(data)
        if found is not None:
            at = self._offset - len(self._run) + found.start()
            raise InputError(
                self.source,
                f"a number of more than {self.limits.max_number_chars} digits at byte offset "
                f"{at} (the limit for a {self.limits.kind}): refused",
                line=self._newlines + data.count(b"\n", 0, found.start()) + 1,
            )
        tail = len(data) - len(data.rstrip(b"0123456789"))
        self._run = data[len(data) - tail :] if tail else b""

    def _within(self, data: bytes) -> bool:
        """Scan ``data``; whether it stays within the limit (state updated)."""
        if b"\\" in data:
            data = (_ESCAPE_LINES if self.lines else _ESCAPE_DOC).sub(b"", data)
        reduced = data.translate(None, _KEEP_LINES if self.lines else _KEEP_DOC)
        if self._in_string:
            reduced = b'"' + reduced
        # Most strings hold no bracket: their quotes stand side by side in
        # the reduced bytes, and dropping those pairs leaves only brackets
        # (and at most a string left open at the end of the block).
        brackets = reduced.replace(b'""', b"")
        unpaired = brackets.find(b'"')
        if unpaired < 0 or unpaired == len(brackets) - 1:
            self._in_string = unpaired >= 0
            brackets = brackets[:unpaired] if unpaired >= 0 else brackets
        elif self.lines:
            self._in_string = reduced.rsplit(b"\n", 1)[-1].count(b'"') % 2 == 1
            brackets = _STRING_LINES.sub(b"", reduced)
        else:
            self._in_string = reduced.count(b'"') % 2 == 1
            brackets = _STRING_DOC.sub(b"", reduced)
        return self._lines_within(brackets) if self.lines else self._document_within(brackets)

    def _document_within(self, brackets: bytes) -> bool:
        """``brackets`` (only ``[]{}``) stay within the limit from the depth so far."""
        limit = self.limits.max_depth
        opened = brackets.count(b"[") + brackets.count(b"{")
        if self._depth + opened > limit:
            rest, passes = brackets, 0
            while passes < _PASSES and len(rest) > limit:
                shorter = _PAIR.sub(b"", rest)
                if len(shorter) == len(rest):
                    break
                rest, passes = shorter, passes + 1
            # Each pass lowers the deepest point by at most one.
            if self._depth + passes + _max_prefix(rest, 0) > limit and (
                _max_prefix(brackets, self._depth) > limit
            ):
                return False
        self._depth += 2 * opened - len(brackets)
        return True

    def _lines_within(self, brackets: bytes) -> bool:
        """JSON Lines (``brackets``: only ``[]{}`` and line ends): each line
        on its own, the first one continuing the last block's."""
        limit = self.limits.max_depth
        # Only a line with more openers than the room left can nest past the limit.
        room = limit - max(self._depth, 0)
        if re.search(rb"[\[{]{%d}" % (room + 1), brackets.translate(None, b"]}")):
            depth = self._depth
            for line in brackets.split(b"\n"):
                if _max_prefix(line, depth) > limit:
                    return False
                depth = 0
        last = brackets.rsplit(b"\n", 1)
        depth = self._depth if len(last) == 1 else 0
        self._depth = depth + 2 * (last[-1].count(b"[") + last[-1].count(b"{")) - len(last[-1])
        return True

    def _refuse(self, data: bytes, base: int, depth: int, in_string: bool) -> None:
        """Walk ``data`` token by token to the point the limit is passed."""
        limit = self.limits.max_depth
        line = self._newlines + 1
        for match in (_TOKEN_LINES if self.lines else _TOKEN_DOC).finditer(data):
            token = match.group()
            if token == b"\n":
                line += 1
                if self.lines:
                    depth, in_string = 0, False
            elif len(token) == 2:
                continue  # an escape pair
            elif token == b'"':
                in_string = not in_string
            elif not in_string:
                depth += 1 if token in b"[{" else -1
                if depth > limit:
                    raise InputError(
                        self.source,
                        f"nested too deeply: more than {limit} levels at byte offset "
                        f"{base + match.start()} (the limit for a {self.limits.kind}): refused",
                        line=line,
                    )
        raise InputError(  # the fast scan and the walk disagree: still refuse
            self.source,
            f"nested too deeply: more than {limit} levels (the limit for a "
            f"{self.limits.kind}): refused",
        )


def check_depth(
    data: bytes | Iterable[bytes], source: str, limits: Limits, *, lines: bool = False
) -> None:
    """Refuse ``data`` (one block or an iterable of blocks) when its JSON
    nests deeper than ``limits.max_depth`` (:class:`DepthScanner`).

    Raises:
        InputError: too deep, naming ``source``, the line and byte offset,
            and the limit.
    """
    scanner = DepthScanner(source, limits, lines=lines)
    for block in [data] if isinstance(data, bytes | bytearray | memoryview) else data:
        scanner.feed(bytes(block))
