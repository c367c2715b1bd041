"""The nodes' processes: format, spawn, respawn and stop them."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from quotaform.errors import SandboxError
from quotaform.sandbox.broker.config import _agent, _heap, _jmx_options
from quotaform.sandbox.broker.model import (
    _JVM_OPTIONS,
    _SHARED_CLASSES_FROM,
    SCRAM_MECHANISM,
    BrokerOptions,
    SandboxBroker,
    SandboxNode,
)
from quotaform.sandbox.broker.state import _save_state
from quotaform.sandbox.jars import (
    class_data_archive,
    kafka_java_command,
    run_kafka_tool,
)
from quotaform.sandbox.processes import (
    CHILDREN,
    KILL_WAIT_S,
    LOG_TAIL_LINES,
    cmdline,
    is_alive,
    tail_text,
)

log = logging.getLogger(__name__)


def _spawn(
    java: str,
    libs: Path,
    broker: SandboxBroker,
    node: SandboxNode,
    *,
    classpath: tuple[Path, ...] = (),
) -> SandboxNode:
    """Start ``kafka.Kafka`` on ``node``'s ``server.properties`` in its own
    session (``classpath``: entries after Kafka's jars, plug-ins such as a
    quota callback); return the node with its pid."""
    jvm_options = [*_heap(broker, node), *_JVM_OPTIONS]
    archive = class_data_archive(java, libs, _SHARED_CLASSES_FROM)
    if archive.is_file():
        jvm_options.append(f"-XX:SharedArchiveFile={archive}")
    if node.jmx_port is not None:
        jvm_options += _jmx_options(node.jmx_port)
    agent = _agent(node)
    if agent is not None:
        jvm_options.append(agent)
    cmd = kafka_java_command(
        java,
        libs,
        "kafka.Kafka",
        [str(node.data_dir / "server.properties")],
        jvm_options=jvm_options,
        classpath=classpath,
    )
    log.info("starting %s: %s", node.label, " ".join(cmd))
    with open(node.log_path, "ab") as log_file:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=node.data_dir,
            start_new_session=True,  # survives the CLI process and its Ctrl-C
            close_fds=True,
        )
    CHILDREN[proc.pid] = proc
    return replace(node, pid=proc.pid)


def _respawn(
    java: str,
    libs: Path,
    broker: SandboxBroker,
    nodes: Iterable[SandboxNode],
    states: Path,
    *,
    classpath: tuple[Path, ...] = (),
) -> SandboxBroker:
    """Start ``nodes`` of ``broker`` again on their data dirs (``classpath``:
    as for :func:`_spawn`); the state file records each new pid as soon as it runs."""
    for node in nodes:
        broker = broker.with_node(_spawn(java, libs, broker, node, classpath=classpath))
        _save_state(states, broker)
    return broker


def _format_storage(
    nodes: tuple[SandboxNode, ...],
    cluster_id: str,
    version: str,
    deadline: float,
    options: BrokerOptions,
) -> None:
    """Format every node's log dir with one cluster id (StorageTool, one JVM
    per node, run side by side)."""
    # No --standalone: it conflicts with controller.quorum.voters.
    scram = []
    for user, password in (options.scram_users or {}).items():
        scram += ["--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]"]

    def format_one(node: SandboxNode) -> None:
        properties = node.data_dir / "server.properties"
        proc = run_kafka_tool(
            "kafka.tools.StorageTool",
            ["format", "-t", cluster_id, "-c", str(properties), *scram],
            version=version,
            timeout_s=max(deadline - time.monotonic(), 1.0),
        )
        if proc.returncode != 0:
            raise SandboxError(
                f"kafka.tools.StorageTool format failed (exit {proc.returncode}) for "
                f"{properties}:\n{tail_text(proc.stdout + proc.stderr, LOG_TAIL_LINES)}"
            )

    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        for done in [pool.submit(format_one, node) for node in nodes]:
            done.result()


def _is_ours(node: SandboxNode) -> bool:
    """True if ``node.pid`` is alive and still is this node's ``kafka.Kafka``."""
    if node.pid <= 0 or not is_alive(node.pid):
        return False
    command = cmdline(node.pid) or ""
    return "kafka.Kafka" in command and str(node.data_dir / "server.properties") in command


def _kill(node: SandboxNode) -> None:
    """SIGKILL ``node`` and wait until it is gone."""
    os.kill(node.pid, signal.SIGKILL)
    _wait_exit(node.pid, KILL_WAIT_S)
    CHILDREN.pop(node.pid, None)


def _terminate(pids: list[int], timeout_s: float, *, warn: bool = True) -> None:
    """SIGTERM every pid (SIGCONT first: a suspended process cannot act on it),
    wait up to ``timeout_s`` for all, then SIGKILL the survivors (a warning is
    logged unless ``warn`` is false: a short grace was expected to run out).

    Raises:
        SandboxError: a process survived SIGKILL.
    """
    pending = list(pids)
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, KILL_WAIT_S)):
        for pid in pending:
            with contextlib.suppress(ProcessLookupError):
                if sig is signal.SIGTERM:
                    os.kill(pid, signal.SIGCONT)
                os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        for pid in pending:
            if _wait_exit(pid, max(deadline - time.monotonic(), 0.0)):
                CHILDREN.pop(pid, None)
        pending = [pid for pid in pending if is_alive(pid)]
        if not pending:
            return
        for pid in pending:
            log.log(
                logging.WARNING if warn else logging.INFO,
                "sandbox node pid %d ignored %s",
                pid,
                sig.name,
            )
    raise SandboxError(
        f"Sandbox process(es) {', '.join(map(str, pending))} survived SIGKILL; check with ps."
    )


def _wait_stopped(pid: int, timeout_s: float = 2.0) -> None:
    """Wait until ``pid`` shows as stopped in ``/proc`` (a signal is delivered
    asynchronously); gives up silently after ``timeout_s`` or without ``/proc``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            return
        if state in ("T", "t"):
            return
        time.sleep(0.01)


def _wait_exit(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while is_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True
