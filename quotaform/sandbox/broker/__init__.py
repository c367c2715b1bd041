"""Start, find and stop a KRaft Kafka sandbox for local use and tests: one
combined node (broker and controller, the default) or several brokers beside
a quorum of controllers.

Each sandbox has a *name*; its state lives in ``<state_dir>/<name>.json`` (default
``<cache>/sandboxes``) so ``status`` and ``down`` work from another process. Every
node runs in its own session, so it outlives the process that started it, with
its data, ``server.properties`` and log in a fresh temporary directory that
``stop_broker`` removes::

    single node (1 broker, 1 controller: one process, node id 1)
        <data_dir>/server.properties, broker.log, logs/
    several nodes (brokers 1..N, controllers 1001..1000+M)
        <data_dir>/broker-1/server.properties, broker.log, logs/
        <data_dir>/controller-1001/server.properties, controller.log, logs/

A node can be killed, stopped, suspended and restarted on its own log dir
(:func:`kill_node`, :func:`stop_node`, :func:`suspended_node`,
:func:`restart_node`) for fault tests; :func:`active_controller` names the
quorum's leader.

Process checks read ``/proc`` (Linux) and fall back to ``ps`` elsewhere.

The package by concern: ``model`` (options, nodes, the recorded sandbox,
its status), ``state`` (state files and their lock), ``config`` (layout,
ports, ``server.properties``), ``process`` (format, spawn, stop),
``readiness`` (until every broker answers), ``lifecycle`` (a whole
sandbox: start, status, stop), ``nodes`` (one node at a time; the quorum's
leader).
"""

from __future__ import annotations

from quotaform.sandbox.broker.lifecycle import (
    broker_status,
    kill_broker,
    resume_broker,
    start_broker,
    stop_broker,
)
from quotaform.sandbox.broker.model import (
    CONTROLLER_ID_BASE,
    DEFAULT_SANDBOX_NAME,
    BrokerOptions,
    SandboxBroker,
    SandboxNode,
    SandboxState,
    SandboxStatus,
)
from quotaform.sandbox.broker.nodes import (
    active_controller,
    kill_node,
    restart_node,
    stop_node,
    suspended_node,
    wait_for_leader,
)
from quotaform.sandbox.broker.state import default_state_dir, new_cluster_id

__all__ = [
    "CONTROLLER_ID_BASE",
    "DEFAULT_SANDBOX_NAME",
    "BrokerOptions",
    "SandboxBroker",
    "SandboxNode",
    "SandboxState",
    "SandboxStatus",
    "active_controller",
    "broker_status",
    "default_state_dir",
    "kill_broker",
    "kill_node",
    "new_cluster_id",
    "restart_node",
    "resume_broker",
    "start_broker",
    "stop_broker",
    "stop_node",
    "suspended_node",
    "wait_for_leader",
]
