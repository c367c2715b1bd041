"""Bounded client traffic against a local broker, for tests, demos and benchmarks.

Real Kafka clients (kafka-python ``KafkaProducer`` / ``KafkaConsumer`` with an
explicit ``client_id``) so the broker's quota managers see ordinary produce
and fetch requests. Every run is bounded in time and in bytes, and refuses any
bootstrap address that is not loopback (127.0.0.0/8, ::1): this module never
sends traffic off the machine.

kafka-python 3 has no ``buffer_memory``: without a cap, ``send()`` queues
without bound while the broker throttles. :func:`produce` caps the records in
flight (waiting on the oldest) so the client tracks what the broker accepts.
"""

from __future__ import annotations

import collections
import ipaddress
import itertools
import math
import multiprocessing
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from quotaform.errors import SandboxError

__all__ = [
    "LoadResult",
    "check_loopback",
    "client_processes",
    "consume",
    "produce",
    "scram_settings",
]


@dataclass(frozen=True, slots=True)
class LoadResult:
    """What one run moved: records and value bytes, over ``seconds`` of wall
    time; and, when the run was asked to measure itself from some second on
    (``measure_from_s``), its own steady rate then (``steady_rate``, value
    bytes/s; ``None`` when not asked or nothing to measure)."""

    records: int
    bytes: int
    seconds: float
    steady_rate: float | None = None

    @property
    def rate(self) -> float:
        """Value bytes per second."""
        return self.bytes / self.seconds if self.seconds > 0 else 0.0


def _steady_rate(
    arrivals: list[tuple[float, int]], from_s: float, *, bursts: bool = False
) -> float | None:
    """The client's own rate from ``arrivals`` (``(seconds since start,
    value bytes so far)`` before each arrival of data, in order) from
    ``from_s`` on, bytes/s: the bytes between the first cycle start at or
    after ``from_s`` and the last one, over the time between them.

    Whole cycles only. A producer's acknowledged batches are each a cycle.
    A consumer (``bursts``) admitted k whole fetches per window gets them in
    a burst, then waits out its throttle (KIP-219): an arrival after a gap
    longer than half the longest gap starts a cycle, as counting from a
    burst's third fetch to a later burst's fifth would add or drop fetches
    (k = 5 and 3 cycles: -40 % to +40 %); a consumer without such gaps (the
    longest under 4x the median: not held) has each fetch a cycle. ``None``
    with fewer than two cycle starts from ``from_s`` on."""
    kept = [(t, b) for t, b in arrivals if t >= from_s]
    if len(kept) < 2:
        return None
    gaps = [later[0] - earlier[0] for earlier, later in itertools.pairwise(kept)]
    longest = max(gaps)
    if bursts and longest > 4 * statistics.median(gaps):  # the first arrival's gap is unknown
        kept = [arrival for arrival, gap in zip(kept[1:], gaps, strict=True) if gap > longest / 2]
    if len(kept) < 2 or kept[-1][0] <= kept[0][0]:
        return None
    return (kept[-1][1] - kept[0][1]) / (kept[-1][0] - kept[0][0])


def check_loopback(bootstrap: str) -> None:
    """Refuse any bootstrap server that is not a loopback address.

    Raises:
        SandboxError: a host name other than ``localhost`` or a non-loopback IP.
    """
    for server in bootstrap.split(","):
        host = server.rsplit(":", 1)[0].strip("[]")
        if host == "localhost":
            continue
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise SandboxError(f"load is only sent to loopback addresses, not to {server!r}")


def scram_settings(user: str, password: str, *, mechanism: str = "SCRAM-SHA-512") -> dict[str, Any]:
    """kafka-python settings for a SASL_PLAINTEXT SCRAM client (``security`` below)."""
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }


def produce(
    bootstrap: str,
    topic: str,
    *,
    client_id: str,
    seconds: float,
    max_bytes: int = 256 * 1024 * 1024,
    record_size: int = 1000,
    max_in_flight: int = 512,
    rate: float | None = None,
    security: Mapping[str, Any] | None = None,
    stop: threading.Event | None = None,
    measure_from_s: float | None = None,
) -> LoadResult:
    """Produce ``record_size``-byte records as fast as the broker lets through
    (or at most ``rate`` bytes/s of values), for ``seconds`` or until
    ``max_bytes`` of values were sent (``acks=1``), or until ``stop`` is set
    (a client on a thread whose caller has measured what it needed).
    ``security``: extra kafka-python connection settings (:func:`scram_settings`).
    ``measure_from_s``: the producer measures its own steady rate from that
    second of the run to the end of its sending (records handed to the
    client, at most ``max_in_flight`` ahead of the broker's acknowledgements).

    Raises:
        SandboxError: a non-loopback bootstrap address.
    """
    from kafka import KafkaProducer

    check_loopback(bootstrap)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        client_id=client_id,
        acks=1,
        linger_ms=5,
        batch_size=64 * 1024,
        **(security or {}),
    )
    value = b"q" * record_size
    pending: collections.deque = collections.deque()
    sent = 0
    marks: list[tuple[float, int]] = []
    start = time.monotonic()
    try:
        while (
            time.monotonic() - start < seconds
            and sent + record_size <= max_bytes
            and not (stop is not None and stop.is_set())
        ):
            if measure_from_s is not None:
                now = time.monotonic() - start
                if now >= measure_from_s and (not marks or now - marks[-1][0] >= 0.1):
                    marks.append((now, sent))
            pending.append(producer.send(topic, value))
            sent += record_size
            if rate is not None:
                ahead = sent / rate - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
            while len(pending) >= max_in_flight:
                pending.popleft().get(timeout=60)
        if measure_from_s is not None:
            marks.append((time.monotonic() - start, sent))
        while pending:
            pending.popleft().get(timeout=60)
    finally:
        producer.close(timeout=10)
    elapsed = time.monotonic() - start
    steady = _steady_rate(marks, measure_from_s) if measure_from_s is not None else None
    return LoadResult(sent // record_size, sent, elapsed, steady)


def consume(
    bootstrap: str,
    topic: str,
    *,
    client_id: str,
    seconds: float,
    max_bytes: int = 256 * 1024 * 1024,
    security: Mapping[str, Any] | None = None,
    stop: threading.Event | None = None,
    measure_from_s: float | None = None,
) -> LoadResult:
    """Read ``topic`` from the beginning without a group, as fast as the
    broker lets through, for ``seconds`` or ``max_bytes`` of values, or until
    ``stop`` is set. ``security``: extra kafka-python connection settings
    (:func:`scram_settings`). ``measure_from_s``: the consumer measures its
    own steady rate from that second of the run on, from the arrival of one
    fetch's records to the arrival of the last one's (a fetch's records come
    in several polls: an arrival is the first poll with records after 0.5 s
    without any, or 1 s after the last arrival), the bytes of the fetches in
    between over that time.

    Raises:
        SandboxError: a non-loopback bootstrap address.
    """
    from kafka import KafkaConsumer

    check_loopback(bootstrap)
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        client_id=client_id,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **(security or {}),
    )
    received = records = 0
    arrivals: list[tuple[float, int]] = [(-math.inf, 0)]
    last_data = -math.inf
    start = time.monotonic()
    try:
        while (
            time.monotonic() - start < seconds
            and received < max_bytes
            and not (stop is not None and stop.is_set())
        ):
            polled = consumer.poll(timeout_ms=200)
            now = time.monotonic() - start
            if polled and (
                now - last_data >= _FETCH_GAP_S or now - arrivals[-1][0] >= _MARK_EVERY_S
            ):
                arrivals.append((now, received))
            if polled:
                last_data = now
            for batch in polled.values():
                records += len(batch)
                received += sum(len(r.value or b"") for r in batch)
    finally:
        consumer.close()
    steady = (
        _steady_rate(arrivals, measure_from_s, bursts=True) if measure_from_s is not None else None
    )
    return LoadResult(records, received, time.monotonic() - start, steady)


#: Seconds without records after which records come from another fetch.
_FETCH_GAP_S = 0.5
#: A consumer never held (records in every poll) marks its progress this often, seconds.
_MARK_EVERY_S = 1.0


def _warm_up() -> None:
    """A worker's first task: import kafka-python, and stay busy long enough
    that each worker of the pool gets one."""
    import kafka  # noqa: F401

    time.sleep(0.3)


@contextmanager
def client_processes(
    clients: Mapping[str, Callable[[], LoadResult]], *, join_s: float = 90.0
) -> Iterator[dict[str, Future[LoadResult]]]:
    """Run each client (``functools.partial`` of :func:`produce` or
    :func:`consume`: it must pickle) in its own process, started with
    ``spawn``, for the duration of the block; yields name -> future.

    Clients on threads of one process share its GIL: a consumer parsing a
    1 MiB fetch holds back a paced producer, which then bursts to catch up,
    and the broker measures the test process instead of its quotas. On leaving,
    waits up to ``join_s`` seconds for the clients (each is bounded by its own
    ``seconds``), then shuts the pool down without waiting: a client still
    running then ends on its own bound, and its future is not done.
    """
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=max(1, len(clients)), mp_context=context)
    # the processes started and kafka-python imported first, so the clients
    # connect when the block begins, as threads would (not a second later)
    wait([pool.submit(_warm_up) for _ in clients], timeout=60)
    futures = {name: pool.submit(client) for name, client in clients.items()}
    try:
        yield futures
    finally:
        wait(futures.values(), timeout=join_s)
        pool.shutdown(wait=False, cancel_futures=True)
