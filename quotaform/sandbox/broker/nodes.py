"""One node at a time, for fault tests: kill, stop, suspend, restart; the quorum's leader."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

from quotaform.errors import SandboxError
from quotaform.sandbox.broker.config import _client_security
from quotaform.sandbox.broker.model import (
    _POLL_INTERVAL_S,
    _PROBE_TIMEOUT_MS,
    DEFAULT_SANDBOX_NAME,
    BrokerOptions,
    SandboxBroker,
    SandboxNode,
)
from quotaform.sandbox.broker.process import _is_ours, _kill, _respawn, _terminate, _wait_stopped
from quotaform.sandbox.broker.readiness import _wait_ready
from quotaform.sandbox.broker.state import _load_state, _state_lock, default_state_dir
from quotaform.sandbox.jars import (
    ensure_kafka_jars,
    find_java,
)
from quotaform.sandbox.quorum import describe_quorum

__all__ = [
    "active_controller",
    "kill_node",
    "restart_node",
    "stop_node",
    "suspended_node",
    "wait_for_leader",
]

def kill_node(
    *, node_id: int, name: str = DEFAULT_SANDBOX_NAME, state_dir: Path | None = None
) -> SandboxNode:
    """SIGKILL one node of sandbox ``name`` (a crash: no controlled shutdown;
    a broker stays registered, unfenced, until its session times out),
    keeping its data, so :func:`restart_node` can start it again.

    Returns:
        The node as it was (its pid is gone).

    Raises:
        SandboxError: no such sandbox or node, or the node is not running.
    """
    with _one_node(name, state_dir, node_id) as (_, node, _states):
        _kill(node)
        return node


def stop_node(
    *,
    node_id: int,
    name: str = DEFAULT_SANDBOX_NAME,
    state_dir: Path | None = None,
    timeout_s: float = 30.0,
) -> SandboxNode:
    """SIGTERM one node of sandbox ``name`` and wait until it exited (a broker
    shuts down in a controlled way: the controller moves its partition
    leaderships and fences it); SIGKILL after ``timeout_s`` seconds. Its data
    is kept for :func:`restart_node`.

    Returns:
        The node as it was (its pid is gone).

    Raises:
        SandboxError: no such sandbox or node, the node is not running, or it
            survived SIGKILL.
    """
    with _one_node(name, state_dir, node_id) as (_, node, _states):
        _terminate([node.pid], timeout_s)
        return node


def restart_node(
    *,
    node_id: int,
    name: str = DEFAULT_SANDBOX_NAME,
    state_dir: Path | None = None,
    timeout_s: float = 90.0,
    options: BrokerOptions | None = None,
) -> SandboxBroker:
    """Start one killed or stopped node of sandbox ``name`` again on its own
    data dir and ports, and return once it is back: a broker registered and
    unfenced (DescribeCluster), a controller caught up with the quorum's
    leader (DescribeQuorum: caught up after the restart).

    Args:
        options: the options the sandbox was started with (SCRAM passwords are
            not kept in the state file; the probe needs them).

    Returns:
        The sandbox with the node's new pid.

    Raises:
        SandboxError: no such sandbox or node, the node still runs, or it did
            not come back in time (with its log tail).
    """
    states = state_dir or default_state_dir()
    with _state_lock(states, name):
        broker = _load_state(states, name)
        if broker is None:
            raise SandboxError(f"Sandbox {name!r} has no state")
        node = broker.node(node_id)
        if _is_ours(node):
            raise SandboxError(f"Sandbox {name!r}: {node.label} still runs (pid {node.pid})")
        deadline = time.monotonic() + timeout_s
        since_ms = int(time.time() * 1000)
        broker = _respawn(find_java(), ensure_kafka_jars(broker.version), broker, [node], states)
        _wait_ready(
            broker, [broker.node(node_id)], deadline, None, options or BrokerOptions(), since_ms
        )
        return broker


@contextlib.contextmanager
def suspended_node(
    *, node_id: int, name: str = DEFAULT_SANDBOX_NAME, state_dir: Path | None = None
) -> Iterator[SandboxNode]:
    """SIGSTOP one node of sandbox ``name`` for the ``with`` block and SIGCONT it
    after: a hung process. Its sockets stay open, so connections are accepted
    and requests go unanswered; a suspended broker is fenced once its session
    times out (``broker.session.timeout.ms``, 9 s).

    Raises:
        SandboxError: no such sandbox or node, or the node is not running.
    """
    with _one_node(name, state_dir, node_id) as (_, node, _states):
        os.kill(node.pid, signal.SIGSTOP)
        _wait_stopped(node.pid)
    try:
        yield node
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(node.pid, signal.SIGCONT)


def active_controller(
    *,
    name: str = DEFAULT_SANDBOX_NAME,
    state_dir: Path | None = None,
    timeout_s: float = 10.0,
    options: BrokerOptions | None = None,
) -> int:
    """The node id of sandbox ``name``'s active controller: the leader of the
    metadata quorum, from DescribeQuorum through the brokers (KIP-595, KIP-836).

    Raises:
        SandboxError: no such sandbox, or no leader was known within
            ``timeout_s`` seconds (an election under way, or no broker answers).
    """
    return wait_for_leader(name=name, state_dir=state_dir, timeout_s=timeout_s, options=options)


def wait_for_leader(
    *,
    name: str = DEFAULT_SANDBOX_NAME,
    state_dir: Path | None = None,
    other_than: int | None = None,
    timeout_s: float = 30.0,
    options: BrokerOptions | None = None,
) -> int:
    """Wait until sandbox ``name``'s metadata quorum has a leader (other than
    ``other_than``: after killing the active controller, its successor) and
    return its node id.

    Raises:
        SandboxError: no such sandbox, or no (new) leader within ``timeout_s``.
    """
    broker = _load_state(state_dir or default_state_dir(), name)
    if broker is None:
        raise SandboxError(f"Sandbox {name!r} is not running")
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        view = describe_quorum(
            broker.bootstrap,
            timeout_ms=_PROBE_TIMEOUT_MS,
            security=_client_security(options or BrokerOptions()),
        )
        if view is not None:
            last = view.leader_id
            if view.leader_id >= 0 and view.leader_id != other_than:
                return view.leader_id
        time.sleep(_POLL_INTERVAL_S)
    raise SandboxError(
        f"Sandbox {name!r}: no {'new ' if other_than is not None else ''}leader of the "
        f"metadata quorum within {timeout_s:g} s (last seen: {last})"
    )


@contextlib.contextmanager
def _one_node(
    name: str, state_dir: Path | None, node_id: int
) -> Iterator[tuple[SandboxBroker, SandboxNode, Path]]:
    """Under the sandbox's lock: the sandbox and its running node ``node_id``."""
    states = state_dir or default_state_dir()
    with _state_lock(states, name):
        broker = _load_state(states, name)
        if broker is None:
            raise SandboxError(f"Sandbox {name!r} is not running")
        node = broker.node(node_id)
        if not _is_ours(node):
            raise SandboxError(f"Sandbox {name!r}: {node.label} is not running")
        yield broker, node, states
