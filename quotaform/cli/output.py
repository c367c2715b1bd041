"""How commands print a report: ``--output text|json|markdown``."""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable
from typing import TypeVar

from rich.console import Console
from rich.text import Text

__all__ = ["OutputFormat", "emit"]

T = TypeVar("T")


class OutputFormat(enum.StrEnum):
    """Report renderings (``--output``): text for a person, markdown for a
    pull request or ticket, JSON for machines."""

    text = "text"
    json = "json"
    markdown = "markdown"


def emit(
    report: T,
    output: OutputFormat,
    *,
    text: Callable[[T], Text],
    markdown: Callable[[T], str],
    json: Callable[[T], str],
    console: Console | None = None,
) -> None:
    """Print ``report`` rendered for ``output``: JSON and markdown as plain text
    on standard output, text through ``console`` (colour on a terminal)."""
    if output is OutputFormat.json:
        sys.stdout.write(json(report))
    elif output is OutputFormat.markdown:
        sys.stdout.write(markdown(report))
    else:
        (console or Console()).print(text(report), highlight=False, soft_wrap=True)
