"""Fenced blocks of the Markdown documentation, for the tests that run a
page's commands exactly as shown and compare the output it shows."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INCOMING = ROOT / "docs" / "_incoming"

_FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def fenced_blocks(page: Path, language: str) -> list[str]:
    """The bodies of ``page``'s fenced blocks of ``language`` (``bash``,
    ``yaml``, ``text``), in order, each ending with a newline."""
    text = page.read_text(encoding="utf-8")
    return [body for lang, body in _FENCE.findall(text) if lang == language]


def file_block(page: Path, name: str) -> str:
    """The ``yaml`` block whose first line is ``# NAME``: a file the page shows.

    Raises:
        LookupError: the page shows no such file.
    """
    for body in fenced_blocks(page, "yaml"):
        if body.startswith(f"# {name}\n"):
            return body
    raise LookupError(f"{page} shows no file {name}")
