"""Storage-aware quotas, the steps every command shares: read volume usage
(live, snapshot files, or the compacted topic), evaluate the policy, scale
the declared ``producer_byte_rate`` values, and publish snapshots.

The rules are :mod:`quotaform.plan.storage` (pure); the cluster I/O is
:mod:`quotaform.cluster.storage`; the formats are
:mod:`quotaform.formats.storage`. ``plan``, ``apply``, ``drift`` and the
``storage`` commands (:mod:`quotaform.app`) all read through
:func:`read_volume_usage` (for plan and drift, a part of
:func:`quotaform.app.facts.gather_facts`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from quotaform.cluster.storage import live_brokers, publish_records, read_topic, read_volumes
from quotaform.cluster.wire.client import QuotaAdminClient
from quotaform.cluster.wire.connection import ConnectionSettings
from quotaform.errors import InputError, StorageError
from quotaform.inputs.depth import check_depth
from quotaform.inputs.files import decode_text, read_bytes, shown
from quotaform.inputs.jsondoc import load_json
from quotaform.inputs.limits import LIMITS
from quotaform.plan.decide import evaluate_volumes
from quotaform.plan.facts import VolumeReading, VolumeSource
from quotaform.plan.storage_types import BrokerSnapshot, StorageEvaluation, StoragePolicy

__all__ = [
    "VolumeSource",
    "evaluate_storage",
    "publish_snapshots",
    "read_snapshot_files",
    "read_volume_usage",
]

log = logging.getLogger(__name__)


def read_snapshot_files(paths: Sequence[Path]) -> list[BrokerSnapshot]:
    """Snapshots from files or directories (``*.json``, ``*.jsonl``, sorted).

    Raises:
        StorageError: a missing file, bad JSON or a bad record (file, line,
            field); no file or no record at all (an explicitly given source
            that says nothing is an error, never an unknown-broker PAUSE).
    """
    from quotaform.formats.storage import read_snapshot_text  # pydantic models, when needed

    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.suffix in (".json", ".jsonl"))
        elif path.is_file():
            files.append(path)
        else:
            raise StorageError(f"{path}: no such snapshot file or directory")
    given = ", ".join(str(p) for p in paths)
    if not files:
        raise StorageError(
            f"{given}: no snapshot files (*.json, *.jsonl) to read volume usage from"
        )
    out: list[BrokerSnapshot] = []
    for file in files:
        limits = LIMITS["volumes"]
        try:
            data = read_bytes(file, limits)
            check_depth(data, shown(file), limits)
            text = decode_text(data, shown(file), limits)
        except InputError as exc:
            raise StorageError(str(exc)) from None
        out += read_snapshot_text(text, shown(file))
    if not out:
        raise StorageError(f"{given}: no snapshot record in {len(files)} file(s)")
    return out


def _topic_snapshots(settings: ConnectionSettings, topic: str) -> list[BrokerSnapshot]:
    from quotaform.formats.storage import parse_snapshot_record  # pydantic models, when needed

    latest: dict[str, tuple[bytes, int]] = {}
    for key, value, offset in read_topic(settings, topic):
        latest[key] = (value, offset)  # the latest record per key wins (compaction's rule)
    if not latest:
        raise StorageError(f"topic {topic}: no snapshot record to read volume usage from")
    out = []
    for key, (value, offset) in sorted(latest.items()):
        where = f"topic {topic} key {key!r} offset {offset}"
        try:
            data, _ = load_json(value, LIMITS["volume-record"], name=where)
        except InputError as exc:
            raise StorageError(f"{exc}") from None
        out.append(parse_snapshot_record(data, where))
    return out


def read_volume_usage(
    source: VolumeSource,
    *,
    client: QuotaAdminClient | None,
    settings: ConnectionSettings | None = None,
    now: datetime | None = None,
) -> VolumeReading:
    """Read volume usage from ``source``: the read half of
    :func:`evaluate_storage` (the facts a storage policy is judged on).

    With a ``client`` the brokers that should report come from
    DescribeCluster (a broker without a fresh snapshot is then unknown);
    without one only the brokers in the snapshots are judged.

    Raises:
        StorageError: bad snapshots, an unreadable topic, or live usage
            asked for without a connection.
        BrokerError: DescribeCluster failed.
    """
    now = now or datetime.now(UTC)
    expected: list[str] | None = None
    if source.live:
        if client is None:
            raise StorageError(
                "volume usage: pass --bootstrap-server (DescribeLogDirs), --snapshots PATH "
                "or --from-topic TOPIC"
            )
        snapshots, expected = read_volumes(client, now=now)
    else:
        if source.read:
            snapshots = list(source.read)
        elif source.snapshots:
            snapshots = read_snapshot_files(source.snapshots)
        else:
            if settings is None or source.topic is None:
                raise StorageError("--from-topic needs a cluster connection")
            snapshots = _topic_snapshots(settings, source.topic)
        if client is not None:
            expected = live_brokers(client)
    return VolumeReading(
        tuple(snapshots),
        None if expected is None else tuple(expected),
        now,
        source.describe(),
    )


def evaluate_storage(
    policy: StoragePolicy,
    source: VolumeSource,
    *,
    client: QuotaAdminClient | None,
    settings: ConnectionSettings | None = None,
    now: datetime | None = None,
) -> StorageEvaluation:
    """Read volume usage from ``source`` (:func:`read_volume_usage`) and
    evaluate ``policy`` (:func:`~quotaform.plan.decide.evaluate_volumes`).

    Raises:
        StorageError: bad snapshots, an unreadable topic, or live usage
            asked for without a connection.
        BrokerError: DescribeCluster failed.
    """
    reading = read_volume_usage(source, client=client, settings=settings, now=now)
    evaluation = evaluate_volumes(policy, reading)
    log.info(
        "storage: %s factor %.3f from %s (%s)",
        evaluation.state.value,
        evaluation.factor,
        reading.source,
        evaluation.reason or "every volume within its soft limit",
    )
    return evaluation


def publish_snapshots(
    client: QuotaAdminClient,
    settings: ConnectionSettings,
    topic: str,
    snapshots: Sequence[BrokerSnapshot],
    policy: StoragePolicy,
    *,
    create: bool,
) -> list[str]:
    """Publish one record per broker, keyed by broker id; returns the
    publication errors (see :func:`~quotaform.cluster.storage.publish_records`)."""
    from quotaform.formats.storage import snapshot_record  # pydantic models, when needed

    records = [
        (s.broker_id, json.dumps(snapshot_record(s, policy), separators=(",", ":")).encode())
        for s in snapshots
    ]
    return publish_records(client, settings, topic, records, create=create)
