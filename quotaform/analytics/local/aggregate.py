"""Per-group statistics of :class:`~quotaform.analytics.local.reader.CodedUsage`
with numpy: the utilisation table as Arrow, and the plotted samples.

Quantiles are exact and the same numbers as
:func:`quotaform.analytics.model.percentile` (the rule both engines share):
the usage samples are sorted once by (group, value) (``numpy.lexsort``), and
each group's ranks ``floor``/``ceil`` of ``p * (n - 1)`` are indexed at once;
the interpolation is the same floating-point expression, so the values are
equal bit for bit. The cluster-wide sums add in the orders the rule names
(:mod:`quotaform.analytics.model`: ascending values within a broker's
bucket, then the brokers by name), one position of every run at a time
(:func:`_fold`), so they are equal bit for bit too. The quota each group is
held to is resolved in Python
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
from quotaform.analytics.local.checks import METRIC_CODES
from quotaform.analytics.local.reader import CodedUsage
from quotaform.analytics.model import (
    COLUMN_TYPES,
    DEFAULT_ALIGN_S,
    GROUP_COLUMNS,
    PERCENTILES,
    RANKING,
    UTILISATION_COLUMNS,
    align_micros,
)
from quotaform.kafka.entity import CLIENT_ID, IP, USER, Entity
from quotaform.kafka.keys import METRICS, enforcing_nodes
from quotaform.kafka.resolution import MetricTags, QuotaIndex, quota_for_tags

__all__ = [
    "Utilisation",
    "arrow_schema",
    "group_keys",
    "ranked_order",
    "resolutions",
    "sample_points",
    "utilisation",
]


def arrow_schema(columns: Sequence[str]) -> pa.Schema:
    """The Arrow schema of contract ``columns`` (:data:`~quotaform.analytics.model.COLUMN_TYPES`;
    timestamps UTC, microseconds)."""
    kinds = {
        "string": pa.string(),
        "double": pa.float64(),
        "int": pa.int32(),
        "long": pa.int64(),
        "boolean": pa.bool_(),
        "timestamp": pa.timestamp("us", tz="UTC"),
    }
    return pa.schema([(c, kinds[COLUMN_TYPES[c]]) for c in columns])


#: The columns a group is ordered by (``ip`` as ``""`` when none).
_ORDER = tuple("_ip" if c == "ip" else c for c in GROUP_COLUMNS)


@dataclass(frozen=True)
class Utilisation:
    """The utilisation of every observed group.

    Attributes:
        table: :data:`~quotaform.analytics.model.UTILISATION_COLUMNS` in
            order and types, one row per group, sorted as
            :func:`quotaform.analytics.engine.utilisation` sorts them.
        group: int64 per table row: its group's key (a usage row's key with
            the metric replaced by its quota key's code).
    """

    table: pa.Table
    group: np.ndarray


def _nullable(values: np.ndarray, present: np.ndarray, kind: pa.DataType) -> pa.Array:
    return pa.array(values, kind, mask=~present)


def _join(*columns: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise(*columns, _SEPARATOR)


#: Joins a resolution's parts into one dictionary key (a Kafka name holds no NUL).
_SEPARATOR = "\x00"
#: The quota key (by code, its index in :data:`_QUOTA_KEYS`) and whether the
#: metric is a usage (not a throttle time), by metric code.
_QUOTA_KEYS = tuple(sorted({key for key, _ in METRICS.values()}))
_KEY_OF_METRIC = np.array([_QUOTA_KEYS.index(METRICS[m][0]) for m in METRIC_CODES])
_USAGE_METRIC = np.array([METRICS[m][1] == "usage" for m in METRIC_CODES])
_LOW5 = 31


def group_keys(usage: CodedUsage) -> tuple[np.ndarray, np.ndarray]:
    """``(group key, is a usage sample)`` per usage row: the row's key with
    its metric replaced by the quota key it measures."""
    metric = usage.key & _LOW5
    return (usage.key & ~np.int64(_LOW5)) | _KEY_OF_METRIC[metric], _USAGE_METRIC[metric]


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


def _codes(column: pa.Array) -> tuple[np.ndarray, list[str]]:
    encoded = pc.dictionary_encode(column)
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), (
        encoded.dictionary.to_pylist()
    )


def resolutions(
    cluster: pa.Array,
    user: pa.Array,
    client_id: pa.Array,
    ip: pa.Array,
    quota_key: pa.Array,
    configs: Mapping[str, QuotaIndex],
) -> tuple[pa.Array, pa.Array, pa.Array]:
    """``quota_value``, ``level``, ``entity`` per group (``ip`` empty for a
    user/client-id group). The Spark engine runs :func:`utilisation`, and so
    this, in every partition (:mod:`quotaform.analytics.spark.partitions`).

    Resolved by :func:`~quotaform.kafka.resolution.quota_for_tags` once per
    distinct (cluster, key, tags), with every name the configuration does not
    name for that key replaced by one stand-in: the look-up compares names
    for equality only, so all such names get the same quota, level and
    entity (which cannot contain them). Brokers share the result too. The
    tags are :func:`~quotaform.analytics.engine.group_tags`' (the user
    decoded; an ip group has only its ip).
    """
    rows = len(cluster)
    places, place_names = _codes(_join(cluster, quota_key))
    places_of = [name.split(_SEPARATOR) for name in place_names]
    named = [_named(configs[c], key) for c, key in places_of]
    is_ip = ~_np(pc.equal(ip, ""))
    tags: dict[str, tuple[np.ndarray, list[str]]] = {}
    for etype, column in ((USER, user), (CLIENT_ID, client_id), (IP, ip)):
        codes, names = _codes(column)
        if etype == USER:  # the tags of a group: group_tags' rule, once per name
            names = [group_tags(name, "", None).user or "" for name in names]
        # kept[place, code]: the name is named for that (cluster, key), or empty.
        kept = np.array(
            [[not name or name in found.get(etype, ()) for name in names] for found in named],
            dtype=bool,
        ).reshape(len(named), len(names))
        stand_in = np.where(kept[places, codes], codes, len(names)) if rows else codes
        if etype != IP:
            stand_in = np.where(is_ip, -1, stand_in)  # an ip group carries no user/client tag
        tags[etype] = (stand_in + 1, [*names, _UNNAMED])
    unique, inverse = _distinct([places, *(codes for codes, _ in tags.values())])
    values: list[float | None] = []
    levels: list[int | None] = []
    entities: list[str | None] = []
    json_of: dict[Entity | None, str | None] = {}
    user_names, client_names, ip_names = (["", *names] for _, names in tags.values())
    for place, u, cid, address in unique.tolist():
        c, key = places_of[place]
        canonical = MetricTags(
            user=user_names[u], client_id=client_names[cid], ip=ip_names[address]
        )
        res = quota_for_tags(configs[c], canonical, key)
        if res.entity not in json_of:
            json_of[res.entity] = entity_json(res.entity)
        values.append(res.value)
        levels.append(res.level.number if res.level is not None else None)
        entities.append(json_of[res.entity])
    index = pa.array(inverse)
    return (
        pa.array(values, pa.float64()).take(index),
        pa.array(levels, pa.int32()).take(index),
        pa.array(entities, pa.string()).take(index),
    )


def _distinct(columns: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of non-negative integer columns (as rows of a 2-D
    array) and each row's index among them: packed into one int64 when they
    fit, else compared column by column."""
    widths = [max(int(c.max(initial=0)).bit_length(), 1) for c in columns]
    if sum(widths) > 63:
        unique, inverse = np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)
        return unique, inverse.reshape(-1)
    packed = np.zeros(len(columns[0]), dtype=np.int64)
    for column, width in zip(columns, widths, strict=True):
        packed = (packed << width) | column
    keys, inverse = np.unique(packed, return_inverse=True)
    parts = []
    for width in reversed(widths):
        parts.append(keys & ((1 << width) - 1))
        keys = keys >> width
    return np.stack(parts[::-1], axis=1), inverse.reshape(-1)


def _np(mask: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), dtype=bool)


def _sorted_by_key_then_value(
    keys: np.ndarray, values: np.ndarray, *carried: np.ndarray
) -> tuple[np.ndarray, ...]:
    """``keys``, ``values`` (and ``carried`` arrays, row for row) ordered by
    (key, value): a sort by value, then a stable sort by key (faster than
    ``numpy.lexsort`` on two keys)."""
    by_value = np.argsort(values)
    keys, values = keys[by_value], values[by_value]
    moved = [column[by_value] for column in carried]
    del by_value
    by_key = np.argsort(keys, kind="stable")
    return keys[by_key], values[by_key], *(column[by_key] for column in moved)


def _counts(keys: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """How many of ``keys`` equal each of the sorted ``groups``."""
    keys = np.sort(keys)
    return np.searchsorted(keys, groups, side="right") - np.searchsorted(keys, groups, side="left")


def _fold(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The sum of each run ``values[start : start + length]`` (``length`` >= 1),
    added left to right from 0.0 (:func:`~quotaform.analytics.model.fold_sum`'s
    order): the first value of every run, then the second of the runs that
    have one, ... (numpy's own sums add in blocks, in another order)."""
    total = values[starts] + 0.0  # 0.0 + v, as the fold starts (-0.0 becomes 0.0)
    active = np.flatnonzero(lengths > 1)
    step = 1
    while len(active):
        total[active] += values[starts[active] + step]
        step += 1
        active = active[lengths[active] > step]
    return total


def _runs(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, lengths)`` of the runs of equal rows in sorted ``columns``."""
    size = len(columns[0])
    change = np.zeros(size, dtype=bool)
    if size:
        change[0] = True
    for column in columns:
        change[1:] |= column[1:] != column[:-1]
    starts = np.flatnonzero(change)
    return starts, np.diff(np.append(starts, size))


def _stable_order(columns: Sequence[np.ndarray]) -> np.ndarray:
    """The stable permutation sorting rows by non-negative integer ``columns``
    (first column first): one stable argsort of the columns packed into an
    int64 when they fit, else ``numpy.lexsort`` (stable too)."""
    widths = [max(int(c.max(initial=0)).bit_length(), 1) for c in columns]
    if sum(widths) > 63:
        return np.lexsort(tuple(reversed(columns)))
    packed = np.zeros(len(columns[0]), dtype=np.int64)
    for column, width in zip(columns, widths, strict=True):
        packed <<= width
        packed |= column
    return np.argsort(packed, kind="stable")


@dataclass(frozen=True)
class _Cluster:
    """The cluster-wide figures per group row (see :func:`_cluster_figures`)."""

    brokers: np.ndarray
    samples: np.ndarray
    quantiles: list[np.ndarray]
    maxima: np.ndarray


def _cluster_figures(
    row: np.ndarray,
    values: np.ndarray,
    micros: np.ndarray,
    parts: Mapping[str, Any],
    quota_key: pa.Array,
    align_us: int,
) -> _Cluster:
    """Every group row's group over all brokers (same cluster, tags and key):
    the brokers with a row of it, and the quantiles of its usage summed
    across brokers per aligned bucket (:func:`quotaform.analytics.engine.cluster_figures`).

    Args:
        row, values, micros: the group row (index into ``parts``), value and
            time (microseconds, UTC) of every usage sample (no NaN), sorted
            by (row, value).
        parts: the group rows' ``cluster``, ``broker``, ``user``,
            ``client_id``, ``ip`` (``""`` for none).
        quota_key: each group row's quota key.
        align_us: the bucket, microseconds.
    """
    group, names = _codes(
        _join(parts["cluster"], parts["user"], parts["client_id"], parts["ip"], quota_key)
    )
    groups = len(names)
    broker_codes, broker_names = _codes(parts["broker"])
    by_name = sorted(range(len(broker_names)), key=broker_names.__getitem__)
    rank = np.empty(len(broker_names), dtype=np.int64)
    rank[by_name] = np.arange(len(broker_names))
    broker = rank[broker_codes] if len(broker_codes) else broker_codes
    first = int(micros.min(initial=0))
    bucket = micros - np.mod(micros, align_us)
    bucket -= first - first % align_us
    bucket //= align_us
    # (group, bucket, broker), each run still in value order (one broker's
    # samples of one group are one row's): a stable sort keeps it.
    order = _stable_order([group[row], bucket, broker[row]])
    row, bucket, values = row[order], bucket[order], values[order]
    del order
    sample_group, sample_broker = group[row], broker[row]
    del row
    starts, lengths = _runs(sample_group, bucket, sample_broker)
    means = _fold(values, starts, lengths) / lengths
    del values, sample_broker
    mean_group, mean_bucket = sample_group[starts], bucket[starts]
    del sample_group, bucket
    # The brokers' averages of a bucket, already in broker-name order: summed.
    starts, lengths = _runs(mean_group, mean_bucket)
    sums = _fold(means, starts, lengths)
    sum_group = mean_group[starts]
    del means, mean_group, mean_bucket
    sorted_groups, sorted_sums = _sorted_by_key_then_value(sum_group, sums)
    counts = np.bincount(sorted_groups, minlength=groups)
    firsts = np.cumsum(counts) - counts
    quantiles = _quantiles(sorted_sums, firsts, counts)
    maxima = sorted_sums[np.maximum(firsts + counts - 1, 0)] if len(sorted_sums) else counts * 0.0
    brokers = np.bincount(group, minlength=groups)
    return _Cluster(
        brokers=brokers[group],
        samples=counts[group],
        quantiles=[q[group] for q in quantiles],
        maxima=maxima[group],
    )


def _enforcing(quota_key: pa.Array, brokers: np.ndarray) -> np.ndarray:
    """:func:`~quotaform.kafka.keys.enforcing_nodes` per row, once per
    distinct (key, brokers)."""
    codes, names = _codes(quota_key)
    if not len(codes):
        return brokers
    unique, inverse = _distinct([codes, brokers])
    nodes = np.array([enforcing_nodes(names[k], int(n)) for k, n in unique.tolist()])
    return nodes[inverse]


@dataclass(frozen=True)
class _GroupStats:
    """Every observed group's own figures (one row per group, sorted by
    group key) and its samples sorted by group then value."""

    groups: np.ndarray
    samples: np.ndarray
    p50: np.ndarray
    p95: np.ndarray
    p99: np.ndarray
    maxima: np.ndarray
    throttles: np.ndarray
    over: np.ndarray
    sorted_rows: np.ndarray
    sorted_values: np.ndarray
    sorted_micros: np.ndarray


def _group_stats(usage: CodedUsage) -> _GroupStats:
    """The groups with a usage row (samples, or NaN only), each one's sample
    count (NaN left out), p50/p95/p99 and max, and its throttle-time samples
    (all, and those > 0)."""
    keys, is_usage = group_keys(usage)
    values = usage.value
    sample = is_usage & ~np.isnan(values)
    sorted_keys, sorted_values, sorted_micros = _sorted_by_key_then_value(
        keys[sample], values[sample], usage.timestamp[sample]
    )
    # Every group with a usage row: those with samples, and those with NaN only.
    starts_at = np.flatnonzero(np.diff(sorted_keys, prepend=~sorted_keys[:1]) != 0)
    groups = sorted_keys[starts_at]
    nan_only = keys[is_usage & ~sample]
    if len(nan_only):
        groups = np.union1d(groups, nan_only)
    starts = np.searchsorted(sorted_keys, groups, side="left")
    samples = np.searchsorted(sorted_keys, groups, side="right") - starts
    # The group row of every sorted sample, from the runs of equal keys.
    sorted_rows = np.repeat(
        np.searchsorted(groups, sorted_keys[starts_at]),
        np.diff(np.append(starts_at, len(sorted_keys))),
    )
    del sorted_keys, starts_at
    p50, p95, p99 = _quantiles(sorted_values, starts, samples)
    maxima = sorted_values[np.maximum(starts + samples - 1, 0)] if len(sorted_values) else p99
    throttle = ~is_usage
    throttles = _counts(keys[throttle], groups)
    over = _counts(keys[throttle & (values > 0)], groups)
    return _GroupStats(
        groups, samples, p50, p95, p99, maxima, throttles, over,
        sorted_rows, sorted_values, sorted_micros,
    )  # fmt: skip


def _one_broker_own(cluster: _Cluster, own: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """The cluster p50, p95, p99, sample count and max of every group: a group
    seen on one broker has its own figures (model.ONE_BROKER_FIGURES), the
    others the sums across brokers. ``own``: the same five per-broker arrays."""
    single = cluster.brokers == 1
    summed = (*cluster.quantiles, cluster.samples, cluster.maxima)
    return tuple(np.where(single, mine, theirs) for mine, theirs in zip(own, summed, strict=True))


def utilisation(
    usage: CodedUsage,
    configs: Mapping[str, QuotaIndex],
    *,
    align_s: float = DEFAULT_ALIGN_S,
) -> Utilisation:
    """The rows :func:`quotaform.analytics.engine.utilisation` computes from
    the same samples, as an Arrow table: per observed (cluster, broker,
    group, key) the governing quota, the usage's sample count (NaN left out),
    p50/p95/p99 and max, ``utilisation_p99``, and from the throttle-time
    samples (NaN counted, > 0 is throttled) ``throttled_share`` and
    ``censored``. A series with only throttle samples makes no row. Next to
    them the group's cluster-wide figures over every broker
    (:data:`~quotaform.analytics.model.CLUSTER_COLUMNS`). (Over 80 lines:
    half of them the table's columns named one by one, in the order of
    :data:`~quotaform.analytics.model.UTILISATION_COLUMNS`.)

    Args:
        usage: the coded usage of clusters that ``configs`` has.
        configs: cluster name -> its quota configuration.
        align_s: the bucket (seconds) the brokers' samples are aligned on.

    Raises:
        KeyError: a usage row's cluster is not in ``configs``.
        ValueError: ``align_s`` is not a positive duration.
    """
    align_us = align_micros(align_s)
    stats = _group_stats(usage)
    groups, samples, has = stats.groups, stats.samples, stats.samples > 0
    p50, p95, p99, maxima = stats.p50, stats.p95, stats.p99, stats.maxima
    throttles, over = stats.throttles, stats.over

    parts = usage.series(groups)
    quota_key = pa.array(_QUOTA_KEYS).take(pa.array(parts["metric"]))
    cluster = _cluster_figures(
        stats.sorted_rows, stats.sorted_values, stats.sorted_micros, parts, quota_key, align_us
    )
    del stats
    quota_value, level, entity = resolutions(
        parts["cluster"], parts["user"], parts["client_id"], parts["ip"], quota_key, configs
    )
    quota = quota_value.to_numpy(zero_copy_only=False)
    limited = ~np.isnan(quota)  # quota_value is null when unlimited
    c50, c95, c99, cluster_samples, cluster_max = _one_broker_own(
        cluster, (p50, p95, p99, samples, maxima)
    )
    summed = cluster_samples > 0
    ceiling = quota * _enforcing(quota_key, cluster.brokers)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = p99 / np.where(limited, quota, 1.0)
        share = over / np.maximum(throttles, 1)
        cluster_ratio = c99 / np.where(limited, ceiling, 1.0)
    double = pa.float64()
    columns: dict[str, Any] = {
        "cluster": parts["cluster"],
        "broker": parts["broker"],
        "user": parts["user"],
        "client_id": parts["client_id"],
        "ip": pc.if_else(pc.equal(parts["ip"], ""), pa.scalar(None, pa.string()), parts["ip"]),
        "quota_key": quota_key,
        "quota_value": quota_value,
        "level": level,
        "entity": entity,
        "samples": pa.array(samples.astype(np.int64)),
        "p50": _nullable(p50, has, double),
        "p95": _nullable(p95, has, double),
        "p99": _nullable(p99, has, double),
        "max": _nullable(maxima, has, double),
        "utilisation_p99": _nullable(ratio, has & limited, double),
        "throttled_share": _nullable(share, throttles > 0, double),
        "censored": pa.array(over > 0),
        "brokers_observed": pa.array(cluster.brokers.astype(np.int32)),
        "cluster_samples": pa.array(cluster_samples.astype(np.int64)),
        "cluster_p50": _nullable(c50, summed, double),
        "cluster_p95": _nullable(c95, summed, double),
        "cluster_p99": _nullable(c99, summed, double),
        "cluster_max": _nullable(cluster_max, summed, double),
        "cluster_ceiling": _nullable(ceiling, limited, double),
        "cluster_utilisation_p99": _nullable(cluster_ratio, summed & limited, double),
    }
    schema = arrow_schema(UTILISATION_COLUMNS)
    table = pa.table([columns[c] for c in UTILISATION_COLUMNS], schema=schema)
    ordered = pc.sort_indices(
        table.append_column("_ip", parts["ip"]), sort_keys=[(c, "ascending") for c in _ORDER]
    )
    return Utilisation(
        table=table.take(ordered), group=groups[ordered.to_numpy(zero_copy_only=False)]
    )


def ranked_order(table: pa.Table, command: str = "utilisation") -> np.ndarray:
    """Row indices of a table in :data:`~quotaform.analytics.model.RANKING`'s
    order (a descending column's nulls last, an ascending one's first)."""
    columns: dict[str, pa.Array] = {}
    keys: list[tuple[str, str]] = []
    for column, descending in RANKING[command]:
        values = table.column(column)
        if descending:
            columns[f"_null_{column}"] = pc.is_null(values)
            keys.append((f"_null_{column}", "ascending"))
        columns[column] = values
        keys.append((column, "descending" if descending else "ascending"))
    ordered = pc.sort_indices(pa.table(columns), sort_keys=keys, null_placement="at_start")
    return ordered.to_numpy(zero_copy_only=False)


def sample_points(
    usage: CodedUsage, groups: Sequence[int]
) -> dict[int, list[tuple[datetime, float]]]:
    """The usage samples (NaN left out) of the given group keys
    (:attr:`Utilisation.group`), keyed by their position in ``groups``:
    ``(time (UTC), value)`` in row order."""
    if not groups:
        return {}
    wanted = np.asarray(groups, dtype=np.int64)
    keys, is_usage = group_keys(usage)
    rows = np.flatnonzero(np.isin(keys, wanted) & is_usage & ~np.isnan(usage.value))
    position = {int(g): i for i, g in enumerate(wanted)}
    times = pa.array(usage.timestamp[rows], pa.timestamp("us", "UTC")).to_pylist()
    points: dict[int, list[tuple[datetime, float]]] = {}
    for group, when, value in zip(
        keys[rows].tolist(), times, usage.value[rows].tolist(), strict=True
    ):
        points.setdefault(position[group], []).append((when, value))
    return points
