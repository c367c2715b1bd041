"""The apply lock: one apply at a time per cluster, held in the cluster itself.

Kafka has no compare-and-set for client quotas, so two applies planned from
the same state would both succeed, the second silently overwriting the first.
Topic creation is atomic: of two concurrent CreateTopics for one name exactly
one succeeds and the other gets TOPIC_ALREADY_EXISTS (36). So the lock is the
existence of the topic :data:`LOCK_TOPIC`: apply creates it (acquire), writes
one record saying who holds it, and deletes it when done (release).

Semantics, as Terraform's state lock:

* an apply that finds the lock held fails at once (exit 1) naming the holder,
  or waits up to ``--lock-timeout`` for it;
* apply takes the lock before it reads the cluster (plan, or a saved plan's
  stale check), so what it reads cannot change under it through quotaform;
* a lock is never broken automatically: if its holder died mid-apply,
  ``quotaform unlock --lock-id ID`` releases it, after checking the lock still
  has that id;
* the principal needs CREATE, DELETE, WRITE and READ on the topic (or on the
  cluster); ``--no-lock`` skips the lock, for principals that cannot have them.
"""

from __future__ import annotations

import getpass
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import kafka.errors as kerrors

from quotaform.cluster.wire.client import QuotaAdminClient, metadata_honouring_client
from quotaform.cluster.wire.connection import ConnectionSettings
from quotaform.errors import ApplyLockedError, InputError, LockError
from quotaform.inputs.jsondoc import load_json
from quotaform.inputs.limits import LIMITS

__all__ = ["LOCK_TOPIC", "LockHolder", "acquire", "apply_lock", "current_holder", "release"]

log = logging.getLogger(__name__)

#: The topic whose existence is the lock (one partition, the broker's
#: replication factor).
LOCK_TOPIC = "quotaform-apply-lock"
_POLL_S = 1.0
_READ_TIMEOUT_MS = 3000


@dataclass(frozen=True, slots=True)
class LockHolder:
    """Who holds the lock (the record written into :data:`LOCK_TOPIC`).

    Attributes:
        lock_id: a random id of this acquisition (for ``unlock --lock-id``).
        owner: ``user@host``.
        pid: the holding process.
        since: when it was taken, ISO 8601 UTC.
        command: what runs (``quotaform apply``).
    """

    lock_id: str
    owner: str
    pid: int
    since: str
    command: str

    @classmethod
    def new(cls, command: str) -> LockHolder:
        """A holder for this process."""
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "unknown"
        return cls(
            lock_id=uuid.uuid4().hex[:12],
            owner=f"{user}@{socket.gethostname()}",
            pid=os.getpid(),
            since=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            command=command,
        )

    def describe(self) -> str:
        """``lock id 3f2a... held by ci@runner-7 (pid 812, quotaform apply) since ...``"""
        return (
            f"lock id {self.lock_id} held by {self.owner} (pid {self.pid}, {self.command}) "
            f"since {self.since}"
        )


def _create(client: QuotaAdminClient) -> bool:
    """Create the lock topic; ``False`` when it exists already."""
    try:
        client.create_topics(
            {LOCK_TOPIC: {"num_partitions": 1, "replication_factor": -1}},
            wait_for_metadata=True,
        )
    except kerrors.TopicAlreadyExistsError:
        return False
    except (kerrors.TopicAuthorizationFailedError, kerrors.ClusterAuthorizationFailedError):
        raise LockError(
            f"cannot take the apply lock: the principal may not create topic {LOCK_TOPIC} "
            "(it needs CREATE, DELETE, WRITE and READ on that topic, or pass --no-lock "
            "to apply without the lock)"
        ) from None
    return True


def _producer_configs(settings: ConnectionSettings) -> dict[str, Any]:
    configs = settings.kafka_configs()
    configs["request_timeout_ms"] = settings.request_timeout_ms
    # Only _create may make the lock topic: a reader or writer whose metadata
    # request reached the broker just after a release would otherwise
    # re-create it (auto.create.topics.enable), leaving a lock nobody holds.
    configs["allow_auto_create_topics"] = False
    configs["kafka_client"] = metadata_honouring_client
    return configs


def _write_holder(settings: ConnectionSettings, holder: LockHolder) -> None:
    from kafka import KafkaProducer  # only when a lock is taken

    # The topic was created a moment ago: the producer's first metadata answer
    # may not list it yet, and the next try comes after retry_backoff_ms.
    producer = KafkaProducer(**_producer_configs(settings), acks="all", retry_backoff_ms=10)
    try:
        producer.send(LOCK_TOPIC, json.dumps(asdict(holder)).encode("utf-8")).get(
            timeout=settings.request_timeout_ms / 1000
        )
    finally:
        producer.close()


def current_holder(settings: ConnectionSettings) -> LockHolder | None:
    """Who holds the lock, read from :data:`LOCK_TOPIC`; ``None`` when the
    topic has no readable holder record (not locked, or the holder died
    before writing it)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(**_producer_configs(settings), enable_auto_commit=False)
    try:
        partition = TopicPartition(LOCK_TOPIC, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        batches = consumer.poll(timeout_ms=_READ_TIMEOUT_MS, max_records=1)
    except kerrors.KafkaError:
        return None
    finally:
        consumer.close()
    for records in batches.values():
        for record in records:
            try:
                data, _ = load_json(record.value, LIMITS["lock-record"], name=LOCK_TOPIC)
                return LockHolder(**data)
            except (InputError, TypeError, ValueError):
                return None
    return None


def acquire(
    client: QuotaAdminClient,
    settings: ConnectionSettings,
    *,
    command: str = "quotaform apply",
    timeout_s: float = 0.0,
) -> LockHolder:
    """Take the apply lock, waiting up to ``timeout_s`` for a holder to release it.

    Raises:
        ApplyLockedError: another holder keeps it past ``timeout_s`` (named
            when its record is readable).
        LockError: the principal may not create the lock topic.
    """
    holder = LockHolder.new(command)
    deadline = time.monotonic() + timeout_s
    while not _create(client):
        if time.monotonic() >= deadline:
            raise ApplyLockedError(current_holder(settings), LOCK_TOPIC)
        log.info("apply lock held by another apply; waiting")
        time.sleep(_POLL_S)
    log.info("apply lock taken (lock id %s)", holder.lock_id)
    # The lock holds without the record; only its description would be missing.
    with suppress(kerrors.KafkaError):
        _write_holder(settings, holder)
    return holder


def release(client: QuotaAdminClient) -> None:
    """Release the apply lock (delete :data:`LOCK_TOPIC`).

    Raises:
        LockError: it could not be deleted; ``quotaform unlock`` releases it.
    """
    try:
        client.delete_topics([LOCK_TOPIC])
        log.info("apply lock released")
    except kerrors.UnknownTopicOrPartitionError:
        return
    except kerrors.KafkaError as exc:
        raise LockError(
            f"the apply lock ({LOCK_TOPIC}) could not be released ({exc}): it is still "
            "held; release it with quotaform unlock once the cluster answers"
        ) from None


@dataclass
class HeldLock:
    """The lock an ``apply_lock`` block holds.

    Attributes:
        holder: who holds it (``None`` when the block ran without a lock).
        release_error: why it could not be released at the end (the lock is
            then still held), ``None`` when it was.
    """

    holder: LockHolder | None
    release_error: str | None = None


@contextmanager
def apply_lock(
    client: QuotaAdminClient,
    settings: ConnectionSettings,
    *,
    timeout_s: float = 0.0,
    enabled: bool = True,
) -> Iterator[HeldLock]:
    """Hold the apply lock for the ``with`` block (``enabled=False``: no lock)
    and release it whatever happens inside. A release that fails (the cluster
    stopped answering) never hides what the block did: it is recorded in
    :attr:`HeldLock.release_error` for the caller to report.

    Raises:
        ApplyLockedError, LockError: as :func:`acquire`, before the block runs.
    """
    if not enabled:
        yield HeldLock(None)
        return
    held = HeldLock(acquire(client, settings, timeout_s=timeout_s))
    try:
        yield held
    finally:
        try:
            release(client)
        except LockError as exc:
            held.release_error = (
                f"{exc} (quotaform unlock --lock-id {held.holder.lock_id})"
                if held.holder is not None
                else str(exc)
            )
