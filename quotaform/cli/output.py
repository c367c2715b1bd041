"""How commands print: reports (``--output text|json|markdown``) and messages.

Every console quotaform prints through is made by :func:`make_console`: text is
printed as given (no rich markup, so ``[/]`` in a name is just text; no
highlighting), lines are never hard-wrapped (a log keeps one line per
message), colour only on a terminal. Messages pass :func:`say`, which escapes
control and format characters line by line, so nothing from a manifest or a
broker reaches the terminal raw.
"""

from __future__ import annotations

import builtins
import enum
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO, TypeVar

if TYPE_CHECKING:  # rich is imported when something is printed, not by --help
    from rich.console import Console
    from rich.text import Text

__all__ = [
    "OutputFormat",
    "colourless",
    "disable_colour",
    "emit",
    "make_console",
    "print_text",
    "safe_text",
    "say",
    "say_plain",
    "writes_plain",
]


_COLOUR = {"on": True}


def disable_colour() -> None:
    """No colours or styles from now on (``--no-color``; rich also honours the
    ``NO_COLOR`` environment variable)."""
    _COLOUR["on"] = False


def colourless() -> bool:
    """Whether every console :func:`make_console` makes is without colour
    (``--no-color`` or ``NO_COLOR``): such a console writes text exactly as
    given, so a caller may write it without making one (rich costs about
    20 ms to import, a tenth of a small plan)."""
    return not _COLOUR["on"] or bool(os.environ.get("NO_COLOR"))


#: The environment variables rich reads to decide that a stream is a terminal
#: (or a notebook): with any of them set, rich decides.
_RICH_TERMINAL_HINTS = (
    "FORCE_COLOR",
    "TTY_COMPATIBLE",
    "TTY_INTERACTIVE",
    "DATABRICKS_RUNTIME_VERSION",
)


def writes_plain(stream: TextIO) -> bool:
    """Whether a console :func:`make_console` makes for ``stream`` would write
    text exactly as given (no colour), told without importing rich: the
    stream is no terminal (``isatty``), none of the environment variables
    rich reads to force one is set, and no notebook (IPython's
    ``get_ipython``) runs. Rule from rich's ``Console.is_terminal`` and
    ``_detect_color_system``; where it is unsure, the answer is ``False`` and
    rich decides. A report piped to a file or a CI log is then written
    without importing rich (about 20 ms)."""
    if any(os.environ.get(name) is not None for name in _RICH_TERMINAL_HINTS):
        return False
    if hasattr(builtins, "get_ipython"):
        return False
    try:
        return not stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def make_console(*, stderr: bool = False) -> Console:
    """A console printing text as given (see the module docstring); without
    colour (``--no-color`` or ``NO_COLOR``) it emits no escape codes at all."""
    from rich.console import Console

    plain = colourless()
    return Console(
        stderr=stderr,
        markup=False,
        highlight=False,
        soft_wrap=True,
        no_color=plain,
        color_system=None if plain else "auto",
    )


def safe_text(text: str) -> str:
    """``text`` with unprintable characters escaped on every line (newlines kept)."""
    from quotaform.kafka.entity import escape_unprintable  # here: --help never needs it

    return "\n".join(escape_unprintable(line) for line in text.split("\n"))


def say(to: Console, message: str, *, style: str | None = None, prefix: str = "") -> None:
    """Print ``message`` safely; ``prefix`` (e.g. ``"Error: "``, styled) starts
    every line of it."""
    from rich.text import Text

    for line in safe_text(message).split("\n"):
        out = Text(prefix, style=style or "") if prefix else Text()
        out.append(line, style=None if prefix else style)
        to.print(out)


def say_plain(message: str, *, prefix: str = "", stderr: bool = True) -> None:
    """What :func:`say` prints on a colourless console (:func:`colourless`),
    written without one."""
    out = sys.stderr if stderr else sys.stdout
    out.write("".join(f"{prefix}{line}\n" for line in safe_text(message).split("\n")))


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
    plain: Callable[[T], str] | None = None,
) -> None:
    """Print ``report`` rendered for ``output``: JSON and markdown as plain text
    on standard output, text through ``console`` (colour on a terminal).
    ``plain``, the text rendering's ``.plain`` made without rich, is written
    as is when no console is given and colour is off (:func:`colourless`,
    or standard output is no terminal: :func:`writes_plain`)."""
    if output is OutputFormat.json:
        sys.stdout.write(json(report))
    elif output is OutputFormat.markdown:
        sys.stdout.write(markdown(report))
    elif console is None and plain is not None and (colourless() or writes_plain(sys.stdout)):
        sys.stdout.write(plain(report) + "\n")
    else:
        print_text(console or make_console(), text(report))


def print_text(console: Console, text: Text) -> None:
    """Print a rendered report. Without colour (not a terminal, ``--no-color``,
    ``NO_COLOR``) rich would write exactly the plain text (no wrapping, no
    markup, unprintables escaped by the renderers), so it is written as is:
    rich takes about a second to lay out the 20,000 lines of a 10,000-entity
    plan (benchmarks/README.md)."""
    if console.color_system is None:
        console.file.write(text.plain + "\n")
    else:
        console.print(text)
