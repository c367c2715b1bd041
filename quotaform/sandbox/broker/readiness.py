"""Waiting until a sandbox answers: every broker registered, every voter caught up."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from quotaform.errors import SandboxError
from quotaform.sandbox.broker.config import _client_security, _count
from quotaform.sandbox.broker.model import (
    _POLL_INTERVAL_S,
    _PROBE_TIMEOUT_MS,
    BrokerOptions,
    SandboxBroker,
    SandboxNode,
)
from quotaform.sandbox.broker.state import _log_tail, _progress
from quotaform.sandbox.processes import (
    is_alive,
    port_open,
)
from quotaform.sandbox.quorum import describe_cluster, describe_quorum


class _PortClash(Exception):
    """A node died because a port we picked was taken meanwhile (retryable)."""


def _wait_ready(
    broker: SandboxBroker,
    watched: Iterable[SandboxNode],
    deadline: float,
    on_progress: Callable[[str], None] | None,
    options: BrokerOptions | None = None,
    since_ms: int | None = None,
) -> None:
    """Poll until ``watched`` nodes are ready: every watched broker answers
    DescribeCluster with the sandbox's cluster id and is listed unfenced, and
    every watched controller-only node that was restarted (``since_ms``: the
    restart, epoch ms) caught up with the quorum's leader since. A watched
    node that exits fails at once."""
    watched = tuple(watched)
    security = _client_security(options or BrokerOptions())
    brokers = [n for n in watched if n.is_broker]
    voters = [n for n in watched if not n.is_broker and since_ms is not None]
    while True:
        for node in watched:
            if not is_alive(node.pid):
                tail = _log_tail(node.log_path)
                if "Address already in use" in tail:
                    raise _PortClash(tail.splitlines()[-1] if tail else "address in use")
                raise SandboxError(
                    f"The sandbox {_what(broker, node)} (pid {node.pid}) exited during "
                    f"start-up. Last lines of its {node.log_path.name}:\n{tail}"
                )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            late = brokers[0] if brokers else watched[0]
            raise SandboxError(
                f"The sandbox {_what(broker, late)} (pid {late.pid}) did not answer on "
                f"{late.address} in time; retry with a longer --timeout. "
                f"Last lines of its {late.log_path.name}:\n{_log_tail(late.log_path)}"
            )
        timeout_ms = max(min(int(remaining * 1000), _PROBE_TIMEOUT_MS), 500)
        if _brokers_ready(broker, brokers, timeout_ms, security) and _voters_ready(
            broker, voters, since_ms, timeout_ms, security
        ):
            if brokers and broker.single_node:
                _progress(on_progress, f"Broker answers on {broker.bootstrap}")
            elif brokers:
                _progress(
                    on_progress,
                    f"{_count(len(brokers), 'broker')} registered: "
                    + ", ".join(f"{n.node_id} at {n.address}" for n in brokers),
                )
            return
        time.sleep(_POLL_INTERVAL_S)


def _brokers_ready(
    broker: SandboxBroker, brokers: list[SandboxNode], timeout_ms: int, security: dict[str, Any]
) -> bool:
    """Every broker of ``brokers`` accepts connections and is listed unfenced by
    DescribeCluster with the sandbox's cluster id.

    Raises:
        SandboxError: another cluster answers on the sandbox's ports.
    """
    if not brokers:
        return True
    if not all(n.port is not None and port_open(n.port) for n in brokers):
        return False
    view = describe_cluster(
        ",".join(n.address for n in brokers), timeout_ms=timeout_ms, security=security
    )
    if view is None:
        return False
    if view.cluster_id != broker.cluster_id:
        raise SandboxError(
            f"{brokers[0].address} is answered by cluster {view.cluster_id}, not by sandbox "
            f"{broker.name!r} (cluster {broker.cluster_id}); another broker took the "
            f"port. Run quotaform sandbox down --name {broker.name} and retry."
        )
    return {n.node_id for n in brokers} <= view.unfenced


def _voters_ready(
    broker: SandboxBroker,
    voters: list[SandboxNode],
    since_ms: int | None,
    timeout_ms: int,
    security: dict[str, Any],
) -> bool:
    """Every restarted controller of ``voters`` caught up with the quorum's
    leader after ``since_ms`` (DescribeQuorum through the sandbox's brokers)."""
    if not voters:
        return True
    if not all(n.controller_port is not None and port_open(n.controller_port) for n in voters):
        return False
    view = describe_quorum(broker.bootstrap, timeout_ms=timeout_ms, security=security)
    if view is None or since_ms is None:
        return False
    for node in voters:
        state = view.voters.get(node.node_id)
        if state is None or state.last_caught_up_ms < since_ms:
            return False
    return True


def _what(broker: SandboxBroker, node: SandboxNode) -> str:
    """``broker`` for the single node (as ever), else the node's label."""
    return "broker" if broker.single_node else node.label
