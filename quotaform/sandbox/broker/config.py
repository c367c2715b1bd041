"""A sandbox's layout and each node's ``server.properties``: ports, roles, heap, agents."""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import Any

from quotaform.errors import SandboxError
from quotaform.sandbox.broker.model import (
    _HEAP_BROKER,
    _HEAP_COMBINED,
    _HEAP_CONTROLLER,
    BROKER,
    CONTROLLER,
    CONTROLLER_ID_BASE,
    SCRAM_MECHANISM,
    BrokerOptions,
    SandboxBroker,
    SandboxNode,
)
from quotaform.sandbox.jars import (
    JMX_EXPORTER_VERSION,
    ensure_jmx_exporter,
)

log = logging.getLogger(__name__)


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
