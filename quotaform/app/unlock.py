"""``quotaform unlock``: release the cluster's apply lock after its holder
died (like ``terraform force-unlock``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from quotaform.app.common import ConnectionOptions, View, target
from quotaform.cluster.connect import connect
from quotaform.cluster.lock import LOCK_TOPIC, LockHolder, current_holder, release
from quotaform.errors import LockError

__all__ = ["UnlockRequest", "UnlockRun", "run_unlock"]


@dataclass(frozen=True, slots=True)
class UnlockRequest:
    """One ``quotaform unlock`` run.

    Attributes:
        lock_id: the id of the lock to release (``None``: only show the holder).
        force: release a lock whose holder record cannot be read.
        connection: where to connect.
        view: warnings.
    """

    lock_id: str | None = None
    force: bool = False
    connection: ConnectionOptions = field(default_factory=ConnectionOptions)
    view: View = field(default_factory=View)


@dataclass(frozen=True, slots=True)
class UnlockRun:
    """``held``: the lock was held (and is now released); ``holder``: its
    holder record (``None``: none could be read)."""

    held: bool
    holder: LockHolder | None = None


def run_unlock(request: UnlockRequest) -> UnlockRun:
    """Release the lock when its holder is the one named.

    Raises:
        LockError: the holder record cannot be read (without ``force``), or
            the lock is held by another id than ``lock_id`` (or none given).
    """
    where = target(request.connection, request.view)
    with connect(where.settings, read_only=False, cluster_id=where.cluster_id) as client:
        if LOCK_TOPIC not in client.list_topics():
            return UnlockRun(held=False)
        holder = current_holder(where.settings)
        if holder is None and not request.force:
            raise LockError(
                f"the apply lock ({LOCK_TOPIC}) is held but its holder record cannot be "
                "read; release it with --force once no apply runs"
            )
        lock_id = request.lock_id
        if holder is not None and lock_id != holder.lock_id:
            raise LockError(
                f"the apply lock is {holder.describe()}"
                + (f", not lock id {lock_id}" if lock_id else "")
                + f"; to release it once that holder is gone: quotaform unlock --lock-id "
                f"{holder.lock_id}"
            )
        release(client)
    return UnlockRun(held=True, holder=holder)
