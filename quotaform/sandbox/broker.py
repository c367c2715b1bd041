"""Start, find and stop a single-node KRaft Kafka broker for local use and tests.

Each sandbox has a *name*; its state lives in ``<state_dir>/<name>.json`` (default
``<cache>/sandboxes``) so ``status`` and ``down`` work from another process. The
broker runs in its own session, so it outlives the process that started it, with
its data, ``server.properties`` and ``broker.log`` in a fresh temporary directory
that ``stop_broker`` removes.

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
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from quotaform.errors import SandboxError
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

__all__ = [
    "DEFAULT_SANDBOX_NAME",
    "BrokerOptions",
    "SandboxBroker",
    "SandboxState",
    "SandboxStatus",
    "broker_status",
    "default_state_dir",
    "kill_broker",
    "new_cluster_id",
    "resume_broker",
    "start_broker",
    "stop_broker",
]

log = logging.getLogger(__name__)

DEFAULT_SANDBOX_NAME = "default"

#: Serial GC and the C1-only JIT start the broker ~1 s faster (measured: 4.2 s ->
#: 3.2 s to first answer) and a sandbox never needs peak throughput. CDS messages
#: are silenced: a missing or stale archive just means an unshared start.
_BROKER_JVM_OPTIONS = ("-Xms256m", "-Xmx1g", *FAST_START_JVM_OPTIONS, "-Djava.awt.headless=true")
#: The broker maps in the archive StorageTool recorded while formatting: they share
#: most classes (Scala, Kafka core, log4j), worth ~0.6 s of broker start-up.
_SHARED_CLASSES_FROM = "kafka.tools.StorageTool"

_PORT_ATTEMPTS = 3
_POLL_INTERVAL_S = 0.2
_PROBE_TIMEOUT_MS = 5000


@dataclass(frozen=True, slots=True)
class BrokerOptions:
    """How a sandbox broker is set up beyond the defaults (for tests and demos).

    Attributes:
        port: the client listener's port; ``None``: a free loopback port.
        advertised_port: the port clients are told to use after bootstrap
            (a proxy in front of the broker); ``None``: ``port``.
        scram_users: ``{name: password}``: the client listener becomes
            SASL_PLAINTEXT with SCRAM-SHA-512 users, and the StandardAuthorizer
            is on; the first user is a super user, the others have no ACLs.
            The KRaft controller listener stays PLAINTEXT on loopback (its
            ``ANONYMOUS`` principal is a super user so the node can register).
        jmx_port: a loopback JMX/RMI port for Kafka's metrics (``JmxTool``,
            :mod:`quotaform.sandbox.jmx`); ``0``: a free one; ``None``: no JMX.
        prometheus_rules: a Prometheus JMX exporter config file (``rules:``,
            ``lowercaseOutputName``, ...): the broker runs the exporter's java
            agent (``io.prometheus.jmx:jmx_prometheus_javaagent``) with it, serving
            ``http://127.0.0.1:PORT/metrics``. The file is copied into the
            broker's data dir. ``None``: no exporter.
        prometheus_port: the agent's loopback HTTP port; ``0`` or ``None``: a
            free one (only used with ``prometheus_rules``).
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
class SandboxBroker:
    """A sandbox broker process and where to reach it.

    Attributes:
        name: sandbox name, e.g. ``"default"`` (also the state file's stem).
        version: Kafka release it runs, e.g. ``"4.3.1"``.
        bootstrap: ``"127.0.0.1:PORT"``, the PLAINTEXT listener.
        port: PLAINTEXT listener port.
        controller_port: KRaft CONTROLLER listener port.
        pid: process id of the ``java ... kafka.Kafka`` process.
        data_dir: temporary directory with ``server.properties``, ``broker.log``
            and ``logs/`` (the Kafka log dir); removed by :func:`stop_broker`.
        log_path: the broker's stdout and stderr (``<data_dir>/broker.log``).
        cluster_id: the KRaft cluster id it was formatted with (22-char base64).
        security_protocol: of the client listener (``PLAINTEXT`` or
            ``SASL_PLAINTEXT``, see :class:`BrokerOptions`).
        advertised_port: the port clients are told to use after bootstrap,
            when it differs from ``port`` (a proxy); else ``None``.
        jmx_port: the loopback JMX port, ``None`` without JMX.
        prometheus_port: the JMX exporter agent's loopback HTTP port (scrape
            ``http://127.0.0.1:PORT/metrics``), ``None`` without the agent.
        prometheus_config: the agent's config file (a copy in ``data_dir``),
            ``None`` without the agent.
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

    def to_json(self) -> dict[str, Any]:
        """Return the JSON-ready state record (paths as strings)."""
        record = asdict(self)
        record["data_dir"] = str(self.data_dir)
        record["log_path"] = str(self.log_path)
        if self.prometheus_config is not None:
            record["prometheus_config"] = str(self.prometheus_config)
        return record

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> SandboxBroker:
        """Rebuild a broker from :meth:`to_json` output.

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
        )


class SandboxState(enum.Enum):
    """What :func:`broker_status` found."""

    RUNNING = "running"
    """The process is alive and answers Kafka requests."""
    UNRESPONSIVE = "unresponsive"
    """The process is alive but did not answer (still starting, or hung)."""
    STOPPED = "stopped"
    """No sandbox process of that name; any stale state was removed."""


@dataclass(frozen=True, slots=True)
class SandboxStatus:
    """A sandbox's state; ``broker`` is ``None`` exactly when ``state`` is STOPPED."""

    name: str
    state: SandboxState
    broker: SandboxBroker | None


class _PortClash(Exception):
    """The broker died because a port we picked was taken meanwhile (retryable)."""


# Brokers started by this process, so we can reap them (no zombies) when stopping.


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
) -> SandboxBroker:
    """Start sandbox ``name`` and return once it answers Kafka requests.

    Idempotent: if ``name`` is already running (and answers within
    ``timeout_s``) the existing broker is returned. State left by a dead broker
    is cleaned up first.

    Args:
        version: Kafka release; jars are fetched into the cache on first use.
        name: sandbox name (letters, digits, ``._-``; at most 64 characters).
        state_dir: where state files live; ``None`` means :func:`default_state_dir`.
        on_progress: called with one human-readable line per step.
        timeout_s: seconds allowed for format, start and first answer (the jar
            download on a cold cache is not counted).
        options: ports, SCRAM users, JMX (:class:`BrokerOptions`); ``None``:
            a PLAINTEXT broker on free ports.

    Raises:
        SandboxError: Java or Maven missing, jar fetch failed, the broker exited
            or did not answer in time (message carries the ``broker.log`` tail),
            or ``name`` already runs a different Kafka version.
    """
    check_name(name)
    states = state_dir or default_state_dir()
    with _state_lock(states, name):
        existing = _load_state(states, name)
        if existing is not None:
            if _is_our_broker(existing):
                if existing.version != version:
                    raise SandboxError(
                        f"Sandbox {name!r} already runs Kafka {existing.version} on "
                        f"{existing.bootstrap}; stop it first (quotaform sandbox down "
                        f"--name {name}) to start Kafka {version}."
                    )
                _progress(on_progress, f"Sandbox {name!r} already running (pid {existing.pid})")
                _wait_ready(existing, time.monotonic() + timeout_s, on_progress)
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
                    options or BrokerOptions(),
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
    """Stop sandbox ``name``, remove its data directory and state file.

    Sends SIGTERM, waits up to ``timeout_s`` seconds, then SIGKILL. A pid that
    no longer belongs to this sandbox's ``kafka.Kafka`` process is never signalled.

    Returns:
        The broker that was recorded, or ``None`` if ``name`` had no state.

    Raises:
        SandboxError: the process survived SIGKILL, or the state file is unreadable.
    """
    check_name(name)
    states = state_dir or default_state_dir()
    with _state_lock(states, name):
        broker = _load_state(states, name)
        if broker is None:
            return None
        if _is_our_broker(broker):
            _terminate(broker.pid, timeout_s)
        _discard(broker, states)
        return broker


def broker_status(
    *,
    name: str = DEFAULT_SANDBOX_NAME,
    state_dir: Path | None = None,
    probe_timeout_s: float = 5.0,
) -> SandboxStatus:
    """Report whether sandbox ``name`` runs and answers; clean up stale state.

    Raises:
        SandboxError: the state file is unreadable.
    """
    check_name(name)
    states = state_dir or default_state_dir()
    broker = _load_state(states, name)
    if broker is None:
        return SandboxStatus(name, SandboxState.STOPPED, None)
    if not _is_our_broker(broker):
        with _state_lock(states, name):
            again = _load_state(states, name)
            if again == broker:
                _discard(broker, states)
        return SandboxStatus(name, SandboxState.STOPPED, None)
    if broker.security_protocol != "PLAINTEXT":
        # No credentials here: a SASL sandbox that accepts connections runs.
        state = SandboxState.RUNNING if port_open(broker.port) else SandboxState.UNRESPONSIVE
        return SandboxStatus(name, state, broker)
    answered = _probe_cluster_id(broker.bootstrap, timeout_ms=int(probe_timeout_s * 1000))
    state = SandboxState.RUNNING if answered == broker.cluster_id else SandboxState.UNRESPONSIVE
    return SandboxStatus(name, state, broker)


def kill_broker(
    *, name: str = DEFAULT_SANDBOX_NAME, state_dir: Path | None = None
) -> SandboxBroker:
    """SIGKILL sandbox ``name``'s broker (a crash), keeping its data and state,
    so :func:`resume_broker` can restart it on the same log dir.

    Raises:
        SandboxError: ``name`` is not running.
    """
    states = state_dir or default_state_dir()
    with _state_lock(states, name):
        broker = _load_state(states, name)
        if broker is None or not _is_our_broker(broker):
            raise SandboxError(f"Sandbox {name!r} is not running")
        os.kill(broker.pid, signal.SIGKILL)
        _wait_exit(broker.pid, KILL_WAIT_S)
        CHILDREN.pop(broker.pid, None)
        return broker


def resume_broker(
    *,
    name: str = DEFAULT_SANDBOX_NAME,
    state_dir: Path | None = None,
    timeout_s: float = 90.0,
    options: BrokerOptions | None = None,
) -> SandboxBroker:
    """Start sandbox ``name`` again on its existing data dir (after
    :func:`kill_broker`), with the same ports, and return once it answers.

    Args:
        options: the options it was started with (SCRAM passwords are not
            kept in the state file; the probe needs them).

    Raises:
        SandboxError: no state for ``name``, it still runs, or it does not answer.
    """
    states = state_dir or default_state_dir()
    with _state_lock(states, name):
        old = _load_state(states, name)
        if old is None:
            raise SandboxError(f"Sandbox {name!r} has no state to resume")
        if _is_our_broker(old):
            raise SandboxError(f"Sandbox {name!r} still runs (pid {old.pid})")
        java = find_java()
        libs = ensure_kafka_jars(old.version)
        options = options or BrokerOptions()
        proc = _spawn(
            java,
            libs,
            old.data_dir,
            old.log_path,
            old.jmx_port,
            _agent(old),
            classpath=options.extra_classpath,
        )
        broker = replace(old, pid=proc.pid)
        _save_state(states, broker)
        _wait_ready(broker, time.monotonic() + timeout_s, None, options)
        return broker


# -- start-up -----------------------------------------------------------------


def _spawn(
    java: str,
    libs: Path,
    data_dir: Path,
    log_path: Path,
    jmx_port: int | None,
    agent: str | None = None,
    *,
    classpath: tuple[Path, ...] = (),
) -> subprocess.Popen[bytes]:
    """Start ``kafka.Kafka`` on ``data_dir/server.properties`` in its own session
    (``agent``: a ``-javaagent:...`` JVM option; ``classpath``: entries after
    Kafka's jars)."""
    jvm_options = list(_BROKER_JVM_OPTIONS)
    archive = class_data_archive(java, libs, _SHARED_CLASSES_FROM)
    if archive.is_file():
        jvm_options.append(f"-XX:SharedArchiveFile={archive}")
    if jmx_port is not None:
        jvm_options += _jmx_options(jmx_port)
    if agent is not None:
        jvm_options.append(agent)
    cmd = kafka_java_command(
        java,
        libs,
        "kafka.Kafka",
        [str(data_dir / "server.properties")],
        jvm_options=jvm_options,
        classpath=classpath,
    )
    log.info("starting %s", " ".join(cmd))
    with open(log_path, "ab") as log_file:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=data_dir,
            start_new_session=True,  # survives the CLI process and its Ctrl-C
            close_fds=True,
        )
    CHILDREN[proc.pid] = proc
    return proc


def _agent(broker: SandboxBroker) -> str | None:
    """The JMX exporter's ``-javaagent:JAR=127.0.0.1:PORT:CONFIG`` option, if any."""
    if broker.prometheus_port is None or broker.prometheus_config is None:
        return None
    jar = ensure_jmx_exporter() / f"jmx_prometheus_javaagent-{JMX_EXPORTER_VERSION}.jar"
    return f"-javaagent:{jar}=127.0.0.1:{broker.prometheus_port}:{broker.prometheus_config}"


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
) -> SandboxBroker:
    if options.port is not None:
        port, (controller_port,) = options.port, _free_ports(1)
    else:
        port, controller_port = _free_ports(2)
    if options.jmx_port == 0:
        options = replace(options, jmx_port=_free_ports(1)[0])
    prometheus_port = None
    if options.prometheus_rules is not None:
        if not options.prometheus_rules.is_file():
            raise SandboxError(f"JMX exporter config {options.prometheus_rules} is not a file")
        prometheus_port = options.prometheus_port or _free_ports(1)[0]
    data_dir = Path(tempfile.mkdtemp(prefix=f"quotaform-sandbox-{name}-"))
    broker: SandboxBroker | None = None
    try:
        properties = data_dir / "server.properties"
        properties.write_text(
            _server_properties(port, controller_port, data_dir, options), encoding="utf-8"
        )
        properties.chmod(0o600)  # may hold the SCRAM super user's password
        cluster_id = new_cluster_id()
        _progress(on_progress, f"Formatting KRaft storage (cluster id {cluster_id})")
        _format_storage(properties, cluster_id, version, deadline, options)
        # After the format: StorageTool loads every class the config names,
        # and a plug-in is only on the broker's classpath.
        _add_properties(properties, options.extra_properties or {})

        log_path = data_dir / "broker.log"
        exporter_config = None
        if options.prometheus_rules is not None:
            exporter_config = data_dir / "jmx-exporter.yaml"
            shutil.copyfile(options.prometheus_rules, exporter_config)
        unstarted = SandboxBroker(  # pid 0 is never signalled: only the started copy is
            name=name,
            version=version,
            bootstrap=f"127.0.0.1:{port}",
            port=port,
            controller_port=controller_port,
            data_dir=data_dir,
            log_path=log_path,
            cluster_id=cluster_id,
            security_protocol=options.security_protocol,
            advertised_port=options.advertised_port,
            jmx_port=options.jmx_port,
            prometheus_port=prometheus_port,
            prometheus_config=exporter_config,
            pid=0,
        )
        proc = _spawn(
            java,
            libs,
            data_dir,
            log_path,
            options.jmx_port,
            _agent(unstarted),
            classpath=options.extra_classpath,
        )
        broker = replace(unstarted, pid=proc.pid)
        _save_state(states, broker)
        _progress(
            on_progress,
            f"Started Kafka {version} (pid {proc.pid}); waiting for {broker.bootstrap}",
        )
        _wait_ready(broker, deadline, on_progress, options)
        return broker
    except BaseException:
        if broker is not None:
            if is_alive(broker.pid):
                _terminate(broker.pid, KILL_WAIT_S)
            _discard(broker, states)
        else:
            shutil.rmtree(data_dir, ignore_errors=True)
        raise


def _server_properties(
    port: int, controller_port: int, data_dir: Path, options: BrokerOptions
) -> str:
    proto = options.security_protocol
    advertised = options.advertised_port or port
    lines = [
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
        f"listeners={proto}://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        f"advertised.listeners={proto}://127.0.0.1:{advertised}",
        "controller.listener.names=CONTROLLER",
        f"inter.broker.listener.name={proto}",
        f"listener.security.protocol.map=CONTROLLER:PLAINTEXT,{proto}:{proto}",
        f"log.dirs={data_dir / 'logs'}",
        "offsets.topic.replication.factor=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "group.initial.rebalance.delay.ms=0",
    ]
    if options.scram_users:
        admin, password = next(iter(options.scram_users.items()))
        jaas = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{admin}" password="{password}";'
        )
        lines += [
            f"sasl.enabled.mechanisms={SCRAM_MECHANISM}",
            f"sasl.mechanism.inter.broker.protocol={SCRAM_MECHANISM}",
            f"listener.name.{proto.lower()}.{SCRAM_MECHANISM.lower()}.sasl.jaas.config={jaas}",
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
    properties: Path, cluster_id: str, version: str, deadline: float, options: BrokerOptions
) -> None:
    # No --standalone: it conflicts with controller.quorum.voters.
    scram = []
    for user, password in (options.scram_users or {}).items():
        scram += ["--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]"]
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


def _wait_ready(
    broker: SandboxBroker,
    deadline: float,
    on_progress: Callable[[str], None] | None,
    options: BrokerOptions | None = None,
) -> None:
    """Poll until ``broker`` answers DescribeCluster with its own cluster id."""
    while True:
        if not is_alive(broker.pid):
            tail = _log_tail(broker.log_path)
            if "Address already in use" in tail:
                raise _PortClash(tail.splitlines()[-1] if tail else "address in use")
            raise SandboxError(
                f"The sandbox broker (pid {broker.pid}) exited during start-up. "
                f"Last lines of its broker.log:\n{tail}"
            )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise SandboxError(
                f"The sandbox broker (pid {broker.pid}) did not answer on "
                f"{broker.bootstrap} in time; retry with a longer --timeout. "
                f"Last lines of its broker.log:\n{_log_tail(broker.log_path)}"
            )
        if port_open(broker.port):
            timeout_ms = max(min(int(remaining * 1000), _PROBE_TIMEOUT_MS), 500)
            answered = _probe_cluster_id(broker.bootstrap, timeout_ms=timeout_ms, options=options)
            if answered == broker.cluster_id:
                _progress(on_progress, f"Broker answers on {broker.bootstrap}")
                return
            if answered is not None:
                raise SandboxError(
                    f"{broker.bootstrap} is answered by cluster {answered}, not by sandbox "
                    f"{broker.name!r} (cluster {broker.cluster_id}); another broker took the "
                    f"port. Run quotaform sandbox down --name {broker.name} and retry."
                )
        time.sleep(_POLL_INTERVAL_S)


def _probe_cluster_id(
    bootstrap: str, *, timeout_ms: int, options: BrokerOptions | None = None
) -> str | None:
    """Return the cluster id ``bootstrap`` reports, or ``None`` if it does not answer."""
    from kafka import KafkaAdminClient  # slow import; only needed here

    security: dict[str, Any] = {}
    if options is not None and options.scram_users:
        user, password = next(iter(options.scram_users.items()))
        security = {
            "security_protocol": options.security_protocol,
            "sasl_mechanism": SCRAM_MECHANISM,
            "sasl_plain_username": user,
            "sasl_plain_password": password,
        }
    try:
        admin = KafkaAdminClient(
            bootstrap_servers=bootstrap,
            client_id="quotaform-sandbox-probe",
            request_timeout_ms=timeout_ms,
            bootstrap_timeout_ms=timeout_ms,
            **security,
        )
    except Exception as exc:  # any failure means "not answering yet"
        log.debug("probe of %s: %s", bootstrap, exc)
        return None
    try:
        cluster_id = admin.describe_cluster().get("cluster_id")
    except Exception as exc:
        log.debug("describe_cluster on %s: %s", bootstrap, exc)
        return None
    finally:
        admin.close()
    return str(cluster_id) if cluster_id else None


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


def _is_our_broker(broker: SandboxBroker) -> bool:
    """True if ``broker.pid`` is alive and still is this sandbox's ``kafka.Kafka``."""
    if not is_alive(broker.pid):
        return False
    command = cmdline(broker.pid) or ""
    return "kafka.Kafka" in command and str(broker.data_dir) in command


def _terminate(pid: int, timeout_s: float) -> None:
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, KILL_WAIT_S)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        if _wait_exit(pid, wait_s):
            CHILDREN.pop(pid, None)
            return
        log.warning("sandbox broker pid %d ignored %s", pid, sig.name)
    raise SandboxError(f"Sandbox broker pid {pid} survived SIGKILL; check it with ps.")


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
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SandboxError(f"Cannot read sandbox state {path}: {exc}") from exc
    try:
        return SandboxBroker.from_json(json.loads(text))
    except (ValueError, KeyError, TypeError) as exc:
        raise SandboxError(
            f"Sandbox state file {path} is unreadable ({exc}). If no sandbox broker "
            f"is running, delete the file; otherwise stop the java kafka.Kafka process "
            f"it belongs to first."
        ) from exc


def _save_state(states: Path, broker: SandboxBroker) -> None:
    path = _state_path(states, broker.name)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(broker.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _discard(broker: SandboxBroker, states: Path) -> None:
    """Remove ``broker``'s data directory and state file (process already gone)."""
    CHILDREN.pop(broker.pid, None)
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
