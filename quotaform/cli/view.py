"""The command line's :class:`~quotaform.app.common.View`: what
:mod:`quotaform.app` says while it runs, printed safely to standard error
(warnings ``Warning:`` in yellow, notes ``Note:``, messages as given, a
progress bar on a terminal)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from quotaform.app.common import Progress, View
from quotaform.cli.output import make_console, say

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
    ``info_style`` styles plain messages (``"dim"`` for analyze's progress)."""
    err = make_console(stderr=True)
    return View(
        warn=lambda m: say(err, m, style="yellow", prefix="Warning: "),
        note=lambda m: say(err, m, style="yellow", prefix="Note: "),
        info=lambda m: say(err, m, style=info_style),
        progress=lambda: progress_bar(err),
    )
