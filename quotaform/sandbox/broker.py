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
"""

from __future__ import annotations

import base64
import contextlib
import enum
import fcntl
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from quotaform.errors import InputError, SandboxError
from quotaform.inputs.jsondoc import load_json
from quotaform.inputs.limits import LIMITS
from quotaform.sandbox.jars import (
    DEFAULT_KAFKA_VERSION,
    FAST_START_JVM_OPTIONS,
    JMX_EXPORTER_VERSION,
    cache_root,
    class_data_archive,
    ensure_jmx_exporter,
    ensure_kafka_jars,
    find_java,
    kafka_java_command,
    run_kafka_tool,
)
from quotaform.sandbox.processes import (
    CHILDREN,
    KILL_WAIT_S,
    LOG_TAIL_LINES,
    check_name,
    cmdline,
    is_alive,
    port_open,
    tail_text,
)
from quotaform.sandbox.quorum import describe_cluster, describe_quorum

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

log = logging.getLogger(__name__)

DEFAULT_SANDBOX_NAME = "default"

#: Controller-only nodes are numbered from here (1001, 1002, ...); brokers from 1.
CONTROLLER_ID_BASE = 1000

#: Serial GC and the C1-only JIT start the broker ~1 s faster (measured: 4.2 s ->
#: 3.2 s to first answer) and a sandbox never needs peak throughput. CDS messages
#: are silenced: a missing or stale archive just means an unshared start.
_JVM_OPTIONS = (*FAST_START_JVM_OPTIONS, "-Djava.awt.headless=true")
#: Heap by role: the single combined node as ever; with several nodes they share
#: a small machine, and a controller only holds the metadata log.
_HEAP_COMBINED = ("-Xms256m", "-Xmx1g")
_HEAP_BROKER = ("-Xms128m", "-Xmx512m")
_HEAP_CONTROLLER = ("-Xms64m", "-Xmx256m")
#: The broker maps in the archive StorageTool recorded while formatting: they share
#: most classes (Scala, Kafka core, log4j), worth ~0.6 s of broker start-up.
_SHARED_CLASSES_FROM = "kafka.tools.StorageTool"

_PORT_ATTEMPTS = 3
_POLL_INTERVAL_S = 0.2
_PROBE_TIMEOUT_MS = 5000
#: Seconds a controller-only node gets to exit on ``down`` before SIGKILL.
_CONTROLLER_GRACE_S = 1.0
#: Replication factor of internal topics (and the apply lock) with several brokers.
_MAX_REPLICATION = 3

BROKER, CONTROLLER = "broker", "controller"


@dataclass(frozen=True, slots=True)
class BrokerOptions:
    """How a sandbox broker is set up beyond the defaults (for tests and demos).

    Attributes:
        port: the client listener's port; ``None``: a free loopback port.
            Single node only.
        advertised_port: the port clients are told to use after bootstrap
            (a proxy in front of the broker); ``None``: ``port``. Single node only.
        scram_users: ``{name: password}``: the client listener becomes
            SASL_PLAINTEXT with SCRAM-SHA-512 users, and the StandardAuthorizer
            is on; the first user is a super user, the others have no ACLs.
            The KRaft controller listener stays PLAINTEXT on loopback (its
            ``ANONYMOUS`` principal is a super user so the node can register).
        jmx_port: a loopback JMX/RMI port for Kafka's metrics (``JmxTool``,
            :mod:`quotaform.sandbox.jmx`); ``0``: a free one (with several
            nodes: one per broker); ``None``: no JMX.
        prometheus_rules: a Prometheus JMX exporter config file (``rules:``,
            ``lowercaseOutputName``, ...): the broker runs the exporter's java
            agent (``io.prometheus.jmx:jmx_prometheus_javaagent``) with it, serving
            ``http://127.0.0.1:PORT/metrics``. The file is copied into the
            broker's data dir (with several nodes: every broker's). ``None``:
            no exporter.
        prometheus_port: the agent's loopback HTTP port; ``0`` or ``None``: a
            free one (only used with ``prometheus_rules``; with several nodes
            always a free one per broker).
        extra_properties: ``{name: value}`` added to ``server.properties``
            after the sandbox's own lines (a name set twice: the last wins)
            and after the storage is formatted, so a plug-in class only on
            ``extra_classpath`` can be named, e.g.
            ``{"client.quota.callback.class": "com.example.Callback"}``.
        extra_classpath: jars or class directories added after Kafka's jars
            on the broker's classpath (plug-ins such as a KIP-257 quota
            callback).
    """

    port: int | None = None
    advertised_port: int | None = None
    scram_users: dict[str, str] | None = None
    jmx_port: int | None = None
    prometheus_rules: Path | None = None
    prometheus_port: int | None = 0
    extra_properties: dict[str, str] | None = None
    extra_classpath: tuple[Path, ...] = ()

    @property
    def security_protocol(self) -> str:
        """``SASL_PLAINTEXT`` with SCRAM users, else ``PLAINTEXT``."""
        return "SASL_PLAINTEXT" if self.scram_users else "PLAINTEXT"


SCRAM_MECHANISM = "SCRAM-SHA-512"


@dataclass(frozen=True, slots=True)
class SandboxNode:
    """One Kafka process of a sandbox.

    Attributes:
        node_id: its ``node.id`` (brokers 1..N, controllers 1001..; the single
            combined node is 1).
        roles: its ``process.roles``: ``("broker",)``, ``("controller",)`` or
            ``("broker", "controller")``.
        pid: process id of its ``java ... kafka.Kafka`` process (0: not started).
        data_dir: holds its ``server.properties``, log and ``logs/`` (the log dir).
        log_path: its stdout and stderr.
        port: the client listener's port (brokers), else ``None``.
        controller_port: the CONTROLLER listener's port (controllers), else ``None``.
        jmx_port: its loopback JMX port, ``None`` without JMX.
        prometheus_port: its JMX exporter agent's loopback HTTP port, ``None``
            without the agent.
        prometheus_config: the agent's config file, ``None`` without the agent.
        solo_port: with several brokers, the port of a listener only this
            broker has (``SOLO<node id>``, same security protocol). Kafka's
            Metadata lists a broker only on the listeners it has, so a client
            bootstrapped there sees a one-broker cluster and every request it
            makes reaches this broker (e.g. Kafka's ConfigCommand, which
            otherwise asks whichever broker is least loaded). ``None`` on the
            single node and on controllers.
    """

    node_id: int
    roles: tuple[str, ...]
    pid: int
    data_dir: Path
    log_path: Path
    port: int | None = None
    controller_port: int | None = None
    jmx_port: int | None = None
    prometheus_port: int | None = None
    prometheus_config: Path | None = None
    solo_port: int | None = None

    @property
    def is_broker(self) -> bool:
        """It serves clients (``broker`` in its roles)."""
        return BROKER in self.roles

    @property
    def is_controller(self) -> bool:
        """It votes in the metadata quorum (``controller`` in its roles)."""
        return CONTROLLER in self.roles

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT`` of its client listener, else of its CONTROLLER one."""
        return f"127.0.0.1:{self.port if self.port is not None else self.controller_port}"

    @property
    def solo_address(self) -> str:
        """``127.0.0.1:PORT`` of the listener only this broker has (:attr:`solo_port`),
        else :attr:`address` (the single node: the only broker anyway)."""
        return f"127.0.0.1:{self.solo_port}" if self.solo_port is not None else self.address

    @property
    def label(self) -> str:
        """``broker 2``, ``controller 1001`` or ``node 1`` (broker and controller)."""
        if self.is_broker and self.is_controller:
            return f"node {self.node_id}"
        return f"{self.roles[0]} {self.node_id}"

    def to_json(self) -> dict[str, Any]:
        """The JSON-ready record (paths as strings, roles as a list)."""
        record = asdict(self)
        record["roles"] = list(self.roles)
        record["data_dir"] = str(self.data_dir)
        record["log_path"] = str(self.log_path)
        if self.prometheus_config is not None:
            record["prometheus_config"] = str(self.prometheus_config)
        return record

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> SandboxNode:
        """Rebuild a node from :meth:`to_json` output.

        Raises:
            KeyError, TypeError, ValueError: the record is incomplete or mistyped.
        """
        config = record.get("prometheus_config")
        return cls(
            node_id=int(record["node_id"]),
            roles=tuple(str(r) for r in record["roles"]),
            pid=int(record["pid"]),
            data_dir=Path(record["data_dir"]),
            log_path=Path(record["log_path"]),
            port=_optional_int(record.get("port")),
            controller_port=_optional_int(record.get("controller_port")),
            jmx_port=_optional_int(record.get("jmx_port")),
            prometheus_port=_optional_int(record.get("prometheus_port")),
            prometheus_config=Path(config) if config else None,
            solo_port=_optional_int(record.get("solo_port")),
        )


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True, slots=True)
class SandboxBroker:
    """A sandbox: its nodes and where to reach them.

    With one combined node the top-level fields describe that node; with
    several nodes they describe the first broker (``bootstrap`` lists every
    broker, ``data_dir`` is the folder of every node's folder).

    Attributes:
        name: sandbox name, e.g. ``"default"`` (also the state file's stem).
        version: Kafka release it runs, e.g. ``"4.3.1"``.
        bootstrap: ``"127.0.0.1:PORT"``, the PLAINTEXT listener; with several
            brokers each one's, comma-separated.
        port: the (first broker's) client listener port.
        controller_port: the (first controller's) KRaft CONTROLLER listener port.
        pid: process id of the (first broker's) ``java ... kafka.Kafka`` process.
        data_dir: temporary directory with ``server.properties``, ``broker.log``
            and ``logs/`` (the Kafka log dir), or with one such folder per node;
            removed by :func:`stop_broker`.
        log_path: the (first) broker's stdout and stderr (``broker.log``).
        cluster_id: the KRaft cluster id it was formatted with (22-char base64).
        security_protocol: of the client listener (``PLAINTEXT`` or
            ``SASL_PLAINTEXT``, see :class:`BrokerOptions`).
        advertised_port: the port clients are told to use after bootstrap,
            when it differs from ``port`` (a proxy); else ``None``.
        jmx_port: the (first broker's) loopback JMX port, ``None`` without JMX.
        prometheus_port: the (first broker's) JMX exporter agent's loopback
            HTTP port (scrape ``http://127.0.0.1:PORT/metrics``), ``None``
            without the agent.
        prometheus_config: the agent's config file (a copy in ``data_dir``),
            ``None`` without the agent.
        nodes: every node, by node id (brokers first); a record without nodes
            (an older state file, or built by hand) is the one combined node
            its top-level fields describe.
    """

    name: str
    version: str
    bootstrap: str
    port: int
    controller_port: int
    pid: int
    data_dir: Path
    log_path: Path
    cluster_id: str
    security_protocol: str = "PLAINTEXT"
    advertised_port: int | None = None
    jmx_port: int | None = None
    prometheus_port: int | None = None
    prometheus_config: Path | None = None
    nodes: tuple[SandboxNode, ...] = ()

    def __post_init__(self) -> None:
        if not self.nodes:
            combined = SandboxNode(
                node_id=1,
                roles=(BROKER, CONTROLLER),
                pid=self.pid,
                data_dir=self.data_dir,
                log_path=self.log_path,
                port=self.port,
                controller_port=self.controller_port,
                jmx_port=self.jmx_port,
                prometheus_port=self.prometheus_port,
                prometheus_config=self.prometheus_config,
            )
            object.__setattr__(self, "nodes", (combined,))

    @property
    def brokers(self) -> tuple[SandboxNode, ...]:
        """The nodes that serve clients, by node id."""
        return tuple(n for n in self.nodes if n.is_broker)

    @property
    def controllers(self) -> tuple[SandboxNode, ...]:
        """The nodes of the metadata quorum, by node id."""
        return tuple(n for n in self.nodes if n.is_controller)

    @property
    def single_node(self) -> bool:
        """One combined broker-and-controller process (``sandbox up`` by default)."""
        return len(self.nodes) == 1

    def node(self, node_id: int) -> SandboxNode:
        """The node with ``node_id``.

        Raises:
            SandboxError: the sandbox has no such node (naming the ones it has).
        """
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        known = ", ".join(n.label for n in self.nodes)
        raise SandboxError(f"Sandbox {self.name!r} has no node {node_id} (it has {known})")

    def with_node(self, node: SandboxNode) -> SandboxBroker:
        """This sandbox with ``node`` replacing the node of the same id (a new
        pid after a restart; the top-level ``pid`` follows the first broker)."""
        nodes = tuple(node if n.node_id == node.node_id else n for n in self.nodes)
        first = next(n for n in nodes if n.is_broker)
        return replace(self, nodes=nodes, pid=first.pid)

    def to_json(self) -> dict[str, Any]:
        """Return the JSON-ready state record (paths as strings)."""
        record = asdict(self)
        record["data_dir"] = str(self.data_dir)
        record["log_path"] = str(self.log_path)
        if self.prometheus_config is not None:
            record["prometheus_config"] = str(self.prometheus_config)
        record["nodes"] = [n.to_json() for n in self.nodes]
        return record

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> SandboxBroker:
        """Rebuild a sandbox from :meth:`to_json` output (or a state file written
        before sandboxes had several nodes).

        Raises:
            KeyError, TypeError, ValueError: the record is incomplete or mistyped.
        """
        return cls(
            name=str(record["name"]),
            version=str(record["version"]),
            bootstrap=str(record["bootstrap"]),
            port=int(record["port"]),
            controller_port=int(record["controller_port"]),
            pid=int(record["pid"]),
            data_dir=Path(record["data_dir"]),
            log_path=Path(record["log_path"]),
            cluster_id=str(record["cluster_id"]),
            security_protocol=str(record.get("security_protocol", "PLAINTEXT")),
            advertised_port=record.get("advertised_port"),
            jmx_port=record.get("jmx_port"),
            prometheus_port=record.get("prometheus_port"),
            prometheus_config=(
                Path(record["prometheus_config"]) if record.get("prometheus_config") else None
            ),
            nodes=tuple(SandboxNode.from_json(n) for n in record.get("nodes") or ()),
        )


class SandboxState(enum.Enum):
    """What :func:`broker_status` found."""

    RUNNING = "running"
    """Every node runs, and every broker is registered and answers Kafka requests."""
    UNRESPONSIVE = "unresponsive"
    """Every node runs, but the cluster did not answer, or not every broker
    is registered yet (still starting, or hung)."""
    DEGRADED = "degraded"
    """Some nodes run, others do not (killed or stopped; see
    :attr:`SandboxStatus.down`)."""
    STOPPED = "stopped"
    """No sandbox process of that name; any stale state was removed."""


@dataclass(frozen=True, slots=True)
class SandboxStatus:
    """A sandbox's state; ``broker`` is ``None`` exactly when ``state`` is STOPPED.

    Attributes:
        down: node ids of the nodes whose process does not run (DEGRADED).
    """

    name: str
    state: SandboxState
    broker: SandboxBroker | None
    down: tuple[int, ...] = ()


class _PortClash(Exception):
    """A node died because a port we picked was taken meanwhile (retryable)."""


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


def start_broker(
    *,
    version: str = DEFAULT_KAFKA_VERSION,
    name: str = DEFAULT_SANDBOX_NAME,
    state_dir: Path | None = None,
    on_progress: Callable[[str], None] | None = None,
    timeout_s: float = 90.0,
    options: BrokerOptions | None = None,
    brokers: int | None = None,
    controllers: int | None = None,
) -> SandboxBroker:
    """Start sandbox ``name`` and return once every broker answers Kafka requests.

    One broker and one controller (the default) are one combined KRaft node.
    Otherwise ``controllers`` controller-only nodes form a static quorum
    (``controller.quorum.voters``) and ``brokers`` broker-only nodes join it,
    all started at once; this returns once DescribeCluster lists every broker
    registered and unfenced. Internal topics (and the apply lock) are then
    replicated ``min(brokers, 3)`` times.

    Idempotent: if ``name`` is already running (and answers within
    ``timeout_s``) the existing sandbox is returned, after restarting any of
    its nodes that were killed or stopped; only a number of brokers or
    controllers given explicitly and different from its own is refused.
    State left by a dead sandbox is cleaned up first.

    Args:
        version: Kafka release; jars are fetched into the cache on first use.
        name: sandbox name (letters, digits, ``._-``; at most 64 characters).
        state_dir: where state files live; ``None`` means :func:`default_state_dir`.
        on_progress: called with one human-readable line per step.
        timeout_s: seconds allowed for format, start and first answer (the jar
            download on a cold cache is not counted).
        options: ports, SCRAM users, JMX (:class:`BrokerOptions`); ``None``:
            a PLAINTEXT sandbox on free ports.
        brokers: broker processes (>= 1); ``None``: as many as the running
            sandbox has, else 1.
        controllers: controller processes (>= 1; 3 tolerate one failure);
            ``None``: as many as the running sandbox has, else 1.

    Raises:
        SandboxError: Java or Maven missing, jar fetch failed, a node exited
            or the brokers did not answer in time (message carries the node's
            log tail), ``name`` already runs a different Kafka version or
            number of nodes, or options that need a single node were given
            for several.
    """
    check_name(name)
    # A number not given: the running sandbox's (checked below), else 1.
    wanted = (1 if brokers is None else brokers, 1 if controllers is None else controllers)
    if min(wanted) < 1:
        raise SandboxError(
            f"A sandbox needs at least one broker and one controller "
            f"(got --brokers {wanted[0]} --controllers {wanted[1]})"
        )
    options = options or BrokerOptions()
    _check_options(options, *wanted)
    states = state_dir or default_state_dir()
    with _state_lock(states, name):
        existing = _load_state(states, name)
        if existing is not None:
            running = [n for n in existing.nodes if _is_ours(n)]
            if running:
                _check_same(existing, version, brokers, controllers)
                deadline = time.monotonic() + timeout_s
                stopped = [n for n in existing.nodes if n not in running]
                if stopped:
                    _progress(
                        on_progress,
                        f"Sandbox {name!r} runs without "
                        f"{', '.join(n.label for n in stopped)}; restarting",
                    )
                    libs = ensure_kafka_jars(version)
                    existing = _respawn(
                        find_java(),
                        libs,
                        existing,
                        stopped,
                        states,
                        classpath=options.extra_classpath,
                    )
                else:
                    _progress(on_progress, f"Sandbox {name!r} already running (pid {existing.pid})")
                _wait_ready(existing, existing.nodes, deadline, on_progress, options)
                return existing
            log.info("removing stale state of sandbox %r (pid %d is gone)", name, existing.pid)
            _discard(existing, states)

        java = find_java()
        libs = ensure_kafka_jars(version, on_progress=on_progress)
        deadline = time.monotonic() + timeout_s
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            try:
                return _launch(
                    java,
                    libs,
                    version,
                    name,
                    states,
                    deadline,
                    on_progress,
                    options,
                    *wanted,
                )
            except _PortClash as clash:
                if attempt == _PORT_ATTEMPTS:
                    raise SandboxError(
                        f"Sandbox {name!r} could not bind its ports {_PORT_ATTEMPTS} times "
                        f"in a row: {clash}. Retry, or free some loopback ports."
                    ) from None
                _progress(on_progress, "Port taken meanwhile; retrying with new ports")
    raise AssertionError("unreachable")


def stop_broker(
    *,
    name: str = DEFAULT_SANDBOX_NAME,
    state_dir: Path | None = None,
    timeout_s: float = 15.0,
) -> SandboxBroker | None:
    """Stop every node of sandbox ``name``, remove its data directory and state file.

    Sends SIGTERM (brokers first, so their controlled shutdown still finds
    the controllers), waits up to ``timeout_s`` seconds, then SIGKILL.
    Controller-only nodes get :data:`_CONTROLLER_GRACE_S`: once the quorum's
    leader has gone the others wait 5 s for it, and their data is removed
    anyway. A pid that no longer belongs to this sandbox's ``kafka.Kafka``
    process is never signalled.

    Returns:
        The sandbox that was recorded, or ``None`` if ``name`` had no state.

    Raises:
        SandboxError: a process survived SIGKILL, or the state file is unreadable.
    """
    check_name(name)
    states = state_dir or default_state_dir()
    with _state_lock(states, name):
        broker = _load_state(states, name)
        if broker is None:
            return None
        brokers_first = (
            ([n for n in broker.nodes if n.is_broker], timeout_s),
            ([n for n in broker.nodes if not n.is_broker], _CONTROLLER_GRACE_S),
        )
        for group, grace_s in brokers_first:
            patient = grace_s == timeout_s
            _terminate([n.pid for n in group if _is_ours(n)], grace_s, warn=patient)
        _discard(broker, states)
        return broker


def broker_status(
    *,
    name: str = DEFAULT_SANDBOX_NAME,
    state_dir: Path | None = None,
    probe_timeout_s: float = 5.0,
) -> SandboxStatus:
    """Report whether sandbox ``name`` runs and answers; clean up stale state.

    RUNNING: every node runs and DescribeCluster lists every broker,
    unfenced; DEGRADED: some nodes do not run (``down``); UNRESPONSIVE:
    every node runs but the cluster does not answer yet; STOPPED: no node
    runs (the state is removed).

    Raises:
        SandboxError: the state file is unreadable.
    """
    check_name(name)
    states = state_dir or default_state_dir()
    broker = _load_state(states, name)
    if broker is None:
        return SandboxStatus(name, SandboxState.STOPPED, None)
    down = tuple(n.node_id for n in broker.nodes if not _is_ours(n))
    if len(down) == len(broker.nodes):
        with _state_lock(states, name):
            again = _load_state(states, name)
            if again == broker:
                _discard(broker, states)
        return SandboxStatus(name, SandboxState.STOPPED, None)
    if down:
        return SandboxStatus(name, SandboxState.DEGRADED, broker, down)
    if broker.security_protocol != "PLAINTEXT":
        # No credentials here: a SASL sandbox that accepts connections runs.
        answering = all(port_open(n.port) for n in broker.brokers if n.port is not None)
        state = SandboxState.RUNNING if answering else SandboxState.UNRESPONSIVE
        return SandboxStatus(name, state, broker)
    view = describe_cluster(broker.bootstrap, timeout_ms=int(probe_timeout_s * 1000))
    registered = (
        view is not None
        and view.cluster_id == broker.cluster_id
        and {n.node_id for n in broker.brokers} <= view.unfenced
    )
    state = SandboxState.RUNNING if registered else SandboxState.UNRESPONSIVE
    return SandboxStatus(name, state, broker)


# -- one node at a time (fault tests) -------------------------------------------


def kill_broker(
    *, name: str = DEFAULT_SANDBOX_NAME, state_dir: Path | None = None
) -> SandboxBroker:
    """SIGKILL every node of sandbox ``name`` (a crash), keeping data and state,
    so :func:`resume_broker` can restart them on the same log dirs.

    Raises:
        SandboxError: ``name`` is not running.
    """
    states = state_dir or default_state_dir()
    with _state_lock(states, name):
        broker = _load_state(states, name)
        running = [n for n in broker.nodes if _is_ours(n)] if broker is not None else []
        if broker is None or not running:
            raise SandboxError(f"Sandbox {name!r} is not running")
        for node in running:
            _kill(node)
        return broker


def resume_broker(
    *,
    name: str = DEFAULT_SANDBOX_NAME,
    state_dir: Path | None = None,
    timeout_s: float = 90.0,
    options: BrokerOptions | None = None,
) -> SandboxBroker:
    """Start every node of sandbox ``name`` that does not run again on its
    existing data dir (after :func:`kill_broker`), with the same ports, and
    return once every broker answers.

    Args:
        options: the options it was started with (SCRAM passwords are not
            kept in the state file; the probe needs them).

    Raises:
        SandboxError: no state for ``name``, every node still runs, or the
            brokers do not answer.
    """
    states = state_dir or default_state_dir()
    with _state_lock(states, name):
        old = _load_state(states, name)
        if old is None:
            raise SandboxError(f"Sandbox {name!r} has no state to resume")
        stopped = [n for n in old.nodes if not _is_ours(n)]
        if not stopped:
            raise SandboxError(f"Sandbox {name!r} still runs (pid {old.pid})")
        deadline = time.monotonic() + timeout_s
        broker = _respawn(
            find_java(),
            ensure_kafka_jars(old.version),
            old,
            stopped,
            states,
            classpath=(options or BrokerOptions()).extra_classpath,
        )
        _wait_ready(broker, broker.nodes, deadline, None, options or BrokerOptions())
        return broker


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


# -- start-up -----------------------------------------------------------------


def _check_options(options: BrokerOptions, brokers: int, controllers: int) -> None:
    if brokers == controllers == 1:
        return
    fixed = [
        flag
        for flag, value in (
            ("port", options.port),
            ("advertised_port", options.advertised_port),
            ("jmx_port (other than 0)", options.jmx_port or None),
            ("prometheus_port (other than 0)", options.prometheus_port or None),
        )
        if value is not None
    ]
    if fixed:
        raise SandboxError(
            f"A sandbox of several nodes takes free ports only; {', '.join(fixed)} "
            "needs the single node (--brokers 1 --controllers 1)"
        )


def _check_same(
    existing: SandboxBroker, version: str, brokers: int | None, controllers: int | None
) -> None:
    """Refuse to return a running sandbox that is not the one asked for (a
    number of nodes not given, ``None``, is whatever it runs with)."""
    name = existing.name
    if existing.version != version:
        raise SandboxError(
            f"Sandbox {name!r} already runs Kafka {existing.version} on "
            f"{existing.bootstrap}; stop it first (quotaform sandbox down "
            f"--name {name}) to start Kafka {version}."
        )
    has = (len(existing.brokers), len(existing.controllers))
    brokers = has[0] if brokers is None else brokers
    controllers = has[1] if controllers is None else controllers
    if has != (brokers, controllers):
        raise SandboxError(
            f"Sandbox {name!r} already runs with {_count(has[0], 'broker')} and "
            f"{_count(has[1], 'controller')}; stop it first (quotaform sandbox down "
            f"--name {name}) to start it with {_count(brokers, 'broker')} and "
            f"{_count(controllers, 'controller')}."
        )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _layout(
    root: Path, brokers: int, controllers: int, options: BrokerOptions
) -> tuple[SandboxNode, ...]:
    """The nodes of a new sandbox in ``root``, on free ports, not started (pid 0)."""
    rules = options.prometheus_rules
    if rules is not None and not rules.is_file():
        raise SandboxError(f"JMX exporter config {rules} is not a file")
    if brokers == controllers == 1:
        if options.port is not None:
            port, (controller_port,) = options.port, _free_ports(1)
        else:
            port, controller_port = _free_ports(2)
        jmx_port = _free_ports(1)[0] if options.jmx_port == 0 else options.jmx_port
        prometheus_port = None
        if rules is not None:
            prometheus_port = options.prometheus_port or _free_ports(1)[0]
        combined = SandboxNode(
            node_id=1,
            roles=(BROKER, CONTROLLER),
            pid=0,  # pid 0 is never signalled: only the started copy is
            data_dir=root,
            log_path=root / "broker.log",
            port=port,
            controller_port=controller_port,
            jmx_port=jmx_port,
            prometheus_port=prometheus_port,
            prometheus_config=root / "jmx-exporter.yaml" if rules is not None else None,
        )
        return (combined,)
    per_broker = 2 + (options.jmx_port is not None) + (rules is not None)
    ports = iter(_free_ports(brokers * per_broker + controllers))
    nodes = []
    for node_id in range(1, brokers + 1):
        folder = root / f"broker-{node_id}"
        nodes.append(
            SandboxNode(
                node_id=node_id,
                roles=(BROKER,),
                pid=0,
                data_dir=folder,
                log_path=folder / "broker.log",
                port=next(ports),
                jmx_port=next(ports) if options.jmx_port is not None else None,
                prometheus_port=next(ports) if rules is not None else None,
                prometheus_config=folder / "jmx-exporter.yaml" if rules is not None else None,
                solo_port=next(ports),
            )
        )
    for node_id in range(CONTROLLER_ID_BASE + 1, CONTROLLER_ID_BASE + controllers + 1):
        folder = root / f"controller-{node_id}"
        nodes.append(
            SandboxNode(
                node_id=node_id,
                roles=(CONTROLLER,),
                pid=0,
                data_dir=folder,
                log_path=folder / "controller.log",
                controller_port=next(ports),
            )
        )
    return tuple(nodes)


def _sandbox_of(
    name: str,
    version: str,
    root: Path,
    cluster_id: str,
    options: BrokerOptions,
    nodes: tuple[SandboxNode, ...],
) -> SandboxBroker:
    """The sandbox record of ``nodes``: its top-level fields from the first
    broker and the first controller."""
    first = next(n for n in nodes if n.is_broker)
    quorum = next(n for n in nodes if n.is_controller)
    assert first.port is not None and quorum.controller_port is not None
    return SandboxBroker(
        name=name,
        version=version,
        bootstrap=",".join(n.address for n in nodes if n.is_broker),
        port=first.port,
        controller_port=quorum.controller_port,
        pid=first.pid,
        data_dir=root,
        log_path=first.log_path,
        cluster_id=cluster_id,
        security_protocol=options.security_protocol,
        advertised_port=options.advertised_port,
        jmx_port=first.jmx_port,
        prometheus_port=first.prometheus_port,
        prometheus_config=first.prometheus_config,
        nodes=nodes,
    )


def _heap(broker: SandboxBroker, node: SandboxNode) -> tuple[str, ...]:
    if broker.single_node:
        return _HEAP_COMBINED
    return _HEAP_BROKER if node.is_broker else _HEAP_CONTROLLER


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


def _agent(node: SandboxNode) -> str | None:
    """The JMX exporter's ``-javaagent:JAR=127.0.0.1:PORT:CONFIG`` option, if any."""
    if node.prometheus_port is None or node.prometheus_config is None:
        return None
    jar = ensure_jmx_exporter() / f"jmx_prometheus_javaagent-{JMX_EXPORTER_VERSION}.jar"
    return f"-javaagent:{jar}=127.0.0.1:{node.prometheus_port}:{node.prometheus_config}"


def _jmx_options(port: int) -> list[str]:
    """JMX over RMI on one loopback port, no authentication (a local sandbox)."""
    return [
        "-Dcom.sun.management.jmxremote",
        f"-Dcom.sun.management.jmxremote.port={port}",
        f"-Dcom.sun.management.jmxremote.rmi.port={port}",
        "-Dcom.sun.management.jmxremote.host=127.0.0.1",
        "-Djava.rmi.server.hostname=127.0.0.1",
        "-Dcom.sun.management.jmxremote.authenticate=false",
        "-Dcom.sun.management.jmxremote.ssl=false",
    ]


def _launch(
    java: str,
    libs: Path,
    version: str,
    name: str,
    states: Path,
    deadline: float,
    on_progress: Callable[[str], None] | None,
    options: BrokerOptions,
    brokers: int,
    controllers: int,
) -> SandboxBroker:
    root = Path(tempfile.mkdtemp(prefix=f"quotaform-sandbox-{name}-"))
    started: SandboxBroker | None = None
    try:
        nodes = _layout(root, brokers, controllers, options)
        voters = ",".join(
            f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in nodes if n.is_controller
        )
        replication = min(brokers, _MAX_REPLICATION)
        for node in nodes:
            node.data_dir.mkdir(exist_ok=True)
            properties = node.data_dir / "server.properties"
            properties.write_text(
                _server_properties(node, voters, replication, options), encoding="utf-8"
            )
            properties.chmod(0o600)  # may hold the SCRAM super user's password
            if options.prometheus_rules is not None and node.prometheus_config is not None:
                shutil.copyfile(options.prometheus_rules, node.prometheus_config)
        cluster_id = new_cluster_id()
        _progress(
            on_progress,
            f"Formatting KRaft storage (cluster id {cluster_id})"
            + ("" if len(nodes) == 1 else f" of {len(nodes)} nodes"),
        )
        _format_storage(nodes, cluster_id, version, deadline, options)
        # After the format: StorageTool loads every class the config names,
        # and a plug-in is only on the nodes' classpath.
        for node in nodes:
            _add_properties(node.data_dir / "server.properties", options.extra_properties or {})

        unstarted = _sandbox_of(name, version, root, cluster_id, options, nodes)
        started = unstarted
        for node in nodes:  # each pid recorded as soon as it runs: never a leak
            started = started.with_node(
                _spawn(java, libs, started, node, classpath=options.extra_classpath)
            )
        _save_state(states, started)
        if started.single_node:
            what = f"Started Kafka {version} (pid {started.pid}); waiting for {started.bootstrap}"
        else:
            what = (
                f"Started Kafka {version}: {_count(brokers, 'broker')} and "
                f"{_count(controllers, 'controller')} (pids "
                f"{', '.join(str(n.pid) for n in started.nodes)}); waiting for every broker "
                f"to register"
            )
        _progress(on_progress, what)
        _wait_ready(started, started.nodes, deadline, on_progress, options)
        return started
    except BaseException:
        if started is not None:
            _terminate([n.pid for n in started.nodes if n.pid and is_alive(n.pid)], KILL_WAIT_S)
            _discard(started, states)
        else:
            shutil.rmtree(root, ignore_errors=True)
        raise


def _server_properties(
    node: SandboxNode, voters: str, replication: int, options: BrokerOptions
) -> str:
    proto = options.security_protocol
    # The client listener, and the one only this broker has (see SandboxNode.solo_port).
    clients = {proto: node.port} if node.is_broker else {}
    if node.solo_port is not None:
        clients[f"SOLO{node.node_id}"] = node.solo_port
    listeners = [f"{listener}://127.0.0.1:{port}" for listener, port in clients.items()]
    if node.is_controller:
        listeners.append(f"CONTROLLER://127.0.0.1:{node.controller_port}")
    protocols = ",".join(f"{listener}:{proto}" for listener in clients)
    lines = [
        f"process.roles={','.join(node.roles)}",
        f"node.id={node.node_id}",
        f"controller.quorum.voters={voters}",
        f"listeners={','.join(listeners)}",
        "controller.listener.names=CONTROLLER",
        f"listener.security.protocol.map=CONTROLLER:PLAINTEXT,{protocols or f'{proto}:{proto}'}",
        f"log.dirs={node.data_dir / 'logs'}",
    ]
    if node.is_broker:
        advertised = {**clients, proto: options.advertised_port or node.port}
        lines += [
            "advertised.listeners="
            + ",".join(f"{listener}://127.0.0.1:{port}" for listener, port in advertised.items()),
            f"inter.broker.listener.name={proto}",
            f"offsets.topic.replication.factor={replication}",
            f"transaction.state.log.replication.factor={replication}",
            "transaction.state.log.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
        ]
    if node.is_controller:
        # In KRaft the controller decides a new topic's defaults (the apply lock's).
        lines.append(f"default.replication.factor={replication}")
    if options.scram_users:
        admin, password = next(iter(options.scram_users.items()))
        jaas = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{admin}" password="{password}";'
        )
        lines += [
            f"sasl.enabled.mechanisms={SCRAM_MECHANISM}",
            f"sasl.mechanism.inter.broker.protocol={SCRAM_MECHANISM}",
            *(
                f"listener.name.{listener.lower()}.{SCRAM_MECHANISM.lower()}.sasl.jaas.config={jaas}"
                for listener in clients or {proto: None}
            ),
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # ANONYMOUS: the node registers over the PLAINTEXT controller listener.
            f"super.users=User:{admin};User:ANONYMOUS",
        ]
    return "\n".join(lines) + "\n"


def _add_properties(properties: Path, extra: dict[str, str]) -> None:
    """Append ``extra`` to ``properties`` (:attr:`BrokerOptions.extra_properties`).

    Raises:
        SandboxError: a name or value holding a line break (it would add
            lines of its own), or an empty name.
    """
    for name, value in extra.items():
        if not name.strip() or any(c in f"{name}{value}" for c in "\r\n"):
            raise SandboxError(
                f"extra broker property {name!r}={value!r}: names must be non-empty and "
                "neither may hold a line break"
            )
    if extra:
        with properties.open("a", encoding="utf-8") as fh:
            fh.writelines(f"{name}={value}\n" for name, value in extra.items())


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


def _client_security(options: BrokerOptions) -> dict[str, Any]:
    """kafka-python settings of the probes: SCRAM as the first (super) user."""
    if not options.scram_users:
        return {}
    user, password = next(iter(options.scram_users.items()))
    return {
        "security_protocol": options.security_protocol,
        "sasl_mechanism": SCRAM_MECHANISM,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }


def _free_ports(count: int) -> list[int]:
    """Return ``count`` distinct loopback ports that were free a moment ago."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


# -- processes ----------------------------------------------------------------


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


# -- state files --------------------------------------------------------------


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


# -- small helpers --------------------------------------------------------------


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
