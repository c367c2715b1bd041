"""Per-group statistics of :class:`~quotaform.analytics.local.reader.CodedUsage`
with numpy: the utilisation table as Arrow, and the plotted samples.

Quantiles are exact and the same numbers as
:func:`quotaform.analytics.model.percentile` (the rule both engines share):
the usage samples are sorted once by (group, value) (``numpy.lexsort``), and
each group's ranks ``floor``/``ceil`` of ``p * (n - 1)`` are indexed at once;
the interpolation is the same floating-point expression, so the values are
equal bit for bit. The quota each group is held to is resolved in Python
once per distinct (cluster, tags, key) by
:func:`~quotaform.kafka.resolution.quota_for_tags`, the engine's rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from quotaform.analytics.engine import entity_json, group_tags
from quotaform.analytics.local.reader import SEPARATOR, SERIES_PARTS, CodedUsage
from quotaform.analytics.model import COLUMN_TYPES, PERCENTILES, UTILISATION_COLUMNS
from quotaform.kafka.entity import CLIENT_ID, IP, USER, Entity
from quotaform.kafka.keys import METRICS
from quotaform.kafka.resolution import MetricTags, QuotaIndex, quota_for_tags

__all__ = ["Utilisation", "ranked_order", "sample_points", "utilisation"]

_ARROW_TYPES = {
    "string": pa.string(),
    "double": pa.float64(),
    "int": pa.int32(),
    "long": pa.int64(),
    "boolean": pa.bool_(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}
#: The columns a group is ordered by (``ip`` as ``""`` when none).
_ORDER = ("cluster", "broker", "user", "client_id", "_ip", "quota_key")


@dataclass(frozen=True)
class Utilisation:
    """The utilisation of every observed group.

    Attributes:
        table: :data:`~quotaform.analytics.model.UTILISATION_COLUMNS` in
            order and types, one row per group, sorted as
            :func:`quotaform.analytics.engine.utilisation` sorts them.
        group: int32 per table row: its group's id.
        row_group: int32 per usage row: the id of the group it belongs to.
        row_usage: bool per usage row: a usage sample (else a throttle time).
    """

    table: pa.Table
    group: np.ndarray
    row_group: np.ndarray
    row_usage: np.ndarray


def _parts(keys: pa.Array, count: int) -> list[pa.Array]:
    split = pc.split_pattern(keys, SEPARATOR)
    return [pc.list_element(split, i) for i in range(count)]


def _join(*columns: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise(*columns, SEPARATOR)


def _nullable(values: np.ndarray, present: np.ndarray, kind: pa.DataType) -> pa.Array:
    return pa.array(values, kind, mask=~present)


def _quantiles(
    sorted_values: np.ndarray, starts: np.ndarray, counts: np.ndarray
) -> list[np.ndarray]:
    """Each group's :data:`PERCENTILES` from its run of ``sorted_values``
    (groups without values: 0, masked by the caller)."""
    out = []
    present = counts > 0
    n = np.where(present, counts, 1)
    base = np.where(present, starts, 0)
    for p in PERCENTILES:
        position = p * (n - 1).astype(np.float64)
        low = np.floor(position)
        high = np.ceil(position)
        v_low = sorted_values[base + low.astype(np.int64)] if len(sorted_values) else low
        v_high = sorted_values[base + high.astype(np.int64)] if len(sorted_values) else high
        with np.errstate(invalid="ignore", over="ignore"):
            between = v_low + (v_high - v_low) * (position - low)
        out.append(np.where(low == high, v_low, between))
    return out


#: Stands for a name no entity of the configuration names (never a real one:
#: Kafka names hold no NUL).
_UNNAMED = "\x00unnamed"


def _named(index: QuotaIndex, key: str) -> dict[str, frozenset[str]]:
    """The names each entity type has in the entities that set ``key``."""
    names: dict[str, set[str]] = {}
    for entity in index.entities(key):
        for etype, name in entity.parts:
            if name is not None:
                names.setdefault(etype, set()).add(name)
    return {etype: frozenset(found) for etype, found in names.items()}


def _resolutions(
    cluster: pa.Array,
    user: pa.Array,
    client_id: pa.Array,
    ip: pa.Array,
    quota_key: pa.Array,
    configs: Mapping[str, QuotaIndex],
) -> tuple[pa.Array, pa.Array, pa.Array]:
    """``quota_value``, ``level``, ``entity`` per group.

    Resolved by :func:`~quotaform.kafka.resolution.quota_for_tags` once per
    distinct (cluster, key, tags), with every name the configuration does not
    name for that key replaced by one stand-in: the look-up compares names
    for equality only, so all such names get the same quota, level and
    entity (which cannot contain them). Brokers share the result too.
    """
    encoded = pc.dictionary_encode(_join(cluster, user, client_id, ip, quota_key))
    values: list[float | None] = []
    levels: list[int | None] = []
    entities: list[str | None] = []
    tags_of: dict[tuple[str, str, str], MetricTags] = {}
    named_of: dict[tuple[str, str], dict[str, frozenset[str]]] = {}
    resolved: dict[tuple[str, str, str, str, str], tuple[float | None, int | None, str | None]]
    resolved = {}
    json_of: dict[Entity | None, str | None] = {}
    for key in encoded.dictionary.to_pylist():
        c, u, cid, address, quota = key.split(SEPARATOR)
        tags = tags_of.get((u, cid, address))
        if tags is None:
            tags = tags_of[(u, cid, address)] = group_tags(u, cid, address or None)
        named = named_of.get((c, quota))
        if named is None:
            named = named_of[(c, quota)] = _named(configs[c], quota)
        stand_in = tuple(
            name if not name or name in named.get(etype, ()) else _UNNAMED
            for etype, name in ((USER, tags.user), (CLIENT_ID, tags.client_id), (IP, tags.ip))
        )
        memo = (c, quota, *stand_in)
        found = resolved.get(memo)
        if found is None:
            canonical = MetricTags(user=stand_in[0], client_id=stand_in[1], ip=stand_in[2])
            res = quota_for_tags(configs[c], canonical, quota)
            if res.entity not in json_of:
                json_of[res.entity] = entity_json(res.entity)
            level = res.level.number if res.level is not None else None
            found = resolved[memo] = (res.value, level, json_of[res.entity])
        values.append(found[0])
        levels.append(found[1])
        entities.append(found[2])
    index = encoded.indices
    return (
        pa.array(values, pa.float64()).take(index),
        pa.array(levels, pa.int32()).take(index),
        pa.array(entities, pa.string()).take(index),
    )


def utilisation(usage: CodedUsage, configs: Mapping[str, QuotaIndex]) -> Utilisation:
    """The rows :func:`quotaform.analytics.engine.utilisation` computes from
    the same samples, as an Arrow table: per observed (cluster, broker,
    group, key) the governing quota, the usage's sample count (NaN left out),
    p50/p95/p99 and max, ``utilisation_p99``, and from the throttle-time
    samples (NaN counted, > 0 is throttled) ``throttled_share`` and
    ``censored``. A series with only throttle samples makes no row.

    Args:
        usage: the coded usage of clusters that ``configs`` has.
        configs: cluster name -> its quota configuration.

    Raises:
        KeyError: a usage row's cluster is not in ``configs``.
    """
    cluster, broker, metric, user, client_id, ip = _parts(usage.series, len(SERIES_PARTS))
    metrics = pc.dictionary_encode(metric)
    names = metrics.dictionary.to_pylist()
    metric_index = metrics.indices
    quota_key = pa.array([METRICS[m][0] for m in names], pa.string()).take(metric_index)
    series_usage = np.array([METRICS[m][1] == "usage" for m in names], dtype=bool)[
        metric_index.to_numpy(zero_copy_only=False)
    ]
    groups = pc.dictionary_encode(_join(cluster, broker, user, client_id, ip, quota_key))
    series_group = groups.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    count = len(groups.dictionary)

    row_group = series_group[usage.code] if usage.rows else np.zeros(0, np.int32)
    row_usage = series_usage[usage.code] if usage.rows else np.zeros(0, bool)
    values = usage.value
    has_usage = np.bincount(row_group[row_usage], minlength=count) > 0
    sample = row_usage & ~np.isnan(values)
    sampled, sampled_group = values[sample], row_group[sample]
    order = np.lexsort((sampled, sampled_group))
    sorted_values = sampled[order]
    del order, sampled
    samples = np.bincount(sampled_group, minlength=count)
    starts = np.cumsum(samples) - samples
    p50, p95, p99 = _quantiles(sorted_values, starts, samples)
    maxima = (
        sorted_values[np.maximum(starts + samples - 1, 0)]
        if len(sorted_values)
        else np.zeros(count)
    )
    throttle = ~row_usage
    throttles = np.bincount(row_group[throttle], minlength=count)
    over = np.bincount(row_group[throttle & (values > 0)], minlength=count)

    kept = np.flatnonzero(has_usage).astype(np.int32)
    take = pa.array(kept)
    g_cluster, g_broker, g_user, g_client, g_ip, g_key = _parts(groups.dictionary.take(take), 6)
    quota_value, level, entity = _resolutions(g_cluster, g_user, g_client, g_ip, g_key, configs)
    has = samples[kept] > 0
    quota = quota_value.to_numpy(zero_copy_only=False)
    limited = ~np.isnan(quota)  # quota_value is null when unlimited
    p99_kept = p99[kept]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = p99_kept / np.where(limited, quota, 1.0)
        share = over[kept] / np.maximum(throttles[kept], 1)
    double = pa.float64()
    columns: dict[str, Any] = {
        "cluster": g_cluster,
        "broker": g_broker,
        "user": g_user,
        "client_id": g_client,
        "ip": pc.if_else(pc.equal(g_ip, ""), pa.scalar(None, pa.string()), g_ip),
        "quota_key": g_key,
        "quota_value": quota_value,
        "level": level,
        "entity": entity,
        "samples": pa.array(samples[kept].astype(np.int64)),
        "p50": _nullable(p50[kept], has, double),
        "p95": _nullable(p95[kept], has, double),
        "p99": _nullable(p99_kept, has, double),
        "max": _nullable(maxima[kept], has, double),
        "utilisation_p99": _nullable(ratio, has & limited, double),
        "throttled_share": _nullable(share, throttles[kept] > 0, double),
        "censored": pa.array(over[kept] > 0),
    }
    schema = pa.schema([(c, _ARROW_TYPES[COLUMN_TYPES[c]]) for c in UTILISATION_COLUMNS])
    table = pa.table([columns[c] for c in UTILISATION_COLUMNS], schema=schema)
    ordered = pc.sort_indices(
        table.append_column("_ip", g_ip), sort_keys=[(c, "ascending") for c in _ORDER]
    )
    return Utilisation(
        table=table.take(ordered),
        group=kept[ordered.to_numpy(zero_copy_only=False)],
        row_group=row_group,
        row_usage=row_usage,
    )


def ranked_order(table: pa.Table) -> np.ndarray:
    """Row indices of a utilisation table, most loaded first: by
    ``utilisation_p99`` descending (unlimited last), then by group, as the
    reports rank them."""
    load = pc.fill_null(table.column("utilisation_p99"), -1.0)
    keyed = pa.table(
        {
            "_load": load,
            **{c: table.column(c) for c in _ORDER if c != "_ip"},
            "_ip": pc.fill_null(table.column("ip"), ""),
        }
    )
    keys = [("_load", "descending"), *((c, "ascending") for c in _ORDER)]
    return pc.sort_indices(keyed, sort_keys=keys).to_numpy(zero_copy_only=False)


def sample_points(
    usage: CodedUsage, util: Utilisation, groups: Sequence[int]
) -> dict[int, list[tuple[datetime, float]]]:
    """The usage samples (NaN left out) of the given group ids, keyed by their
    position in ``groups``: ``(time (UTC), value)`` in row order."""
    if not groups:
        return {}
    wanted = np.asarray(groups, dtype=np.int32)
    rows = np.flatnonzero(np.isin(util.row_group, wanted) & util.row_usage & ~np.isnan(usage.value))
    position = {int(g): i for i, g in enumerate(wanted)}
    times = pa.array(usage.timestamp[rows], pa.timestamp("us", "UTC")).to_pylist()
    points: dict[int, list[tuple[datetime, float]]] = {}
    for group, when, value in zip(
        util.row_group[rows].tolist(), times, usage.value[rows].tolist(), strict=True
    ):
        points.setdefault(position[group], []).append((when, value))
    return points
