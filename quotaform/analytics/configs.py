"""Quota configurations for the analytics: where the quotas come from.

* manifests (``analyze utilisation MANIFESTS...``): what they declare;
* snapshots (``quotaform snapshot --out FILE``): JSON Lines of the live
  entities of one or more clusters, one line per entity
  (``schemas/snapshot.schema.json``)::

      {"format_version": 1, "cluster": "prod-eu", "cluster_id": "...",
       "taken_at": "2026-11-23T10:00:00Z", "entity": {"user": "alice"},
       "quotas": {"producer_byte_rate": 1048576.0}}

* saved plans: the configuration before and after the plan (live entities
  outside its scope included when the plan read them);
* the live cluster.

Every source becomes :class:`QuotaConfig` (one cluster's entries), and
:func:`config_rows` turns configurations into the rows the Spark engine joins.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from quotaform.analytics.engine import entity_json
from quotaform.errors import AnalyticsError
from quotaform.kafka.entity import CLIENT_ID, IP, USER, Entity, shape_name
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.resolution import QuotaIndex, level_of

__all__ = [
    "SNAPSHOT_FORMAT_VERSION",
    "QuotaConfig",
    "by_cluster",
    "config_rows",
    "read_snapshot",
    "snapshot_lines",
]

SNAPSHOT_FORMAT_VERSION = 1


@dataclass(frozen=True)
class QuotaConfig:
    """One cluster's quota configuration.

    Attributes:
        cluster: the cluster's name as usage rows name it.
        entries: ``{entity: {quota key: quota value}}``.
        source: where it came from, for reports.
    """

    cluster: str
    entries: Mapping[Entity, Mapping[str, float]]
    source: str
    _index: list[QuotaIndex] = field(default_factory=list, repr=False, compare=False)

    @property
    def index(self) -> QuotaIndex:
        """The configuration indexed for resolution (built once)."""
        if not self._index:
            self._index.append(QuotaIndex(self.entries))
        return self._index[0]


def snapshot_lines(
    cluster: str,
    cluster_id: str | None,
    entries: Mapping[Entity, Mapping[str, float]],
    *,
    taken_at: datetime | None = None,
) -> list[str]:
    """The JSON Lines of a snapshot of ``entries`` (sorted by entity)."""
    when = (taken_at or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [
        json.dumps(
            {
                "format_version": SNAPSHOT_FORMAT_VERSION,
                "cluster": cluster,
                "cluster_id": cluster_id,
                "taken_at": when,
                "entity": entity.as_dict(),
                "quotas": dict(sorted(quotas.items())),
            },
            ensure_ascii=False,
        )
        for entity, quotas in sorted(entries.items(), key=lambda p: p[0].sort_key())
    ]


def read_snapshot(path: Path) -> list[QuotaConfig]:
    """The configurations (one per cluster) of a snapshot file.

    Raises:
        AnalyticsError: unreadable file, or a line that is not a snapshot
            entry (named by ``file:line`` and field).
    """
    by_cluster: dict[str, dict[Entity, dict[str, float]]] = defaultdict(dict)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise AnalyticsError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise AnalyticsError(f"{where}: not JSON: {exc.msg}") from None
        if not isinstance(record, dict):
            raise AnalyticsError(f"{where}: expected a JSON object per line")
        version = record.get("format_version")
        if version != SNAPSHOT_FORMAT_VERSION:
            raise AnalyticsError(f"{where}: format_version: expected 1, got {version!r}")
        cluster, raw_entity, quotas = (
            record.get("cluster"),
            record.get("entity"),
            record.get("quotas"),
        )
        if not isinstance(cluster, str) or not cluster:
            raise AnalyticsError(f"{where}: cluster: expected a non-empty string")
        try:
            entity = Entity.from_mapping(raw_entity) if isinstance(raw_entity, dict) else None
        except ValueError as exc:
            raise AnalyticsError(f"{where}: entity: {exc}") from None
        if entity is None or entity.shape_problem() is not None:
            raise AnalyticsError(
                f'{where}: entity: expected an entity object such as {{"user": "alice"}}'
            )
        if not isinstance(quotas, dict) or not all(
            k in QUOTA_KEYS and isinstance(v, int | float) and not isinstance(v, bool)
            for k, v in quotas.items()
        ):
            raise AnalyticsError(f"{where}: quotas: expected quota key -> number")
        by_cluster[cluster][entity] = {k: float(v) for k, v in quotas.items()}
    return [
        QuotaConfig(cluster, entries, f"snapshot {path}")
        for cluster, entries in sorted(by_cluster.items())
    ]


def config_rows(configs: Iterable[QuotaConfig]) -> list[dict[str, Any]]:
    """One row per (cluster, entity, quota key): the rows of
    :data:`~quotaform.analytics.spark.schemas.CONFIG_SCHEMA` (the entity's
    ladder, level, shape, named parts and JSON text)."""
    rows = []
    for config in configs:
        for entity, quotas in config.entries.items():
            level = level_of(entity)
            named = {t: n for t, n in entity.parts if n is not None}
            for key, value in quotas.items():
                if not QUOTA_KEYS[key].applies_to(entity.types):
                    continue
                rows.append(
                    {
                        "cluster": config.cluster,
                        "quota_key": key,
                        "ladder": "ip" if IP in entity.types else "client",
                        "level": level.number,
                        "shape": shape_name(entity.types),
                        "n_user": named.get(USER),
                        "n_client": named.get(CLIENT_ID),
                        "n_ip": named.get(IP),
                        "value": float(value),
                        "entity": entity_json(entity),
                    }
                )
    return rows


def by_cluster(configs: Sequence[QuotaConfig]) -> dict[str, QuotaConfig]:
    """``configs`` by cluster name.

    Raises:
        AnalyticsError: two configurations for one cluster.
    """
    found: dict[str, QuotaConfig] = {}
    for config in configs:
        if config.cluster in found:
            raise AnalyticsError(
                f"two quota configurations for cluster {config.cluster!r}: "
                f"{found[config.cluster].source} and {config.source}"
            )
        found[config.cluster] = config
    return found
