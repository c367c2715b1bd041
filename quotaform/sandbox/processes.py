"""Local processes of the sandboxes (the Kafka broker, Spark's daemons):
one registry of the children this process started, liveness, command lines,
loopback ports, sandbox names and log tails."""

from __future__ import annotations

import os
import re
import socket
import subprocess
from pathlib import Path

from quotaform.errors import SandboxError

__all__ = [
    "CHILDREN",
    "KILL_WAIT_S",
    "LOG_TAIL_LINES",
    "check_name",
    "cmdline",
    "is_alive",
    "port_open",
    "tail_text",
]

#: Children started by this process, by pid: polled instead of signalled,
#: and reaped, so a dead child is never mistaken for a live zombie.
CHILDREN: dict[int, subprocess.Popen[bytes]] = {}

#: Lines of a log quoted when a sandbox process fails.
LOG_TAIL_LINES = 30
#: Seconds a process gets to exit after SIGTERM before SIGKILL.
KILL_WAIT_S = 5.0

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def is_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie is dead; a pid of another user is alive)."""
    child = CHILDREN.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    # Field 3, after the parenthesised command name, is the state; Z is a zombie.
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def cmdline(pid: int) -> str | None:
    """The command line of ``pid`` (arguments joined by spaces), ``None`` if gone."""
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return None
    except OSError:
        return None
    proc = subprocess.run(
        ["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, check=False
    )
    return proc.stdout if proc.returncode == 0 else None


def port_open(port: int) -> bool:
    """True when something accepts a connection on 127.0.0.1:``port`` (1 s)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def check_name(name: str, what: str = "sandbox") -> None:
    """Refuse a sandbox name that is not letters, digits, ``._-`` (<= 64).

    Raises:
        SandboxError: naming ``what`` and the rule.
    """
    if not _NAME_RE.match(name):
        raise SandboxError(
            f"Invalid {what} name {name!r}: use letters, digits, '.', '_' or '-' "
            "(at most 64 characters, not starting with '.', '_' or '-')."
        )


def tail_text(text: str, lines: int) -> str:
    """The last ``lines`` non-blank lines of ``text`` (``(empty)`` if none)."""
    kept = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(kept[-lines:]) if kept else "(empty)"
