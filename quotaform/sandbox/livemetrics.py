"""A bounded quota scenario on a SCRAM sandbox broker, for the live
Prometheus tests and ``scripts/prometheus_live.py``.

SCRAM users (so quota groups differ by user), quotas at several levels and
shapes, and real kafka-python clients (:mod:`quotaform.sandbox.load`) of
which some are throttled and some not. Everything goes to 127.0.0.1 and is
bounded in time, bytes and connection count.

The scenario (:data:`SCENARIO_QUOTAS`; ``producer_byte_rate`` has three
shapes, so the broker's tags follow the mixed rule):

=====================================  ==========================  ===================
entity                                 quota                       traffic
=====================================  ==========================  ===================
``{user=alice, client-id=alice-app}``  producer 256 KiB/s          unlimited: throttled
``{user=alice}``                       controller_mutation_rate 2  one 30-partition topic
``{user=bob}``                         producer 1 MiB/s,           produce 192 KiB/s (not
                                       consumer 256 KiB/s          throttled), fetch: throttled
``{client-id=<default>}``              producer 512 KiB/s,         carol-app 128 KiB/s (not
                                       request_percentage 400      throttled)
(nothing: the empty group)             —                           dave, client-id ``""``, 64 KiB/s
``{ip=127.0.0.1}``                     connection_creation_rate    bursts of raw connects:
                                       3/s                         some refused
=====================================  ==========================  ===================
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from quotaform.errors import SandboxError
from quotaform.sandbox.broker import SandboxBroker
from quotaform.sandbox.configcommand import run_config_command
from quotaform.sandbox.load import (
    LoadResult,
    check_loopback,
    client_processes,
    consume,
    produce,
    scram_settings,
)

__all__ = [
    "SCENARIO_QUOTAS",
    "SCENARIO_USERS",
    "KiB",
    "LoadRun",
    "command_config",
    "connection_burst",
    "prepare",
    "run_scenario_load",
    "set_quotas",
]

KiB = 1024
#: SCRAM users: the first is the broker's super user.
SCENARIO_USERS = {
    "admin": "admin-secret-41c7",
    "alice": "alice-secret-6b2e",
    "bob": "bob-secret-90fd",
    "carol": "carol-secret-1a58",
    "dave": "dave-secret-c3e0",
}
#: (kafka-configs entity arguments, quota settings), in the scenario's order.
SCENARIO_QUOTAS: tuple[tuple[tuple[str, ...], dict[str, float]], ...] = (
    (
        ("--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
         "--entity-name", "alice-app"),
        {"producer_byte_rate": 256 * KiB},
    ),
    (("--entity-type", "users", "--entity-name", "alice"), {"controller_mutation_rate": 2}),
    (
        ("--entity-type", "users", "--entity-name", "bob"),
        {"producer_byte_rate": 1024 * KiB, "consumer_byte_rate": 256 * KiB},
    ),
    (
        ("--entity-type", "clients", "--entity-default"),
        {"producer_byte_rate": 512 * KiB, "request_percentage": 400},
    ),
    (("--entity-type", "ips", "--entity-name", "127.0.0.1"), {"connection_creation_rate": 3}),
)  # fmt: skip
_TOPICS = ("alice", "bob", "carol", "dave", "fill")


def command_config(folder: Path, users: Mapping[str, str] = SCENARIO_USERS) -> Path:
    """Write the super user's client properties (for kafka-configs) into
    ``folder``, mode 0600, and return the path."""
    admin, password = next(iter(users.items()))
    path = folder / "admin.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{admin}" password="{password}";\n',
        encoding="utf-8",
    )
    path.chmod(0o600)
    return path


def prepare(
    broker: SandboxBroker,
    *,
    users: Mapping[str, str] = SCENARIO_USERS,
    fill_bytes: int = 16 * 1024 * KiB,
) -> None:
    """Create the scenario's topics (1 partition), let every user use every
    topic (ACL ``User:*`` ALL on topics), and fill topic ``fill`` with
    ``fill_bytes`` as the super user before any quota exists (unthrottled).

    Raises:
        SandboxError: a non-loopback broker.
    """
    from kafka import KafkaAdminClient
    from kafka.admin import (
        ACL,
        ACLOperation,
        ACLPermissionType,
        NewTopic,
        ResourcePattern,
        ResourceType,
    )

    check_loopback(broker.bootstrap)
    admin_user, password = next(iter(users.items()))
    security = scram_settings(admin_user, password)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, **security)
    try:
        admin.create_topics([NewTopic(name, 1, 1) for name in _TOPICS])
        admin.create_acls(
            [
                ACL(
                    "User:*",
                    "*",
                    ACLOperation.ALL,
                    ACLPermissionType.ALLOW,
                    ResourcePattern(ResourceType.TOPIC, "*"),
                )
            ]
        )
    finally:
        admin.close()
    produce(
        broker.bootstrap,
        "fill",
        client_id="admin-fill",
        seconds=60,
        max_bytes=fill_bytes,
        security=security,
    )


def set_quotas(
    broker: SandboxBroker,
    config: Path,
    quotas: Sequence[tuple[Sequence[str], Mapping[str, float]]] = SCENARIO_QUOTAS,
    *,
    run: Callable[..., subprocess.CompletedProcess[str]] = run_config_command,
) -> None:
    """Set ``quotas`` with Kafka's own kafka-configs (``config``: the super
    user's client properties, :func:`command_config`), one entity after the
    other. ``run``: what runs kafka-configs, taking and returning what
    :func:`run_config_command` does (a test's ConfigCommand kept warm in one JVM).

    Raises:
        SandboxError: kafka-configs failed.
    """
    for entity, values in quotas:
        # whole values in full: "{:g}" would send 1048576 as 1.04858e+06 (= 1048580)
        settings = ",".join(
            f"{key}={int(value) if float(value).is_integer() else value}"
            for key, value in values.items()
        )
        proc = run(
            ["--command-config", str(config), "--alter", *entity, "--add-config", settings],
            bootstrap=broker.bootstrap,
            version=broker.version,
        )
        if proc.returncode != 0:
            raise SandboxError(f"kafka-configs {' '.join(entity)} failed: {proc.stderr[-500:]}")


def connection_burst(port: int, count: int = 60, *, source: str | None = None) -> int:
    """Open ``count`` TCP connections to 127.0.0.1:``port`` at once, then close
    them (the broker counts accepted connections per ip; beyond an ip quota
    it refuses them). ``source``: the loopback address to connect from
    (``127.0.0.2``: Linux routes all of 127.0.0.0/8 to the loopback device,
    so the broker sees another client ip). Returns how many connects
    succeeded at the TCP level.

    Raises:
        SandboxError: ``source`` is not a loopback address.
    """
    if source is not None:
        check_loopback(f"{source}:0")
    bind = (source, 0) if source is not None else None
    opened = []
    try:
        for _ in range(min(count, 200)):
            try:
                opened.append(
                    socket.create_connection(("127.0.0.1", port), timeout=2, source_address=bind)
                )
            except OSError:
                continue
        return len(opened)
    finally:
        for sock in opened:
            sock.close()


#: Seconds the scenario's clients get to connect before the first connection burst.
BOOTSTRAP_S = 2.0


@dataclass
class LoadRun:
    """What :func:`run_scenario_load` did.

    Attributes:
        started, ended: unix seconds of the load window.
        results: client name -> what it moved.
        bursts: unix seconds -> connects made in that burst.
        topic_created: unix seconds of alice's 30-partition CreateTopics,
            ``None`` if it failed (``errors`` says why).
        errors: client name -> the error that ended it.
    """

    started: float = 0.0
    ended: float = 0.0
    results: dict[str, LoadResult] = field(default_factory=dict)
    bursts: dict[float, int] = field(default_factory=dict)
    topic_created: float | None = None
    errors: dict[str, str] = field(default_factory=dict)


def run_scenario_load(
    broker: SandboxBroker,
    *,
    seconds: float,
    users: Mapping[str, str] = SCENARIO_USERS,
    every: Callable[[], Any] | None = None,
    every_s: float = 10.0,
) -> LoadRun:
    """Drive the scenario's clients for ``seconds`` (at most 300): alice
    unlimited as ``alice-app``, bob 192 KiB/s plus a consumer of ``fill``,
    carol 128 KiB/s as ``carol-app``, dave 64 KiB/s with an empty client id;
    a 60-connection burst once they connected (after :data:`BOOTSTRAP_S`) and
    in the middle; alice creates a
    30-partition topic after 5 s. ``every`` is called every ``every_s``
    seconds meanwhile (e.g. a JmxTool read). (Over 80 lines: the
    scenario's timeline in one place, each client and burst at its second.)

    Raises:
        SandboxError: ``seconds`` out of range or a non-loopback broker.
    """
    if not 0 < seconds <= 300:
        raise SandboxError(f"scenario load of {seconds} s: expected 0 < seconds <= 300")
    check_loopback(broker.bootstrap)
    run = LoadRun()
    bootstrap = broker.bootstrap

    def sec(user: str) -> dict[str, Any]:
        return scram_settings(user, users[user])

    clients: dict[str, Callable[[], LoadResult]] = {
        "alice/alice-app produce": partial(
            produce, bootstrap, "alice", client_id="alice-app", seconds=seconds,
            max_bytes=64 * 1024 * KiB, security=sec("alice"),
        ),
        "bob/bob-app produce": partial(
            produce, bootstrap, "bob", client_id="bob-app", seconds=seconds, rate=192 * KiB,
            security=sec("bob"),
        ),
        "bob/bob-reader consume": partial(
            consume, bootstrap, "fill", client_id="bob-reader", seconds=seconds,
            max_bytes=64 * 1024 * KiB, security=sec("bob"),
        ),
        "carol/carol-app produce": partial(
            produce, bootstrap, "carol", client_id="carol-app", seconds=seconds, rate=128 * KiB,
            security=sec("carol"),
        ),
        "dave/'' produce": partial(
            produce, bootstrap, "dave", client_id="", seconds=seconds, rate=64 * KiB,
            security=sec("dave"),
        ),
    }  # fmt: skip
    run.started = time.time()
    # each client its own process: on threads they share one GIL, and a paced
    # producer held back by the consumer's parsing bursts to catch up
    with client_processes(clients) as futures:
        # the clients bootstrap first: behind the burst's 60 connections the
        # scenario's own ip quota (3/s) would hold theirs past kafka-python's
        # bootstrap timeout
        time.sleep(BOOTSTRAP_S)
        run.bursts[time.time()] = connection_burst(broker.port)
        start = time.monotonic()
        burst_done = created = False
        next_call = start
        while not all(f.done() for f in futures.values()) and (
            time.monotonic() - start < seconds + 90
        ):
            now = time.monotonic()
            if not created and now - start >= 5:
                created = True
                _create_topic_as(broker, "alice", users["alice"], run)
            if not burst_done and now - start >= seconds / 2:
                burst_done = True
                run.bursts[time.time()] = connection_burst(broker.port)
            if every is not None and now >= next_call:
                next_call = now + every_s
                every()
            time.sleep(0.5)
    for name, future in futures.items():
        if not future.done():
            run.errors[name] = f"still running {seconds + 90:.0f} s after the start: stopped"
        elif (exc := future.exception()) is not None:  # a client's failure is reported
            run.errors[name] = f"{type(exc).__name__}: {exc}"
        else:
            run.results[name] = future.result()
    run.ended = time.time()
    return run


def _create_topic_as(broker: SandboxBroker, user: str, password: str, run: LoadRun) -> None:
    """Alice's 30-partition CreateTopics. The connection may be refused by the
    scenario's own ip quota (3 connections/s, bursts of 60): it is tried
    again, three times at most, a second or more apart."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import KafkaConnectionError
    from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_fixed

    def create() -> None:
        admin = KafkaAdminClient(
            bootstrap_servers=broker.bootstrap, **scram_settings(user, password)
        )
        try:
            admin.create_topics([NewTopic(f"{user}-many", 30, 1)])
        finally:
            admin.close()

    try:
        for attempt in Retrying(
            retry=retry_if_exception_type(KafkaConnectionError),
            stop=stop_after_attempt(3),
            wait=wait_fixed(1.5),
            reraise=True,
        ):
            with attempt:
                create()
        run.topic_created = time.time()
    except Exception as exc:
        run.errors[f"{user} CreateTopics"] = f"{type(exc).__name__}: {exc}"
