"""Local processes of the sandboxes (the Kafka broker, Spark's daemons,
Prometheus): one registry of the children this process started, liveness,
command lines, process groups, loopback ports, sandbox names and log tails."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from quotaform.errors import SandboxError

__all__ = [
    "CHILDREN",
    "KILL_WAIT_S",
    "LOG_TAIL_LINES",
    "check_name",
    "cmdline",
    "free_port",
    "group_members",
    "is_alive",
    "log_tail",
    "port_open",
    "reap",
    "spawn_group",
    "tail_text",
    "terminate_group",
    "wait_for",
]

log = logging.getLogger(__name__)

#: Children started by this process, by pid: polled instead of signalled,
#: and reaped, so a dead child is never mistaken for a live zombie.
CHILDREN: dict[int, subprocess.Popen[bytes]] = {}

#: Lines of a log quoted when a sandbox process fails.
LOG_TAIL_LINES = 30
#: Seconds a process gets to exit after SIGTERM before SIGKILL.
KILL_WAIT_S = 5.0

_POLL_S = 0.2

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


def run_build_tool(
    cmd: Sequence[str],
    *,
    doing: str,
    advice: str,
    timeout_advice: str,
    timeout_s: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """Run a build or fetch tool (``go``, ``mvn``) to its end, without input;
    its standard output. ``doing`` names the step in errors (``"Building
    promtool"``); ``env`` ``None``: the caller's environment.

    Raises:
        SandboxError: the tool could not start; it ran over ``timeout_s``
            seconds (``DOING (CMD) did not finish within N s; TIMEOUT_ADVICE``);
            it failed (``DOING failed (exit N): CMD. ADVICE``, with the last
            :data:`LOG_TAIL_LINES` lines of its output).
    """
    shown = " ".join(cmd)
    log.info("running %s%s", shown, f" (in {cwd})" if cwd is not None else "")
    try:
        proc = subprocess.run(
            list(cmd),
            capture_output=True,
            text=True,
            env=None if env is None else dict(env),
            timeout=timeout_s,
            check=False,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
        )
    except subprocess.TimeoutExpired as exc:
        raise SandboxError(
            f"{doing} ({shown}) did not finish within {timeout_s:g} s; {timeout_advice}"
        ) from exc
    except OSError as exc:
        raise SandboxError(f"Could not run {cmd[0]}: {exc}") from exc
    if proc.returncode != 0:
        raise SandboxError(
            f"{doing} failed (exit {proc.returncode}): {shown}. {advice} Output (tail):\n"
            f"{tail_text(proc.stdout + proc.stderr, LOG_TAIL_LINES)}"
        )
    return proc.stdout


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` non-blank lines of the file ``path`` (``""`` read if unreadable)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    return tail_text(text, lines)


def free_port() -> int:
    """A loopback TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spawn_group(command: list[str], env: Mapping[str, str] | None, log_path: Path) -> int:
    """Start ``command`` in a new session (its pid is its process group id),
    stdout and stderr appended to ``log_path``, cwd its folder; registered in
    :data:`CHILDREN`. ``env`` ``None``: this process's environment.

    Returns:
        The pid (= process group id).

    Raises:
        OSError: the command could not be executed.
    """
    log.info("starting %s", " ".join(command))
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=None if env is None else dict(env),
            cwd=log_path.parent,
            start_new_session=True,
            close_fds=True,
        )
    CHILDREN[proc.pid] = proc
    return proc.pid


def wait_for(
    ready: Callable[[], bool], pgid: int, log_path: Path, deadline: float, what: str
) -> None:
    """Poll ``ready()`` every 0.2 s until it is true.

    Args:
        pgid: the process whose death ends the wait with an error.
        deadline: a :func:`time.monotonic` value.
        what: names the process in errors (``"the Spark master"``).

    Raises:
        SandboxError: the process exited, or ``deadline`` passed (with the
            tail of ``log_path``).
    """
    while not ready():
        if not is_alive(pgid):
            raise SandboxError(f"{what} exited while starting; {log_path}:\n{log_tail(log_path)}")
        if time.monotonic() >= deadline:
            raise SandboxError(f"{what} was not ready in time; {log_path}:\n{log_tail(log_path)}")
        time.sleep(_POLL_S)


def terminate_group(pgid: int, timeout_s: float) -> None:
    """SIGTERM process group ``pgid``, SIGKILL after ``timeout_s`` seconds,
    and wait until none of its members runs.

    Raises:
        SandboxError: the group survived SIGKILL.
    """
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, KILL_WAIT_S)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        if _wait_group_exit(pgid, wait_s):
            reap(pgid)
            return
        log.warning("process group %d ignored %s", pgid, sig.name)
    raise SandboxError(f"Process group {pgid} survived SIGKILL; check it with ps.")


def reap(pid: int) -> None:
    """Forget child ``pid`` (collecting its exit status, so no zombie stays)."""
    child = CHILDREN.pop(pid, None)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=1)


def group_members(pgid: int) -> list[int]:
    """The live (non-zombie) pids of process group ``pgid``, from ``/proc``."""
    found = []
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        # After the command name: state, ppid, pgrp.
        if len(fields) > 2 and fields[0] != "Z" and fields[2] == str(pgid):
            found.append(int(entry.parent.name))
    return found


def _wait_group_exit(pgid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        child = CHILDREN.get(pgid)
        if child is not None:
            child.poll()
        if not group_members(pgid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
