"""What a sandbox is: its options, nodes, the running sandbox as recorded, its status."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from quotaform.errors import SandboxError
from quotaform.sandbox.jars import FAST_START_JVM_OPTIONS

__all__ = [
    "BROKER",
    "CONTROLLER_ID_BASE",
    "DEFAULT_SANDBOX_NAME",
    "SCRAM_MECHANISM",
    "BrokerOptions",
    "SandboxBroker",
    "SandboxNode",
    "SandboxState",
    "SandboxStatus",
]

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
