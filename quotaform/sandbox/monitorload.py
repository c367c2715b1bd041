"""The live monitoring scenario: a quota group at every resolution level,
driven by real clients, for ``tests/integration/test_monitor_live.py`` and
``scripts/monitor_live.py``.

The quotas are ``examples/monitor/quotas.yaml`` (applied by the caller);
SCRAM users make the groups differ by user. Every client runs in its own
process (:func:`~quotaform.sandbox.load.client_processes`), bounded in time
and bytes; everything goes to 127.0.0.1 (the ip burst comes from 127.0.0.2,
another loopback address):

=====================  ==================  ========================  =====================
client                 key                 governing entry (level)   traffic
=====================  ==================  ========================  =====================
alice / alice-app      producer_byte_rate  {alice, alice-app} (1)    unlimited: throttled
bob / bob-app          producer_byte_rate  {bob, <default>} (2)      96 KiB/s of 1 MiB/s
carol / carol-app      producer_byte_rate  {carol} (3)               64 KiB/s of 512 KiB/s
dave / dave-app        producer_byte_rate  {<default>, dave-app} (4) 128 KiB/s of 384 KiB/s
erin / erin-app        producer_byte_rate  {<default>, <default>} (5)  1 KiB/s: idle
dave / (none)          producer_byte_rate  {<default>} (6)           32 KiB/s of 128 KiB/s
bob / reader-7         consumer_byte_rate  {reader-7} (7)            reads ``fill``: throttled
carol / reader-8       consumer_byte_rate  {<default>} (8)           follows ``carol``
dave / (none)          consumer_byte_rate  none: unlimited group     follows ``dave``
(127.0.0.1)            connection rate     {127.0.0.1} (ip 1)        every client's connects
(127.0.0.2)            connection rate     {<default>} (ip 2)        a burst of raw connects
=====================  ==================  ========================  =====================
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from quotaform.errors import SandboxError
from quotaform.sandbox.broker import SandboxBroker
from quotaform.sandbox.livemetrics import KiB, LoadRun, connection_burst
from quotaform.sandbox.load import (
    LoadResult,
    check_loopback,
    client_processes,
    consume,
    produce,
    scram_settings,
)

__all__ = [
    "MONITOR_CLIENTS",
    "MONITOR_USERS",
    "SECOND_IP",
    "Client",
    "run_monitor_load",
]

#: SCRAM users: the first is the broker's super user.
MONITOR_USERS = {
    "admin": "admin-secret-7d21",
    "alice": "alice-secret-52aa",
    "bob": "bob-secret-0be4",
    "carol": "carol-secret-9c13",
    "dave": "dave-secret-e671",
    "erin": "erin-secret-3f08",
}
#: The other loopback address the ip burst comes from ({ip=<default>}).
SECOND_IP = "127.0.0.2"
#: Connections of the ip burst.
BURST = 20


@dataclass(frozen=True, slots=True)
class Client:
    """One client of the scenario.

    Attributes:
        user, client_id: its principal (``""``: sends no client id).
        key: the quota key it uses.
        topic: the topic it produces to or reads.
        rate: bytes/s it produces at (``None``: as fast as allowed, or a consumer).
    """

    user: str
    client_id: str
    key: str
    topic: str
    rate: float | None = None

    @property
    def name(self) -> str:
        """``alice/alice-app producer_byte_rate``."""
        return f"{self.user}/{self.client_id or '(none)'} {self.key}"


#: The clients, in the table's order (module docstring).
MONITOR_CLIENTS: tuple[Client, ...] = (
    Client("alice", "alice-app", "producer_byte_rate", "alice"),
    Client("bob", "bob-app", "producer_byte_rate", "bob", 96 * KiB),
    Client("carol", "carol-app", "producer_byte_rate", "carol", 64 * KiB),
    Client("dave", "dave-app", "producer_byte_rate", "dave", 128 * KiB),
    Client("erin", "erin-app", "producer_byte_rate", "dave", 1 * KiB),
    Client("dave", "", "producer_byte_rate", "dave", 32 * KiB),
    Client("bob", "reader-7", "consumer_byte_rate", "fill"),
    Client("carol", "reader-8", "consumer_byte_rate", "carol"),
    Client("dave", "", "consumer_byte_rate", "dave"),
)


def _task(client: Client, bootstrap: str, seconds: float, users: Mapping[str, str]) -> Any:
    security = scram_settings(client.user, users[client.user])
    if client.key == "consumer_byte_rate":
        return partial(
            consume, bootstrap, client.topic, client_id=client.client_id, seconds=seconds,
            max_bytes=64 * 1024 * KiB, security=security,
        )  # fmt: skip
    return partial(
        produce, bootstrap, client.topic, client_id=client.client_id, seconds=seconds,
        max_bytes=64 * 1024 * KiB, rate=client.rate, security=security,
    )  # fmt: skip


def run_monitor_load(
    broker: SandboxBroker,
    *,
    seconds: float,
    users: Mapping[str, str] = MONITOR_USERS,
    every: Callable[[], Any] | None = None,
    every_s: float = 2.0,
    burst_after_s: float = 8.0,
) -> LoadRun:
    """Drive :data:`MONITOR_CLIENTS` for ``seconds`` (at most 300), each in
    its own process, with a burst of :data:`BURST` connections from
    :data:`SECOND_IP` ``burst_after_s`` in; ``every`` is called every
    ``every_s`` seconds meanwhile (e.g. to read Prometheus' alerts).

    Raises:
        SandboxError: ``seconds`` out of range or a non-loopback broker.
    """
    if not 0 < seconds <= 300:
        raise SandboxError(f"monitor load of {seconds} s: expected 0 < seconds <= 300")
    check_loopback(broker.bootstrap)
    tasks: dict[str, Callable[[], LoadResult]] = {
        c.name: _task(c, broker.bootstrap, seconds, users) for c in MONITOR_CLIENTS
    }
    run = LoadRun()
    run.started = time.time()
    with client_processes(tasks) as futures:
        start = time.monotonic()
        burst_done = False
        next_call = start
        while (
            not all(f.done() for f in futures.values()) and time.monotonic() - start < seconds + 90
        ):
            now = time.monotonic()
            if not burst_done and now - start >= burst_after_s:
                burst_done = True
                run.bursts[time.time()] = connection_burst(broker.port, BURST, source=SECOND_IP)
            if every is not None and now >= next_call:
                next_call = now + every_s
                every()
            time.sleep(0.25)
    for name, future in futures.items():
        if not future.done():
            run.errors[name] = f"still running {seconds + 90:.0f} s after the start: stopped"
        elif (exc := future.exception()) is not None:
            run.errors[name] = f"{type(exc).__name__}: {exc}"
        else:
            run.results[name] = future.result()
    run.ended = time.time()
    return run
