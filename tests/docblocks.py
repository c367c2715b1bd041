"""What the README and the documentation pages (``docs/*.md``) show, found for
the tests that check it or run it exactly as shown.

Shared by tests in every folder (a helper module: test modules never import
each other). Every finder fails the test with the file and the marker it
looked for when the text has moved, so a reworded page breaks the test that
runs its commands, never silently skips them.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: A fenced block, also one indented under a list item (its lines keep the indent).
_FENCE = re.compile(r"^[ \t]*```([\w-]*)\n(.*?)^[ \t]*```", re.S | re.M)


def documents() -> list[Path]:
    """The README and every page of the documentation site, sorted."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def doc_text(name: str) -> str:
    """The text of ``name``, a path relative to the repository (``docs/storage.md``)."""
    return (ROOT / name).read_text(encoding="utf-8")


def fenced_blocks(text: str, language: str = "bash") -> list[str]:
    """The bodies of the fenced blocks of ``language`` in ``text``, in order
    (``language=""``: the blocks without one)."""
    return [body for lang, body in _FENCE.findall(text) if lang == language]


def fenced_block(name: str, *, after: str, language: str = "bash") -> str:
    """The first ``language`` block of document ``name`` after the text ``after``
    (a heading such as ``## Spark Connect``, matched as a whole line when it
    starts with ``#``)."""
    text = doc_text(name)
    if after.startswith("#"):
        found = re.search(rf"^{re.escape(after)}$", text, re.M)
        start = found.start() if found else -1
    else:
        start = text.find(after)
    assert start >= 0, f"{name}: no {after!r}"
    blocks = fenced_blocks(text[start:], language)
    assert blocks, f"{name}: no {language} block after {after!r}"
    return blocks[0]


def section(name: str, heading: str) -> str:
    """The text of document ``name`` under ``heading`` (a whole line such as
    ``## Principals: ...``) up to the next heading of the same or a higher level."""
    text = doc_text(name)
    found = re.search(rf"^{re.escape(heading)}$", text, re.M)
    assert found is not None, f"{name}: no heading {heading!r}"
    level = len(heading) - len(heading.lstrip("#"))
    rest = text[found.end() :]
    fences = [m.span() for m in _FENCE.finditer(rest)]  # a "# file" line in a block is no heading
    for end in re.finditer(rf"^#{{1,{level}}} ", rest, re.M):
        if not any(a <= end.start() < b for a, b in fences):
            return rest[: end.start()]
    return rest


def file_block(text: str, name: str) -> str:
    """The ``yaml`` block of ``text`` whose first line is ``# NAME``: a file the page shows.

    Raises:
        LookupError: the text shows no such file.
    """
    for body in fenced_blocks(text, "yaml"):
        if body.startswith(f"# {name}\n"):
            return body
    raise LookupError(f"the page shows no file {name}")


def one_line(block: str) -> str:
    """A shell block as one command line: continuations joined, spaces collapsed."""
    return " ".join(block.replace("\\\n", " ").split())


def shell_commands(block: str) -> list[str]:
    """A shell block's commands, one per line: continuations joined, trailing
    ``# comments`` dropped, spaces collapsed."""
    text = block.replace("\\\n", " ")
    return [" ".join(line.split("#")[0].split()) for line in text.splitlines() if line.strip()]


def table_rows(name: str, heading: str) -> list[list[str]]:
    """The cells of the body rows of the first table under ``heading`` (a whole
    line, ``# JSON documents``) in document ``name``."""
    text = doc_text(name)
    found = re.search(rf"^{re.escape(heading)}$", text, re.M)
    assert found is not None, f"{name}: no heading {heading!r}"
    lines = text[found.end() :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| "))
    rows: list[str] = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break  # the first table only
        rows.append(line)
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows[2:]]
