"""Volume usage from a live cluster, and the compacted snapshot topic.

* :func:`read_volumes`: DescribeCluster for the brokers that should report,
  then DescribeLogDirs v4+ (KIP-827, Kafka 3.3+: ``TotalBytes`` and
  ``UsableBytes`` per log dir) to each broker. A broker that does not answer,
  a log dir with an error code, or a broker too old for v4 is reported as
  unknown (``BrokerSnapshot.error``), never as fine.
* :func:`publish_records` / :func:`read_topic`: the Strimzi proposal's
  compacted topic, keyed by broker id (the latest record per key wins).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import kafka.errors as kerrors

from quotaform.cluster.wire.client import QuotaAdminClient, metadata_honouring_client
from quotaform.cluster.wire.connection import ConnectionSettings
from quotaform.errors import StorageError
from quotaform.plan.storage_types import BrokerSnapshot, Volume

__all__ = ["live_brokers", "publish_records", "read_topic", "read_volumes"]

log = logging.getLogger(__name__)

#: DescribeLogDirs versions carrying TotalBytes / UsableBytes (KIP-827).
_LOG_DIRS_MIN_VERSION = 4
_READ_TIMEOUT_MS = 5_000


def live_brokers(client: QuotaAdminClient) -> list[str]:
    """The ids of the unfenced brokers (DescribeCluster): those that should report."""
    cluster = client.cluster_description()  # the cluster id check asked already
    return sorted(
        (str(b["broker_id"]) for b in cluster["brokers"] if not b.get("is_fenced", False)),
        key=lambda b: (len(b), b),
    )


async def _log_dirs(client: QuotaAdminClient, node_id: int) -> Any:
    from kafka.protocol.admin import DescribeLogDirsRequest

    request = DescribeLogDirsRequest(topics=[], min_version=_LOG_DIRS_MIN_VERSION)
    return await client._manager.send(request, node_id=node_id)


def read_volumes(
    client: QuotaAdminClient, *, now: datetime
) -> tuple[list[BrokerSnapshot], list[str]]:
    """Every live broker's log dirs as volumes, captured ``now``.

    Returns:
        ``(snapshots, expected)``: one snapshot per broker DescribeCluster
        lists (unfenced), and those brokers' ids. A volume is one log dir:
        capacity = TotalBytes, consumed = TotalBytes - UsableBytes (bytes).

    Raises:
        BrokerError: DescribeCluster failed (no broker list: nothing can be judged).
    """
    expected = live_brokers(client)
    snapshots = []
    for broker_id in expected:
        try:
            response = client._manager.run(_log_dirs, client, int(broker_id))
        except kerrors.IncompatibleBrokerVersion:
            snapshots.append(
                _unknown(
                    broker_id, now, "DescribeLogDirs v4+ not supported (KIP-827 needs Kafka 3.3+)"
                )
            )
            continue
        except (kerrors.KafkaError, OSError) as exc:
            snapshots.append(_unknown(broker_id, now, f"DescribeLogDirs failed: {exc}"))
            continue
        if getattr(response, "error_code", 0):
            error = kerrors.for_code(response.error_code).__name__
            snapshots.append(_unknown(broker_id, now, f"DescribeLogDirs error {error}"))
            continue
        volumes, errors = [], []
        for result in response.results:
            if result.error_code:
                name = kerrors.for_code(result.error_code).__name__
                errors.append(f"log dir {result.log_dir}: {name}")
            elif result.total_bytes < 0 or result.usable_bytes < 0:
                errors.append(f"log dir {result.log_dir}: no TotalBytes/UsableBytes")
            else:
                volumes.append(
                    Volume(
                        result.log_dir,
                        int(result.total_bytes),
                        int(result.total_bytes - result.usable_bytes),
                    )
                )
        snapshots.append(
            BrokerSnapshot(
                broker_id, now, tuple(volumes), error="; ".join(errors) if errors else None
            )
        )
        log.info("DescribeLogDirs: broker %s, %d log dir(s)", broker_id, len(volumes))
    return snapshots, expected


def _unknown(broker_id: str, now: datetime, why: str) -> BrokerSnapshot:
    return BrokerSnapshot(broker_id, now, (), error=why)


def _configs(settings: ConnectionSettings) -> dict[str, Any]:
    configs = settings.kafka_configs()
    configs["request_timeout_ms"] = settings.request_timeout_ms
    # The snapshot topic is made only by --create-topic (compacted): never by
    # a metadata request (auto.create.topics.enable would make it uncompacted).
    configs["allow_auto_create_topics"] = False
    configs["kafka_client"] = metadata_honouring_client
    return configs


def publish_records(
    client: QuotaAdminClient,
    settings: ConnectionSettings,
    topic: str,
    records: Sequence[tuple[str, bytes]],
    *,
    create: bool,
) -> list[str]:
    """Produce ``(broker id, JSON value)`` records to ``topic`` (keyed by broker
    id, ``acks=all``), creating it with ``cleanup.policy=compact`` when it is
    missing and ``create`` is true.

    Returns:
        One message per record that could not be published (the proposal's
        publication errors); empty when all were.

    Raises:
        StorageError: the topic is missing and may not (``create`` false) or
            cannot be created, or it exists without ``cleanup.policy=compact``.
    """
    from kafka import KafkaProducer
    from kafka.admin import NewTopic

    if topic not in set(client.list_topics()):
        if not create:
            raise StorageError(
                f"topic {topic!r} does not exist: create it with cleanup.policy=compact, "
                "or pass --create-topic"
            )
        try:
            client.create_topics(
                [NewTopic(topic, 1, -1, topic_configs={"cleanup.policy": "compact"})]
            )
        except kerrors.TopicAlreadyExistsError:
            pass
        except kerrors.KafkaError as exc:
            raise StorageError(f"cannot create topic {topic!r}: {exc}") from None
    producer = KafkaProducer(**_configs(settings), acks="all")
    failures = []
    try:
        futures = [
            (key, producer.send(topic, key=key.encode(), value=value)) for key, value in records
        ]
        for key, future in futures:
            try:
                future.get(timeout=settings.request_timeout_ms / 1000)
            except kerrors.KafkaError as exc:
                failures.append(f"broker {key}: {exc}")
    finally:
        producer.close(timeout=10)
    return failures


def read_topic(settings: ConnectionSettings, topic: str) -> list[tuple[str, bytes, int]]:
    """Every record of ``topic`` from the beginning to its end offsets, as
    ``(key, value, offset)`` in offset order per partition (a compacted
    topic's latest record per key comes last). Tombstones are skipped.

    Raises:
        StorageError: the topic does not exist or cannot be read.
    """
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(**_configs(settings), enable_auto_commit=False, group_id=None)
    try:
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            raise StorageError(f"topic {topic!r} does not exist (or is not readable)")
        assigned = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)
        ends = consumer.end_offsets(assigned)
        out: list[tuple[str, bytes, int]] = []
        remaining = {tp for tp in assigned if ends[tp] > 0}
        while remaining:
            batches = consumer.poll(timeout_ms=_READ_TIMEOUT_MS)
            if not batches:
                stuck = sorted(f"{tp.topic}-{tp.partition}" for tp in remaining)
                raise StorageError(
                    f"topic {topic!r}: no records within 5 s from {', '.join(stuck)}"
                )
            for tp, records in batches.items():
                for record in records:
                    if record.value is not None and record.key is not None:
                        out.append(
                            (record.key.decode("utf-8", "replace"), record.value, record.offset)
                        )
                if consumer.position(tp) >= ends[tp]:
                    remaining.discard(tp)
        return out
    except kerrors.KafkaError as exc:
        raise StorageError(f"cannot read topic {topic!r}: {exc}") from None
    finally:
        consumer.close()
