"""The command line's :class:`~quotaform.app.common.View`: what
:mod:`quotaform.app` says while it runs, printed safely to standard error
(warnings ``Warning:`` in yellow, notes ``Note:``, messages as given, a
progress bar on a terminal)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from quotaform.app.common import Progress, View
from quotaform.cli.output import colourless, make_console, say, say_plain

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["make_view", "progress_bar"]


@contextmanager
def progress_bar(console: Console) -> Iterator[Progress | None]:
    """A rich progress bar on ``console`` while the block runs (a terminal
    only); yields the :data:`~quotaform.app.common.Progress` callable."""
    from rich.progress import BarColumn, MofNCompleteColumn, TaskID, TextColumn
    from rich.progress import Progress as Bar

    bar = Bar(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
    tasks: dict[str, TaskID] = {}

    def update(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = bar.add_task(stage, total=total)
        bar.update(tasks[stage], completed=done, total=total)

    bar.start()
    try:
        yield update
    finally:
        bar.stop()


def make_view(*, info_style: str | None = None) -> View:
    """The view every command passes to :mod:`quotaform.app`: all of it on
    standard error (standard output carries the report alone);
    ``info_style`` styles plain messages (``"dim"`` for analyze's progress).
    The console is made when first needed, and not at all for messages
    without colour (:func:`~quotaform.cli.output.colourless`)."""
    consoles: list[Console] = []

    def err() -> Console:
        if not consoles:
            consoles.append(make_console(stderr=True))
        return consoles[0]

    def tell(message: str, style: str | None, prefix: str = "") -> None:
        if colourless():
            say_plain(message, prefix=prefix)
        else:
            say(err(), message, style=style, prefix=prefix)

    return View(
        warn=lambda m: tell(m, "yellow", "Warning: "),
        note=lambda m: tell(m, "yellow", "Note: "),
        info=lambda m: tell(m, info_style),
        progress=lambda: progress_bar(err()),
    )
