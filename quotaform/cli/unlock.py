"""``quotaform unlock``: release the cluster's apply lock after its holder died.

Exit codes: 0 released (or not locked), 1 error, or the lock is held by
another lock id than the one given (or none was given: the holder is shown).
"""

from __future__ import annotations

from typing import Annotated

import typer

from quotaform.app.common import ConnectionOptions
from quotaform.app.unlock import UnlockRequest, run_unlock
from quotaform.cli.options import (
    CONNECTION,
    with_connection,
)
from quotaform.cli.output import make_console, say
from quotaform.cli.view import make_view

__all__ = ["register", "unlock"]


@with_connection
def unlock(
    lock_id: Annotated[
        str | None,
        typer.Option(
            "--lock-id",
            help="The id of the lock to release, as a refused apply printed it; "
            "without it the holder is only shown.",
            show_default=False,
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Release a lock whose holder record cannot be read (no id to check)."
        ),
    ] = False,
    connection: ConnectionOptions = CONNECTION,
) -> None:
    """Release the apply lock a killed apply left behind (like `terraform force-unlock`).

    Only release a lock whose holder is known to be gone: the lock is what
    keeps two applies from overwriting each other.
    """
    run = run_unlock(
        UnlockRequest(
            lock_id=lock_id,
            force=force,
            connection=connection,
            view=make_view(),
        )
    )
    out = make_console()
    if not run.held:
        say(out, "The cluster's apply lock is not held.")
        return
    holder = run.holder
    say(out, f"Released the apply lock ({holder.describe() if holder else 'no holder record'}).")


def register(app: typer.Typer) -> None:
    """Add ``unlock`` to ``app``."""
    app.command()(unlock)
