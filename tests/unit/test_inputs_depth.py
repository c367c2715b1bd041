"""The JSON depth scan of the reading layer against a byte-by-byte reference:
refused exactly when a parser would nest past the limit, however the bytes
are cut into blocks, with the line of the refusal."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quotaform.errors import InputError
from quotaform.inputs.depth import DepthScanner, check_depth
from quotaform.inputs.limits import Limits

LIMIT = 6
LIMITS = Limits("test input", 1 << 20, max_depth=LIMIT)


def reference_depth(data: bytes, *, lines: bool) -> int:
    """The deepest nesting outside strings, walked byte by byte."""
    depth = deepest = 0
    in_string = False
    i = 0
    while i < len(data):
        c = data[i : i + 1]
        if c == b"\\" and i + 1 < len(data) and not (lines and data[i + 1 : i + 2] == b"\n"):
            i += 2
            continue
        if c == b"\n" and lines:
            depth, in_string = 0, False
        elif c == b'"':
            in_string = not in_string
        elif not in_string and c in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        elif not in_string and c in (b"]", b"}"):
            depth -= 1
        i += 1
    return deepest


def scan(blocks: list[bytes], *, lines: bool) -> InputError | None:
    scanner = DepthScanner("f.json", LIMITS, lines=lines)
    try:
        for block in blocks:
            scanner.feed(block)
    except InputError as exc:
        return exc
    return None


tokens = st.sampled_from([b"[", b"]", b"{", b"}", b'"', b"\\", b"a", b"\n", b",", b"\\\\"])


@settings(max_examples=600, deadline=None)
@given(st.lists(tokens, max_size=60), st.lists(st.integers(0, 60), max_size=5), st.booleans())
def test_scan_matches_the_reference_in_any_blocks(parts, cuts, lines):
    data = b"".join(parts)
    points = sorted({min(c, len(data)) for c in cuts})
    blocks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    refused = scan(blocks, lines=lines)
    assert (refused is not None) == (reference_depth(data, lines=lines) > LIMIT), (data, blocks)


def test_a_refusal_names_the_file_line_offset_and_limit():
    data = b'{"a": 1,\n "b": "[[[[[[[[[[",\n "c": ' + b"[" * 10 + b"]" * 10 + b"}"
    with pytest.raises(InputError) as info:
        check_depth(data, "usage.json", LIMITS)
    message = str(info.value)
    assert message.startswith("usage.json:3: nested too deeply: more than 6 levels at byte offset ")
    assert message.endswith("(the limit for a test input): refused")


def test_brackets_in_strings_and_escapes_do_not_count():
    inside = json.dumps({"a": "[" * 100 + '\\"' + "{" * 100}).encode()
    check_depth(inside, "f", LIMITS)
    check_depth([inside[:7], inside[7:8], inside[8:]], "f", LIMITS)


def test_json_lines_reset_at_each_line_and_refuse_the_deep_one():
    rows = b"".join(b'{"value": [[1]]}\n' for _ in range(1000))
    check_depth(rows, "u.jsonl", LIMITS, lines=True)
    deep = rows + b'"\\\n' + b'{"value": ' + b"[" * 7 + b"]" * 7 + b"}\n"
    with pytest.raises(InputError) as info:
        check_depth(deep, "u.jsonl", LIMITS, lines=True)
    assert info.value.line == 1002


@pytest.mark.parametrize("depth", [1_000, 100_000, 1_000_000])
def test_deep_documents_are_refused_in_blocks(depth):
    data = b'{"data": ' + b"[" * depth + b"]" * depth + b"}"
    blocks = [data[i : i + 4096] for i in range(0, len(data), 4096)]
    with pytest.raises(InputError, match="nested too deeply: more than 6 levels"):
        check_depth(blocks, "deep.json", LIMITS)
