"""A local Spark standalone cluster and a Spark Connect server, from the pip
``pyspark`` package itself, for trying ``quotaform analyze --master`` and
``--remote`` and for tests.

Nothing beyond ``pip install pyspark`` and Java 17+ is needed: the package's
``bin/spark-class`` runs the standalone Master and Workers, and its
``bin/spark-submit`` the Spark Connect server (``jars/spark-connect_*.jar``).
Every process binds 127.0.0.1 only, on free ports, with small heaps, runs in
its own process group, and logs into a state directory. A state file
``<cache>/spark/<name>.json`` names the process groups, so :func:`stop_spark`
works from another process and sessions that died without stopping theirs
are cleaned up by :func:`stop_orphans`.

This module never imports pyspark (the package is found on ``sys.path``).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quotaform.errors import InputError, SandboxError
from quotaform.inputs.jsondoc import load_json
from quotaform.inputs.limits import LIMITS
from quotaform.sandbox.jars import cache_root, find_java
from quotaform.sandbox.processes import (
    CHILDREN,
    KILL_WAIT_S,
    check_name,
    cmdline,
    free_port,
    group_members,
    is_alive,
    log_tail,
    port_open,
    reap,
    spawn_group,
    terminate_group,
    wait_for,
)

__all__ = [
    "SparkCluster",
    "SparkConnectServer",
    "spark_home",
    "spark_state_dir",
    "start_cluster",
    "start_connect_server",
    "stop_orphans",
    "stop_spark",
]

log = logging.getLogger(__name__)

#: Environment variables of the caller that would steer the launched Spark
#: elsewhere: ``MASTER`` is spark-submit's master, ``SPARK_REMOTE`` makes
#: PySpark a Connect client, the rest point at another installation or
#: configuration.
_UNINHERITED = (
    "MASTER",
    "SPARK_REMOTE",
    "SPARK_CONNECT_MODE_ENABLED",
    "SPARK_LOCAL_REMOTE",
    "SPARK_API_MODE",
    "SPARK_CONF_DIR",
    "SPARK_MASTER",
    "PYSPARK_SUBMIT_ARGS",
    "PYSPARK_GATEWAY_PORT",
    "PYSPARK_GATEWAY_SECRET",
    "SPARK_CONNECT_AUTHENTICATE_TOKEN",
)
#: The daemons (master, workers) and spark-class's launcher only coordinate:
#: the C1 compiler and the serial collector start them in about half the time
#: (the same flags as the Kafka sandbox's tools). Executors and drivers take
#: the application's own options.
_DAEMON_JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
_REGISTERED = "Successfully registered with master"
_MASTER_UP = re.compile(r"Starting Spark master at spark://")
_POLL_S = 0.2


@dataclass(frozen=True, slots=True)
class SparkCluster:
    """A running standalone cluster.

    Attributes:
        name: its name (the state file is ``<state_dir>/<name>.json``).
        master_url: ``spark://127.0.0.1:PORT``, for ``--master``.
        pgids: the process groups (master first, then each worker); each
            group's leader is the daemon's JVM, its executors and their
            Python workers are in the same group.
        workdir: logs (``master.log``, ``worker-N.log``) and the workers'
            work directories; removed by :func:`stop_spark`.
    """

    name: str
    master_url: str
    pgids: tuple[int, ...]
    workdir: Path


@dataclass(frozen=True, slots=True)
class SparkConnectServer:
    """A running Spark Connect server.

    Attributes:
        name: its name (the state file is ``<state_dir>/<name>.json``).
        remote: ``sc://127.0.0.1:PORT``, for ``--remote`` / ``SPARK_REMOTE``.
        port: the gRPC port on 127.0.0.1.
        pgids: the server's process group (one).
        workdir: the log (``connect.log``); removed by :func:`stop_spark`.
    """

    name: str
    remote: str
    port: int
    pgids: tuple[int, ...]
    workdir: Path


def spark_home() -> Path:
    """The installed ``pyspark`` package folder, which is a full ``SPARK_HOME``
    (``bin/spark-class``, ``bin/spark-submit``, ``jars/``).

    Raises:
        SandboxError: pyspark is not installed, or is the thin client
            (``pyspark-client`` has no ``bin/`` and no jars).
    """
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise SandboxError(
            "pyspark is not installed: pip install 'quotaform[spark]' (the full package, "
            "not pyspark-client) to start Spark locally"
        )
    home = Path(spec.origin).parent
    if not (home / "bin" / "spark-class").is_file():
        raise SandboxError(
            f"{home} has no bin/spark-class: this is the Spark Connect thin client "
            "(pyspark-client); starting Spark needs the full pyspark package"
        )
    return home


def spark_state_dir() -> Path:
    """``<cache>/spark``, where the state files live by default."""
    return cache_root() / "spark"


def start_cluster(
    name: str,
    *,
    workers: int = 1,
    cores: int = 1,
    memory: str = "1g",
    daemon_memory: str = "256m",
    timeout_s: float = 90.0,
    state_dir: Path | None = None,
) -> SparkCluster:
    """Start a standalone Master and ``workers`` Workers on 127.0.0.1 and
    return once every worker has registered with the master.

    Args:
        name: the cluster's name (letters, digits, ``._-``); a running
            cluster of that name is stopped first.
        workers: how many Worker daemons.
        cores, memory: what each worker offers executors (``memory`` in
            Spark's notation: ``512m``, ``1g``).
        daemon_memory: the heap of each daemon JVM (``SPARK_DAEMON_MEMORY``).
        timeout_s: seconds allowed for the whole start.
        state_dir: where the state file lives (default :func:`spark_state_dir`).

    Raises:
        SandboxError: no Java 17+, no full pyspark, a daemon exited or did
            not get ready in time (the message carries its log's tail).
            Whatever started is stopped again.
    """
    states, home, java, workdir = _fresh(name, state_dir)
    env = _environment(home, java, workdir, extra={"SPARK_DAEMON_MEMORY": daemon_memory})
    deadline = time.monotonic() + timeout_s
    pgids: list[int] = []
    try:
        port = free_port()
        master_log = workdir / "master.log"
        pgids.append(
            spawn_group(
                [str(home / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master",
                 "--host", "127.0.0.1", "--port", str(port), "--webui-port", "0"],
                env, master_log,
            )
        )  # fmt: skip
        _save(states, name, {"kind": "cluster", "pgids": pgids, "workdir": str(workdir)})
        wait_for(
            lambda: port_open(port) and bool(_MASTER_UP.search(_read(master_log))),
            pgids[0], master_log, deadline, "the Spark master",
        )  # fmt: skip
        url = f"spark://127.0.0.1:{port}"
        logs = []
        for number in range(1, workers + 1):
            worker_log = workdir / f"worker-{number}.log"
            work = workdir / f"work-{number}"
            work.mkdir()
            pgids.append(
                spawn_group(
                    [str(home / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker",
                     "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                     "--webui-port", "0", "--work-dir", str(work), url],
                    env, worker_log,
                )
            )  # fmt: skip
            logs.append(worker_log)
            _save(states, name, {"kind": "cluster", "pgids": pgids, "workdir": str(workdir)})
        for pgid, worker_log in zip(pgids[1:], logs, strict=True):
            wait_for(
                functools.partial(_registered, worker_log),
                pgid, worker_log, deadline, f"the Spark worker ({worker_log.name})",
            )  # fmt: skip
        record = {
            "kind": "cluster",
            "master_url": url,
            "pgids": pgids,
            "workdir": str(workdir),
        }
        _save(states, name, record)
        return SparkCluster(name, url, tuple(pgids), workdir)
    except BaseException:
        stop_spark(name, state_dir=states)
        raise


def start_connect_server(
    name: str,
    *,
    master: str = "local[2]",
    driver_memory: str = "768m",
    token: str | None = None,
    conf: Mapping[str, str] | None = None,
    timeout_s: float = 120.0,
    state_dir: Path | None = None,
) -> SparkConnectServer:
    """Start a Spark Connect server (``SparkConnectServer`` through
    ``spark-submit``, in the foreground of its own process group) on
    127.0.0.1 and return once its gRPC port accepts connections. (Over 80
    lines: a quarter of them this description; the code stops a server of
    that name, starts this one and waits for its port, in that order.)

    Args:
        name: the server's name (letters, digits, ``._-``); a running one
            of that name is stopped first.
        master: the server's own Spark master.
        driver_memory: the server JVM's heap (Spark notation).
        token: if given, clients must present it (Spark Connect's pre-shared
            token, ``spark.connect.authenticate.token``). It is passed in the
            server's environment, never on its command line.
        conf: more ``--conf`` settings.
        timeout_s: seconds allowed for the start.
        state_dir: where the state file lives (default :func:`spark_state_dir`).

    Raises:
        SandboxError: no Java 17+, no full pyspark, the server exited or did
            not listen in time (the message carries its log's tail). A
            half-started server is stopped again.
    """
    states, home, java, workdir = _fresh(name, state_dir)
    extra = {} if token is None else {"SPARK_CONNECT_AUTHENTICATE_TOKEN": token}
    env = _environment(home, java, workdir, extra=extra)
    port = free_port()
    settings = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        **(conf or {}),
    }
    command = [
        str(home / "bin" / "spark-submit"),
        "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--name", f"quotaform Spark Connect {name}",
        "--master", master,
        "--driver-memory", driver_memory,
        *[a for k, v in sorted(settings.items()) for a in ("--conf", f"{k}={v}")],
    ]  # fmt: skip
    server_log = workdir / "connect.log"
    pgids: list[int] = []
    try:
        pgids.append(spawn_group(command, env, server_log))
        _save(states, name, {"kind": "connect", "pgids": pgids, "workdir": str(workdir)})
        deadline = time.monotonic() + timeout_s
        # The port alone is not proof: another process may have taken it
        # between free_port() and the server's bind (brokers start beside
        # it in the tests); the server says where it listens.
        started = f"Spark Connect server started at: 127.0.0.1:{port}"
        wait_for(
            lambda: port_open(port) and started in log_tail(server_log, 100_000),
            pgids[0],
            server_log,
            deadline,
            "Spark Connect",
        )
        remote = f"sc://127.0.0.1:{port}"
        _save(
            states,
            name,
            {
                "kind": "connect",
                "remote": remote,
                "port": port,
                "pgids": pgids,
                "workdir": str(workdir),
            },
        )
        return SparkConnectServer(name, remote, port, tuple(pgids), workdir)
    except BaseException:
        stop_spark(name, state_dir=states)
        raise


def stop_spark(name: str, *, state_dir: Path | None = None, timeout_s: float = 15.0) -> bool:
    """Stop what :func:`start_cluster` or :func:`start_connect_server` started
    under ``name``: SIGTERM to each process group (workers before the
    master), SIGKILL after ``timeout_s``; then remove the work directory
    and the state file. A group whose leader no longer runs from that work
    directory is never signalled (the pid was reused).

    Returns:
        True if there was a state file for ``name``.

    Raises:
        SandboxError: a process group survived SIGKILL.
    """
    states = state_dir or spark_state_dir()
    path = states / f"{name}.json"
    if not path.exists():
        return False
    try:
        record, _ = load_json(path, LIMITS["state"])
        if not isinstance(record, dict):
            raise ValueError("not a JSON object")
    except (InputError, ValueError) as exc:
        log.warning("removing unreadable Spark state %s: %s", path, exc)
        path.unlink(missing_ok=True)
        return True
    workdir = str(record.get("workdir", ""))
    for pgid in reversed([int(p) for p in record.get("pgids", [])]):
        if pgid in CHILDREN or (workdir and workdir in (cmdline(pgid) or "")):
            terminate_group(pgid, timeout_s)
        else:
            _signal_group_if_ours(pgid, workdir)
    if workdir.startswith(tempfile.gettempdir()) and "quotaform-spark-" in workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    path.unlink(missing_ok=True)
    return True


def stop_orphans(prefix: str, *, state_dir: Path | None = None) -> list[str]:
    """Stop the Spark processes of dead owners: every ``<prefix>*-<pid>``
    state whose trailing pid no longer runs (a pytest session killed
    before its teardown).

    Returns:
        The names stopped, sorted.
    """
    states = state_dir or spark_state_dir()
    stopped = []
    for path in sorted(states.glob(f"{prefix}*.json")):
        owner = path.stem.rsplit("-", 1)[-1]
        if owner.isdigit() and not is_alive(int(owner)):
            stop_spark(path.stem, state_dir=states)
            stopped.append(path.stem)
    return stopped


# -- processes ----------------------------------------------------------------


def _fresh(name: str, state_dir: Path | None) -> tuple[Path, Path, str, Path]:
    """Checks and a clean slate before a start: the name checked, a running
    sandbox of that name stopped; returns (state dir, SPARK_HOME, the java
    executable, a new work directory).

    Raises:
        SandboxError: a bad name, no full pyspark, no Java 17+.
    """
    check_name(name, "Spark sandbox")
    states = state_dir or spark_state_dir()
    stop_spark(name, state_dir=states)
    home = spark_home()
    java = find_java()
    return states, home, java, Path(tempfile.mkdtemp(prefix=f"quotaform-spark-{name}-"))


def _environment(
    home: Path, java: str, workdir: Path, *, extra: Mapping[str, str]
) -> dict[str, str]:
    """The daemons' environment: the caller's, without what would steer
    Spark elsewhere, pinned to loopback, this interpreter and this Java."""
    env = {k: v for k, v in os.environ.items() if k not in _UNINHERITED}
    env.update(
        SPARK_HOME=str(home),
        JAVA_HOME=str(Path(java).resolve().parent.parent),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_HOSTNAME="127.0.0.1",
        SPARK_LOG_DIR=str(workdir),
        SPARK_PID_DIR=str(workdir),
        SPARK_LOCAL_DIRS=str(workdir),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_NO_DAEMONIZE="1",
        # The work directory on every JVM's command line: stop_spark checks it
        # before signalling a recorded pid.
        SPARK_DAEMON_JAVA_OPTS=f"-Dquotaform.spark.workdir={workdir} {_DAEMON_JVM_OPTIONS}",
        SPARK_SUBMIT_OPTS=f"-Dquotaform.spark.workdir={workdir}",
        SPARK_LAUNCHER_OPTS=_DAEMON_JVM_OPTIONS,
    )
    env.update(extra)
    return env


def _signal_group_if_ours(pgid: int, workdir: str) -> None:
    """The leader is gone (or is another program now): kill what is left of
    the group only if one of its members still runs from ``workdir``
    (an executor outliving its worker)."""
    if not workdir:
        return
    members = [pid for pid in group_members(pgid) if workdir in (cmdline(pid) or "")]
    if members:
        terminate_group(pgid, KILL_WAIT_S)
    reap(pgid)


# -- state and logs -------------------------------------------------------------


def _save(states: Path, name: str, record: dict[str, Any]) -> None:
    states.mkdir(parents=True, exist_ok=True)
    path = states / f"{name}.json"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _registered(worker_log: Path) -> bool:
    return _REGISTERED in _read(worker_log)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
