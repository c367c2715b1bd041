"""Start, find and stop a whole sandbox; kill and resume it (all its nodes at once)."""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from quotaform.errors import SandboxError
from quotaform.sandbox.broker.config import (
    _add_properties,
    _check_options,
    _check_same,
    _count,
    _layout,
    _sandbox_of,
    _server_properties,
)
from quotaform.sandbox.broker.model import (
    _CONTROLLER_GRACE_S,
    _MAX_REPLICATION,
    _PORT_ATTEMPTS,
    DEFAULT_SANDBOX_NAME,
    BrokerOptions,
    SandboxBroker,
    SandboxNode,
    SandboxState,
    SandboxStatus,
)
from quotaform.sandbox.broker.process import (
    _format_storage,
    _is_ours,
    _kill,
    _respawn,
    _spawn,
    _terminate,
)
from quotaform.sandbox.broker.readiness import _PortClash, _wait_ready
from quotaform.sandbox.broker.state import (
    _discard,
    _load_state,
    _progress,
    _save_state,
    _state_lock,
    default_state_dir,
    new_cluster_id,
)
from quotaform.sandbox.jars import (
    DEFAULT_KAFKA_VERSION,
    ensure_kafka_jars,
    find_java,
)
from quotaform.sandbox.processes import (
    KILL_WAIT_S,
    check_name,
    is_alive,
    port_open,
)
from quotaform.sandbox.quorum import describe_cluster

__all__ = [
    "broker_status",
    "kill_broker",
    "resume_broker",
    "start_broker",
    "stop_broker",
]

log = logging.getLogger(__name__)


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
    (Over 80 lines: half of them this description of what ``up`` promises.)

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
                existing = _restart_stopped(existing, running, states, on_progress, options)
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


def _restart_stopped(
    existing: SandboxBroker,
    running: list[SandboxNode],
    states: Path,
    on_progress: Callable[[str], None] | None,
    options: BrokerOptions,
) -> SandboxBroker:
    """The running sandbox ``existing`` with its nodes that are not
    ``running`` (killed or stopped) started again on their own log dirs."""
    name = existing.name
    stopped = [n for n in existing.nodes if n not in running]
    if not stopped:
        _progress(on_progress, f"Sandbox {name!r} already running (pid {existing.pid})")
        return existing
    _progress(
        on_progress,
        f"Sandbox {name!r} runs without {', '.join(n.label for n in stopped)}; restarting",
    )
    libs = ensure_kafka_jars(existing.version)
    return _respawn(
        find_java(), libs, existing, stopped, states, classpath=options.extra_classpath
    )


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
