"""The sandboxes' state files (``<state_dir>/<name>.json``) and the lock around them."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from quotaform.errors import InputError, SandboxError
from quotaform.inputs.jsondoc import load_json
from quotaform.inputs.limits import LIMITS
from quotaform.sandbox.broker.model import SandboxBroker
from quotaform.sandbox.jars import cache_root
from quotaform.sandbox.processes import (
    CHILDREN,
    LOG_TAIL_LINES,
    tail_text,
)

__all__ = [
    "default_state_dir",
    "new_cluster_id",
]

log = logging.getLogger(__name__)


def default_state_dir() -> Path:
    """Return ``<cache>/sandboxes``, where sandbox state files live by default."""
    return cache_root() / "sandboxes"


def new_cluster_id() -> str:
    """Return a random KRaft cluster id as Kafka's ``Uuid.randomUuid`` makes them.

    16 random bytes, URL-safe base64 without padding (22 characters), never
    starting with ``-`` (Kafka rejects those as ambiguous on command lines).
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


def _state_path(states: Path, name: str) -> Path:
    return states / f"{name}.json"


@contextlib.contextmanager
def _state_lock(states: Path, name: str) -> Iterator[None]:
    """Serialize start and stop of one sandbox across processes.

    The lock file is removed when the sandbox is gone; a waiter that then wins
    the lock on the removed file notices (inode changed) and locks anew.
    """
    states.mkdir(parents=True, exist_ok=True)
    path = states / f"{name}.lock"
    while True:
        lock_file = open(path, "a")  # noqa: SIM115 - closed in the finally below
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            try:
                current = os.stat(path).st_ino
            except FileNotFoundError:
                current = None
            if current != os.fstat(lock_file.fileno()).st_ino:
                continue
            try:
                yield
            finally:
                if not _state_path(states, name).exists():
                    path.unlink(missing_ok=True)
            return
        finally:
            lock_file.close()  # also releases the flock


def _load_state(states: Path, name: str) -> SandboxBroker | None:
    path = _state_path(states, name)
    if not path.exists():
        return None
    try:
        data, _ = load_json(path, LIMITS["state"])
        return SandboxBroker.from_json(data)
    except (InputError, ValueError, KeyError, TypeError) as exc:
        why = exc.reason if isinstance(exc, InputError) else exc
        raise SandboxError(
            f"Sandbox state file {path} is unreadable ({why}). If no sandbox broker "
            f"is running, delete the file; otherwise stop the java kafka.Kafka process "
            f"it belongs to first."
        ) from exc


def _save_state(states: Path, broker: SandboxBroker) -> None:
    path = _state_path(states, broker.name)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(broker.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _discard(broker: SandboxBroker, states: Path) -> None:
    """Remove ``broker``'s data directory and state file (processes already gone)."""
    for node in broker.nodes:
        CHILDREN.pop(node.pid, None)
    shutil.rmtree(broker.data_dir, ignore_errors=True)
    _state_path(states, broker.name).unlink(missing_ok=True)


def _progress(on_progress: Callable[[str], None] | None, message: str) -> None:
    log.info("%s", message)
    if on_progress is not None:
        on_progress(message)


def _log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(cannot read {path}: {exc})"
    return tail_text(text, lines)
