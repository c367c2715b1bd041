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
from quotaform.errors import AnalyticsError, InputError
from quotaform.inputs.excerpt import excerpt
from quotaform.inputs.jsondoc import json_lines
from quotaform.inputs.limits import LIMITS
from quotaform.kafka.entity import CLIENT_ID, IP, USER, Entity, escape_unprintable, shape_name
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.resolution import QuotaIndex, level_of
from quotaform.plan.enforcement import QuotaEnforcement

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
        enforcement: how the cluster's brokers enforce these quotas (how
            many, any custom quota callback), when read from the live cluster
            or a saved plan that recorded it; ``None``: not known (manifests,
            snapshot files).
    """

    cluster: str
    entries: Mapping[Entity, Mapping[str, float]]
    source: str
    enforcement: QuotaEnforcement | None = None
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
        AnalyticsError: unreadable file, or lines that are not snapshot
            entries: every bad line at once, each ``file:line: field: message``.
    """
    by_cluster: dict[str, dict[Entity, dict[str, float]]] = defaultdict(dict)
    problems: list[str] = []
    try:
        for line in json_lines(path, LIMITS["snapshot"]):
            where = f"{path}:{line.number}"
            found = (
                line.problem.removeprefix("line: ") if line.problem else _snapshot_entry(line.value)
            )
            if isinstance(found, str):
                found = [found]
            if isinstance(found, list):
                problems += [f"{where}: {problem}" for problem in found]
                continue
            cluster, entity, quotas = found
            by_cluster[cluster][entity] = quotas
    except InputError as exc:
        raise AnalyticsError(str(exc)) from None
    if problems:
        shown = problems[:SNAPSHOT_PROBLEMS_SHOWN]
        more = len(problems) - len(shown)
        raise AnalyticsError(
            f"{path}: {len(problems)} problem(s), not a quota snapshot "
            "(schemas/snapshot.schema.json):\n"
            + "\n".join(shown)
            + (f"\n... and {more} more" if more else "")
        )
    if not by_cluster:
        raise AnalyticsError(
            f"{escape_unprintable(str(path))}: no snapshot entry (an empty quota snapshot: "
            "write one with quotaform snapshot --out FILE)"
        )
    return [
        QuotaConfig(cluster, entries, f"snapshot {path}")
        for cluster, entries in sorted(by_cluster.items())
    ]


#: Problems of a snapshot file listed in the error (the rest are counted).
SNAPSHOT_PROBLEMS_SHOWN = 50


def _snapshot_entry(record: Any) -> tuple[str, Entity, dict[str, float]] | list[str]:
    """One snapshot line's ``(cluster, entity, quotas)`` (``record``: its
    JSON), or every problem of it (``field: message``)."""
    if not isinstance(record, dict):
        return ["expected a JSON object per line"]
    problems: list[str] = []
    version = record.get("format_version")
    if version != SNAPSHOT_FORMAT_VERSION:
        problems.append(f"format_version: expected 1, got {excerpt(version)}")
    cluster, raw_entity, quotas = (
        record.get("cluster"),
        record.get("entity"),
        record.get("quotas"),
    )
    if not isinstance(cluster, str) or not cluster:
        problems.append(f"cluster: expected a non-empty string, got {excerpt(cluster)}")
    entity: Entity | None = None
    try:
        entity = Entity.from_mapping(raw_entity) if isinstance(raw_entity, dict) else None
    except ValueError as exc:
        problems.append(f"entity: {exc}")
    else:
        if entity is None or entity.shape_problem() is not None:
            problems.append('entity: expected an entity object such as {"user": "alice"}')
    if not isinstance(quotas, dict):
        problems.append("quotas: expected quota key -> number")
    else:
        for key, value in quotas.items():
            if key not in QUOTA_KEYS:
                problems.append(
                    f"quotas.{excerpt(key, quoted=False)}: not a quota key (one of "
                    f"{', '.join(QUOTA_KEYS)})"
                )
            elif not isinstance(value, int | float) or isinstance(value, bool):
                problems.append(f"quotas.{key}: expected a number, got {excerpt(value)}")
    if problems or entity is None or not isinstance(quotas, dict):
        return problems
    assert isinstance(cluster, str)
    return cluster, entity, {k: float(v) for k, v in quotas.items()}


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
