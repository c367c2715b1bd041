"""``quotaform unlock``: release the cluster's apply lock after its holder died.

Exit codes: 0 released (or not locked), 1 error, or the lock is held by
another lock id than the one given (or none was given: the holder is shown).
"""

from __future__ import annotations

from typing import Annotated

import typer

from quotaform.cli.options import (
    BootstrapServer,
    ClusterOption,
    CommandConfig,
    ConfigOption,
    Timeout,
    target,
)
from quotaform.cli.output import make_console, say
from quotaform.cluster.connect import connect
from quotaform.cluster.lock import LOCK_TOPIC, current_holder, release
from quotaform.errors import LockError

__all__ = ["register", "unlock"]


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
    bootstrap_server: BootstrapServer = None,
    command_config: CommandConfig = None,
    cluster: ClusterOption = None,
    config: ConfigOption = None,
    timeout: Timeout = None,
) -> None:
    """Release the apply lock a killed apply left behind (like `terraform force-unlock`).

    Only release a lock whose holder is known to be gone: the lock is what
    keeps two applies from overwriting each other.
    """
    where = target(cluster, config, bootstrap_server, command_config, timeout=timeout)
    out = make_console()
    with connect(where.settings, read_only=False, cluster_id=where.cluster_id) as client:
        if LOCK_TOPIC not in client.list_topics():
            say(out, "The cluster's apply lock is not held.")
            return
        holder = current_holder(where.settings)
        if holder is None and not force:
            raise LockError(
                f"the apply lock ({LOCK_TOPIC}) is held but its holder record cannot be "
                "read; release it with --force once no apply runs"
            )
        if holder is not None and lock_id != holder.lock_id:
            raise LockError(
                f"the apply lock is {holder.describe()}"
                + (f", not lock id {lock_id}" if lock_id else "")
                + f"; to release it once that holder is gone: quotaform unlock --lock-id "
                f"{holder.lock_id}"
            )
        release(client)
    say(out, f"Released the apply lock ({holder.describe() if holder else 'no holder record'}).")


def register(app: typer.Typer) -> None:
    """Add ``unlock`` to ``app``."""
    app.command()(unlock)
