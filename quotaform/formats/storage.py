"""Storage-aware quotas' file formats.

* :class:`VolumeSnapshotRecord`: the Strimzi proposal's "Volume Metrics
  snapshot" (``../shared/seeds/003``; its JSON Schema is the authority): one
  JSON record per broker, ``brokerId``, ``snapshotAt``, ``hardLimit``,
  ``softLimit``, ``volumes[{volumeName, capacity, consumed}]``, optional
  per-volume limits (the proposal's note 2), extra fields allowed. The
  record's own ``softLimit`` / ``hardLimit`` are read but ignored: the
  manifest's ``storagePolicy`` governs.
  ``schemas/volume-snapshot.schema.json``. The proposal's text spells the
  consumed-bytes limit ``ConsumedSpace`` where its schema says
  ``ConsumedBytes``: both are read, ``ConsumedBytes`` is written.
* :class:`StorageStatusDocument`: ``storage status -o json``
  (``schemas/storage-status.schema.json``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from quotaform.errors import InputError, StorageError
from quotaform.formats.base import FROZEN
from quotaform.inputs.jsondoc import loads_json
from quotaform.inputs.limits import LIMITS
from quotaform.kafka.units import format_quota_value
from quotaform.manifest.pydantic_errors import Locator, validation_problems
from quotaform.plan.storage_types import (
    BrokerSnapshot,
    Limit,
    LimitType,
    StorageEvaluation,
    StoragePolicy,
    StorageScaling,
    Volume,
)

__all__ = [
    "STORAGE_STATUS_FORMAT_VERSION",
    "StorageStatusDocument",
    "VolumeSnapshotRecord",
    "parse_snapshot_record",
    "read_snapshot_text",
    "render_status_json",
    "snapshot_record",
    "status_document",
]

STORAGE_STATUS_FORMAT_VERSION = 1
_OPEN = ConfigDict(defer_build=True, extra="allow", populate_by_name=True)


class LimitRecord(BaseModel):
    """A limit definition: ``type`` and ``level`` (bytes, or % of capacity
    for MinFreePercentage)."""

    model_config = _OPEN
    type: Literal["ConsumedBytes", "MinFreeBytes", "MinFreePercentage", "ConsumedSpace"] = Field(
        description="ConsumedBytes (read also as the proposal text's ConsumedSpace), "
        "MinFreeBytes or MinFreePercentage."
    )
    level: float = Field(ge=0, description="Bytes, or % of capacity for MinFreePercentage.")

    def to_limit(self) -> Limit:
        """The plain :class:`~quotaform.plan.storage.Limit`."""
        return Limit(LimitType.parse(self.type), float(self.level))


class VolumeRecord(BaseModel):
    """One volume of the broker."""

    model_config = _OPEN
    volume_name: str = Field(alias="volumeName", min_length=1, description="e.g. /dev/sdd.")
    capacity: int = Field(ge=0, description="Capacity in bytes.")
    consumed: int = Field(ge=0, description="Bytes in use (ConsumedBytes).")
    soft_limit: LimitRecord | None = Field(
        default=None, alias="softLimit", description="Overrides the soft limit for this volume."
    )
    hard_limit: LimitRecord | None = Field(
        default=None, alias="hardLimit", description="Overrides the hard limit for this volume."
    )


class VolumeSnapshotRecord(BaseModel):
    """One broker's volume usage (the Strimzi proposal's Volume Metrics
    snapshot), keyed by ``brokerId`` on the compacted topic."""

    model_config = _OPEN
    format_version: Literal[1] = Field(
        default=1, description="quotaform's version of this record (optional when read)."
    )
    broker_id: str = Field(alias="brokerId", min_length=1, description="Node.idString().")
    snapshot_at: datetime = Field(
        alias="snapshotAt", description="When the usage was captured (ISO 8601, UTC)."
    )
    # The proposal's note 2 only muses that these could be broker-wide
    # defaults; the reviewed manifest is what governs, so a publisher cannot
    # change throttling by writing other limits.
    hard_limit: LimitRecord = Field(
        alias="hardLimit",
        description="Required by the proposal's schema; read but ignored: the manifest's "
        "storagePolicy.hard governs (quotaform writes it here). A volume's own hardLimit "
        "does override it for that volume.",
    )
    soft_limit: LimitRecord = Field(
        alias="softLimit",
        description="Required by the proposal's schema; read but ignored: the manifest's "
        "storagePolicy.soft governs (quotaform writes it here). A volume's own softLimit "
        "does override it for that volume.",
    )
    volumes: list[VolumeRecord]
    error: str | None = Field(
        default=None,
        description="quotaform: why the broker or a log dir could not report (then unknown).",
    )

    @field_validator("snapshot_at", mode="after")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("snapshotAt needs a time zone (e.g. 2026-11-23T10:00:00Z)")
        return value

    def to_snapshot(self) -> BrokerSnapshot:
        """The plain :class:`~quotaform.plan.storage.BrokerSnapshot`."""
        return BrokerSnapshot(
            broker_id=self.broker_id,
            snapshot_at=self.snapshot_at.astimezone(UTC),
            volumes=tuple(
                Volume(
                    v.volume_name,
                    v.capacity,
                    v.consumed,
                    v.soft_limit.to_limit() if v.soft_limit else None,
                    v.hard_limit.to_limit() if v.hard_limit else None,
                )
                for v in self.volumes
            ),
            soft=self.soft_limit.to_limit(),
            hard=self.hard_limit.to_limit(),
            error=self.error,
        )


def _limit(limit: Limit) -> dict[str, Any]:
    level = limit.level
    return {"type": limit.type.value, "level": int(level) if level == int(level) else level}


def snapshot_record(snapshot: BrokerSnapshot, policy: StoragePolicy) -> dict[str, Any]:
    """The JSON record of ``snapshot`` (limits: the snapshot's, else the
    policy's), in the schema's spelling."""
    record: dict[str, Any] = {
        "brokerId": snapshot.broker_id,
        "snapshotAt": snapshot.snapshot_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "hardLimit": _limit(snapshot.hard or policy.hard),
        "softLimit": _limit(snapshot.soft or policy.soft),
        "volumes": [
            {"volumeName": v.name, "capacity": v.capacity, "consumed": v.consumed}
            | ({"softLimit": _limit(v.soft)} if v.soft else {})
            | ({"hardLimit": _limit(v.hard)} if v.hard else {})
            for v in snapshot.volumes
        ],
        "format_version": 1,
    }
    if snapshot.error is not None:
        record["error"] = snapshot.error
    return record


def parse_snapshot_record(data: object, where: str, line: int | None = None) -> BrokerSnapshot:
    """One record (already decoded JSON) as a snapshot.

    Raises:
        StorageError: every problem of the record, one per line,
            ``where:line: field: message`` (``line``: the record's).
    """
    try:
        return VolumeSnapshotRecord.model_validate(data).to_snapshot()
    except ValidationError as exc:
        problems = validation_problems(exc, where, locate=_at_line(line))
        raise StorageError("\n".join(str(p) for p in problems)) from None


def _at_line(line: int | None) -> Locator:
    """Every field of a record at the record's line, its path dotted
    (``volumes.0.capacity``)."""
    return lambda loc: (line, ".".join(str(p) for p in loc) or "(record)")


def read_snapshot_text(text: str, where: str) -> Iterator[BrokerSnapshot]:
    """Snapshots from a file's text: one JSON record, a JSON array of records,
    or JSON Lines (one record per line; blank lines skipped).

    Raises:
        StorageError: bad JSON or a bad record, naming the file, line and field.
    """
    limits = LIMITS["volumes"]
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            records = loads_json(text, where, limits)
        except InputError as exc:
            raise StorageError(f"{where}:{exc.line}: (json): {exc.reason}") from None
        for index, record in enumerate(records):
            yield parse_snapshot_record(record, f"{where}[{index}]")
        return
    try:
        whole = loads_json(text, where, limits) if stripped.startswith("{") else None
    except InputError:
        whole = None  # JSON Lines
    if isinstance(whole, dict):
        yield parse_snapshot_record(whole, where, 1)
        return
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = loads_json(line, where, limits)
        except InputError as exc:
            raise StorageError(f"{where}:{number}: (json): {exc.reason}") from None
        yield parse_snapshot_record(record, where, number)


# ----------------------------------------------------------------- status


class VolumeStatus(BaseModel):
    """One volume judged; bytes as integers."""

    model_config = FROZEN
    name: str
    capacity: int
    consumed: int
    free: int
    state: Literal["OPEN", "THROTTLE", "PAUSE"]
    factor: float = Field(ge=0, le=1)
    binding: Literal["soft", "hard"] | None = Field(
        description="The limit that binds (reached), null when none."
    )
    soft_free_bytes: int = Field(description="Free bytes at which the soft limit is reached.")
    hard_free_bytes: int = Field(description="Free bytes at which the hard limit is reached.")


class BrokerStatus(BaseModel):
    """One broker judged."""

    model_config = FROZEN
    broker_id: str
    snapshot_at: datetime | None
    age_seconds: float | None
    status: Literal["fresh", "stale", "missing", "error"]
    state: Literal["OPEN", "THROTTLE", "PAUSE"] | None = Field(
        description="The broker's most restrictive volume; null when not fresh."
    )
    factor: float | None
    reason: str | None
    volumes: list[VolumeStatus]


class ScaledStatus(BaseModel):
    """One entity's producer_byte_rate under the policy (bytes/s)."""

    model_config = FROZEN
    entity: dict[str, str | None]
    declared: float
    written: float
    readable: str


class StorageMetrics(BaseModel):
    """The proposal's metrics."""

    model_config = FROZEN
    throttling_for_lack_of_data: Literal[0, 1] = Field(
        description="1 when onUnknown decided the state."
    )
    sources_reachable: int = Field(description="Brokers with a fresh snapshot.")
    sources_expected: int = Field(description="Brokers judged (expected or reporting).")
    publication_errors: int = Field(description="Snapshot records that could not be published.")
    usage_per_volume: dict[str, float] = Field(
        description='"broker/volume" -> consumed share of capacity (0..1).'
    )


class StorageStatusDocument(BaseModel):
    """``quotaform storage status -o json``."""

    model_config = FROZEN
    format_version: Literal[1]
    state: Literal["OPEN", "THROTTLE", "PAUSE"]
    factor: float = Field(
        ge=0,
        le=1,
        description="The factor the volumes give (0 under PAUSE), before the hysteresis "
        "step and the hold: computed_factor.",
    )
    applied_factor: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="The factor written into the scaled producer_byte_rate values (a "
        "multiple of the hysteresis step; the live one when held).",
    )
    computed_factor: float = Field(
        default=0.0, ge=0, le=1, description="The factor the volumes give (same as factor)."
    )
    reason: str | None = Field(description="Which broker and volume decide, or why unknown.")
    cluster: str | None = Field(default=None, description="The manifests' cluster.")
    source: str | None = Field(
        default=None,
        description="Where the volume usage came from: DescribeLogDirs, snapshots FILE..., "
        "or topic TOPIC.",
    )
    evaluated_at: datetime
    expected_brokers_known: bool = Field(
        description="The brokers that should report came from the cluster (DescribeCluster)."
    )
    policy: dict[str, Any] = Field(description="The policy the state was judged by.")
    brokers: list[BrokerStatus]
    scaled: list[ScaledStatus] = Field(
        description="Each scaled entity's declared and written producer_byte_rate."
    )
    metrics: StorageMetrics


def _policy_doc(policy: StoragePolicy) -> dict[str, Any]:
    return {
        "soft": _limit(policy.soft),
        "hard": _limit(policy.hard),
        "stale_after_seconds": policy.stale_after_s,
        "on_unknown": policy.on_unknown.value,
        "pause_rate": policy.pause_rate,
        "hysteresis": policy.step,
        "source": str(policy.source) if policy.source else None,
    }


def status_document(
    policy: StoragePolicy,
    evaluation: StorageEvaluation,
    scaling: StorageScaling | None = None,
    *,
    publication_errors: int = 0,
    cluster: str | None = None,
    source: str | None = None,
) -> StorageStatusDocument:
    """The JSON model of a storage evaluation (exact bytes and factors;
    ``cluster`` and ``source`` say what was judged from where)."""
    brokers = []
    usage: dict[str, float] = {}
    for broker in evaluation.brokers:
        volumes = []
        for v in broker.volumes:
            vol = v.volume
            volumes.append(
                VolumeStatus(
                    name=vol.name,
                    capacity=vol.capacity,
                    consumed=vol.consumed,
                    free=vol.free,
                    state=v.state.value,
                    factor=round(v.factor, 6),
                    binding=v.binding,  # type: ignore[arg-type]
                    soft_free_bytes=int(vol.capacity - v.soft_at),
                    hard_free_bytes=int(vol.capacity - v.hard_at),
                )
            )
            if vol.capacity:
                usage[f"{broker.broker_id}/{vol.name}"] = round(vol.consumed / vol.capacity, 6)
        brokers.append(
            BrokerStatus(
                broker_id=broker.broker_id,
                snapshot_at=broker.snapshot_at,
                age_seconds=None if broker.age_s is None else round(broker.age_s, 3),
                status=broker.status,  # type: ignore[arg-type]
                state=broker.state.value if broker.state else None,
                factor=None if broker.factor is None else round(broker.factor, 6),
                reason=broker.reason,
                volumes=volumes,
            )
        )
    return StorageStatusDocument(
        format_version=1,
        state=evaluation.state.value,
        factor=round(evaluation.factor, 6),
        applied_factor=None if scaling is None else scaling.factor,
        computed_factor=round(evaluation.factor, 6),
        reason=evaluation.reason,
        cluster=cluster,
        source=source,
        evaluated_at=evaluation.evaluated_at,
        expected_brokers_known=evaluation.expected_known,
        policy=_policy_doc(policy),
        brokers=brokers,
        scaled=[
            ScaledStatus(
                entity=s.entity.as_dict(),
                declared=s.declared,
                written=s.written,
                readable=f"{format_quota_value('producer_byte_rate', s.declared)} -> "
                f"{format_quota_value('producer_byte_rate', s.written)}",
            )
            for s in (scaling.scaled if scaling else ())
        ],
        metrics=StorageMetrics(
            throttling_for_lack_of_data=1 if evaluation.lack_of_data else 0,
            sources_reachable=sum(1 for b in evaluation.brokers if b.status == "fresh"),
            sources_expected=len(evaluation.brokers),
            publication_errors=publication_errors,
            usage_per_volume=usage,
        ),
    )


def render_status_json(document: StorageStatusDocument) -> str:
    """``document`` as JSON (2-space indent, trailing newline)."""
    return json.dumps(document.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"


def records_json_lines(records: Iterable[dict[str, Any]]) -> str:
    """Records as JSON Lines (compact, one per line)."""
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
