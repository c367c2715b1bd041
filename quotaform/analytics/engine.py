"""The pure-Python engine of the fleet analytics: explain's resolution
(:mod:`quotaform.kafka.resolution`) applied to observed quota groups.

Each function takes and returns plain rows (dicts keyed by the contract's
column names of :mod:`quotaform.analytics.model`), sorted, so its output can
be compared with the Spark engine's row for row. The local engine
(:mod:`quotaform.analytics.local`) computes the utilisation rows from Arrow
with the same rules (:func:`utilisation` stays for row lists and as its
reference in tests) and runs :func:`impact` and :func:`recommend` on them.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from quotaform.analytics.model import (
    CENSORED_NOTE,
    DEFAULT_ALIGN_S,
    DEFAULT_HEADROOM,
    DEFAULT_WINDOW_S,
    PERCENTILES,
    UsageRow,
    align_micros,
    aligned,
    epoch_micros,
    fold_sum,
    percentile,
)
from quotaform.kafka.entity import Entity
from quotaform.kafka.impact import (
    demand_cut,
    first_throttle_ms,
    request_size,
    share_over,
    steady_throttle_ms,
    throughput_after,
)
from quotaform.kafka.keys import QUOTA_KEYS, enforcing_nodes
from quotaform.kafka.metrics import unsanitize_user
from quotaform.kafka.resolution import (
    GROUP_MERGES,
    GROUP_SAME,
    MetricTags,
    Principal,
    QuotaIndex,
    Resolution,
    group_change,
    own_entity,
    quota_for_tags,
    resolve,
    variants,
)
from quotaform.kafka.units import format_quota_value, readable_quota

__all__ = [
    "ceiling",
    "cluster_figures",
    "entity_json",
    "group_tags",
    "impact",
    "recommend",
    "representative",
    "tags_after_text",
    "utilisation",
]

Row = dict[str, Any]
_GroupKey = tuple[str, str, str, str, str | None, str]
#: A group over every broker: (cluster, user, client_id, ip, quota_key).
_ClusterKey = tuple[str, str, str, str | None, str]


def entity_json(entity: Entity | None) -> str | None:
    """The source entity as the plan JSON's entity object, as JSON text
    (``{"user":"alice","client-id":null}``), ``None`` when unlimited."""
    if entity is None:
        return None
    return json.dumps(entity.as_dict(), separators=(",", ":"), ensure_ascii=False)


def group_tags(user: str, client_id: str, ip: str | None) -> MetricTags:
    """The quota group of an observed series: its tags, the user URL-decoded
    (``Sanitizer.sanitize`` undone) so it compares with configured names."""
    if ip:
        return MetricTags(user="", client_id="", ip=ip)
    return MetricTags(user=unsanitize_user(user) if user else "", client_id=client_id)


def representative(tags: MetricTags) -> Principal:
    """A principal standing for every connection of a group: an empty tag
    means the group spans every name of that type (unknown, ``None``)."""
    if tags.ip:
        return Principal(ip=tags.ip)
    return Principal(user=tags.user or None, client_id=tags.client_id or None)


def _resolution_fields(res: Resolution) -> dict[str, Any]:
    return {
        "quota_value": res.value,
        "level": res.level.number if res.level is not None else None,
        "entity": entity_json(res.entity),
    }


def _samples_by_group(
    rows: Iterable[UsageRow],
) -> tuple[
    dict[_GroupKey, list[float]],
    dict[_GroupKey, list[float]],
    dict[_ClusterKey, dict[str, list[tuple[int, float]]]],
]:
    """The samples of every (cluster, broker, group, key): usage (NaN left
    out; a group with only NaN has an empty list), throttle-time, and the
    timed usage per broker of each cluster-wide group."""
    usage: dict[_GroupKey, list[float]] = defaultdict(list)
    throttle: dict[_GroupKey, list[float]] = defaultdict(list)
    timed: dict[_ClusterKey, dict[str, list[tuple[int, float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for row in rows:
        key = (row.cluster, row.broker, row.user, row.client_id, row.ip, row.quota_key)
        if row.kind == "usage":
            if not math.isnan(row.value):
                usage[key].append(row.value)
                timed[_cluster_key(key)][row.broker].append(
                    (epoch_micros(row.timestamp), row.value)
                )
            else:
                usage.setdefault(key, [])
        else:
            throttle[key].append(row.value)
    return usage, throttle, timed


def utilisation(
    rows: Iterable[UsageRow],
    configs: Mapping[str, QuotaIndex],
    *,
    align_s: float = DEFAULT_ALIGN_S,
) -> list[Row]:
    """Per observed (cluster, broker, group, key): the quota the broker holds
    it to (from the group's tags, :func:`~quotaform.kafka.resolution.quota_for_tags`),
    usage quantiles (NaN samples left out), ``utilisation_p99``, and from the
    group's ``throttle-time`` samples the share > 0 and ``censored``; and the
    group's cluster-wide figures over every broker (:func:`cluster_figures`,
    :data:`~quotaform.analytics.model.CLUSTER_COLUMNS`).

    Args:
        rows: usage samples of clusters that ``configs`` has, one per
            (series, time).
        configs: cluster name -> its quota configuration.
        align_s: the bucket (seconds) the brokers' samples are aligned on.

    Raises:
        ValueError: ``align_s`` is not a positive duration.
    """
    align_us = align_micros(align_s)
    usage, throttle, timed = _samples_by_group(rows)
    brokers: dict[_ClusterKey, int] = defaultdict(int)
    for key in usage:
        brokers[_cluster_key(key)] += 1
    cluster: dict[_ClusterKey, list[float]] = {
        group: cluster_figures(samples, align_us) for group, samples in timed.items()
    }
    out = []
    for key, values in usage.items():
        cluster_name, broker, user, client_id, ip, quota_key = key
        res = quota_for_tags(configs[cluster_name], group_tags(user, client_id, ip), quota_key)
        throttles = throttle.get(key, [])
        over = sum(1 for v in throttles if v > 0)
        p50, p95, p99 = (percentile(values, p) if values else None for p in PERCENTILES)
        observed = brokers[_cluster_key(key)]
        # On one broker: its own samples (model.ONE_BROKER_FIGURES).
        sums = cluster.get(_cluster_key(key), []) if observed > 1 else values
        c50, c95, c99 = (percentile(sums, p) if sums else None for p in PERCENTILES)
        top = ceiling(quota_key, res.value, observed)
        out.append(
            {
                "cluster": cluster_name,
                "broker": broker,
                "user": user,
                "client_id": client_id,
                "ip": ip,
                "quota_key": quota_key,
                **_resolution_fields(res),
                "samples": len(values),
                "p50": p50,
                "p95": p95,
                "p99": p99,
                "max": max(values) if values else None,
                "utilisation_p99": (
                    p99 / res.value if p99 is not None and res.value is not None else None
                ),
                "throttled_share": over / len(throttles) if throttles else None,
                "censored": over > 0,
                "brokers_observed": observed,
                "cluster_samples": len(sums),
                "cluster_p50": c50,
                "cluster_p95": c95,
                "cluster_p99": c99,
                "cluster_max": max(sums) if sums else None,
                "cluster_ceiling": top,
                "cluster_utilisation_p99": (
                    c99 / top if c99 is not None and top is not None else None
                ),
            }
        )
    return sorted(out, key=_group_order)


def _cluster_key(key: _GroupKey) -> _ClusterKey:
    cluster, _broker, user, client_id, ip, quota_key = key
    return (cluster, user, client_id, ip, quota_key)


def cluster_figures(
    by_broker: Mapping[str, Sequence[tuple[int, float]]], align_us: int
) -> list[float]:
    """A group's usage summed across brokers, one sum per aligned bucket
    (in bucket order): each broker's samples in the bucket averaged (added
    in ascending order), the averages added in broker-name order
    (:func:`~quotaform.analytics.model.fold_sum`); a broker without a sample
    in a bucket adds nothing to it.

    Args:
        by_broker: broker -> ``(microseconds since the epoch, value)`` of the
            group's usage samples there (no NaN), one per time.
        align_us: the bucket, microseconds (:func:`~quotaform.analytics.model.align_micros`).
    """
    buckets: dict[int, dict[str, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    for broker, samples in by_broker.items():
        for when, value in samples:
            buckets[aligned(when, align_us)][broker].append((when, value))
    sums = []
    for bucket in sorted(buckets):
        brokers = buckets[bucket]
        means = []
        for broker in sorted(brokers):
            values = sorted(v for _, v in brokers[broker])
            means.append(fold_sum(values) / len(values))
        sums.append(fold_sum(means))
    return sums


def ceiling(quota_key: str, quota: float | None, brokers: int) -> float | None:
    """What a group may use across the cluster: its per-broker ``quota`` on
    each of the ``brokers`` it was observed on that enforce it at once
    (:func:`~quotaform.kafka.keys.enforcing_nodes`); ``None`` when unlimited."""
    return None if quota is None else quota * enforcing_nodes(quota_key, brokers)


def _group_order(row: Row) -> tuple[Any, ...]:
    return (
        row["cluster"],
        row["broker"],
        row["user"],
        row["client_id"],
        row["ip"] or "",
        row["quota_key"],
    )


def tags_after_text(res: Resolution) -> str:
    """The group's tags after a change, ``*`` where they follow each
    connection's own name (the group divides by it): ``user=alice,client-id=*``."""
    tags = res.tags
    if tags.ip:
        return f"ip={tags.ip}"
    parts = []
    for name, value in (("user", tags.user), ("client-id", tags.client_id)):
        if value is None:
            parts.append(f"{name}=*")
        elif value:
            parts.append(f"{name}={value}")
    return ",".join(parts)


def _impact_row(
    row: Row,
    res: Resolution,
    change: str,
    observed: float,
    typical: float,
    window_s: float,
    request_sizes: Mapping[str, float],
) -> Row:
    """One group's row of :func:`impact`: its quota before and after, and
    what the observed demand (``observed``, the p99) meets under the new one;
    ``typical`` (the p50) is what its clients measure while not held."""
    quota_key = row["quota_key"]
    size, source = request_size(
        quota_key, res.value, given=request_sizes.get(quota_key), window_s=window_s
    )
    predicted = steady_throttle_ms(quota_key, observed, res.value, size, window_s=window_s)
    level_after = res.level.number if res.level is not None else None
    entity_after = entity_json(res.entity)
    return {
        "cluster": row["cluster"],
        "broker": row["broker"],
        "user": row["user"],
        "client_id": row["client_id"],
        "ip": row["ip"],
        "quota_key": row["quota_key"],
        "quota_before": row["quota_value"],
        "quota_after": res.value,
        "level_before": row["level"],
        "level_after": level_after,
        "entity_before": row["entity"],
        "entity_after": entity_after,
        "group_change": change,
        "tags_after": tags_after_text(res),
        "p99": row["p99"],
        "predicted_throttle_ms": predicted,
        "throttled_before": bool(row["censored"]),
        "newly_throttled": predicted > 0 and not row["censored"],
        "first_throttle_ms": first_throttle_ms(
            quota_key, observed, res.value, size, window_s=window_s
        ),
        "throughput_after": throughput_after(
            quota_key, observed, res.value, size, window_s=window_s, typical=typical
        ),
        "demand_cut": demand_cut(observed, res.value),
        "request_bytes": size,
        "request_bytes_source": source,
        "brokers_observed": row["brokers_observed"],
        "cluster_p99": row["cluster_p99"],
        "cluster_ceiling_before": ceiling(quota_key, row["quota_value"], row["brokers_observed"]),
        "cluster_ceiling_after": ceiling(quota_key, res.value, row["brokers_observed"]),
        "p50": row["p50"],
    }


def impact(
    util: Sequence[Row],
    after: Mapping[str, QuotaIndex],
    *,
    window_s: float = DEFAULT_WINDOW_S,
    request_sizes: Mapping[str, float] | None = None,
) -> list[Row]:
    """The rows of ``util`` (made under the configuration before the change)
    whose effective quota, source or quota group changes under ``after``,
    with what the observed p99 (the demand O) meets there
    (:mod:`quotaform.kafka.impact`): ``throughput_after``, what the group's
    clients measure themselves (its typical rate, the p50, while O <= T; the
    held rate, T or whole fetches for consumers, when O > T, at most the
    p50),
    ``demand_cut``, the steady-state mean throttle the broker's
    ``throttle-time`` metric reports (``predicted_throttle_ms``, ``S / T``)
    for requests of ``request_bytes`` (S: ``request_sizes[key]`` when given,
    else the key's default; ``request_bytes_source`` says which), and the
    first throttle of a client still sending at O (``first_throttle_ms``).
    Next to them the group's cluster-wide figures: ``brokers_observed``,
    ``cluster_p99``, and the quota before and after times the brokers that
    enforce it (``cluster_ceiling_before``, ``cluster_ceiling_after``:
    :func:`ceiling`).

    ``group_change``: ``none`` (same tags), ``splits`` (the group
    divides by client id or user: broker metrics cannot split its usage, so
    the prediction uses the whole group's), ``merges`` (it joins a broader
    group: the observed p99 of every group merging into the same tags on the
    broker is summed, an upper bound; their p50 too). Sorted: newly throttled first, then by
    predicted throttle, then by group.
    """
    resolved = []
    for row in util:
        tags = group_tags(row["user"], row["client_id"], row["ip"])
        principal = representative(tags)
        index = after[row["cluster"]]
        res = resolve(index, principal, row["quota_key"])
        split = bool(variants(index, principal, row["quota_key"]))
        resolved.append((row, tags, res, group_change(tags, res.tags, split=split)))
    merged: dict[tuple[str, str, str, str], float] = defaultdict(float)
    merged_typical: dict[tuple[str, str, str, str], float] = defaultdict(float)
    for row, _, res, _change in resolved:
        tags_key = (row["cluster"], row["broker"], row["quota_key"], tags_after_text(res))
        merged[tags_key] += row["p99"] or 0.0
        merged_typical[tags_key] += row["p50"] or 0.0
    out = []
    for row, _tags, res, change in resolved:
        level_after = res.level.number if res.level is not None else None
        entity_after = entity_json(res.entity)
        if (
            change == GROUP_SAME
            and res.value == row["quota_value"]
            and level_after == row["level"]
            and entity_after == row["entity"]
        ):
            continue
        key = (row["cluster"], row["broker"], row["quota_key"], tags_after_text(res))
        observed = merged[key] if change == GROUP_MERGES else (row["p99"] or 0.0)
        typical = merged_typical[key] if change == GROUP_MERGES else (row["p50"] or 0.0)
        out.append(_impact_row(row, res, change, observed, typical, window_s, request_sizes or {}))
    return sorted(
        out, key=lambda r: (not r["newly_throttled"], -r["predicted_throttle_ms"], _group_order(r))
    )


def recommend(
    util: Sequence[Row],
    *,
    quantile: str = "p99",
    headroom: float = DEFAULT_HEADROOM,
    request_sizes: Mapping[str, float] | None = None,
) -> list[Row]:
    """Per observed (cluster, group, key), over every broker: a per-broker
    quota (Kafka enforces it on each broker, :data:`~quotaform.kafka.keys.KeySpec`'s
    ``enforced_on``) of ``quantile`` x ``headroom`` of the busiest broker, rounded up to readable
    units (:func:`~quotaform.kafka.units.readable_quota`), for the entity
    of the group's own shape (:func:`~quotaform.kafka.resolution.own_entity`:
    the group keeps its tags).

    A censored group (throttled in the range) was held near its quota: its
    true demand is unknown, so the recommendation is never below the current
    quota x ``headroom`` and says so in ``note``.

    What the recommendation would have caused over the observed range
    (:mod:`quotaform.kafka.impact`): ``share_over``, the share of samples
    above it, estimated from the busiest broker's p50, p95, p99 and max;
    ``throttle_at_max_ms``, the steady-state throttle of a demand at the
    observed max, for requests of ``request_bytes`` (as :func:`impact`).
    Next to them what that means across the cluster: ``brokers_observed``,
    the group's ``cluster_p99`` (its usage summed across brokers), and the
    current and the recommended quota on each of those brokers
    (``cluster_ceiling``, ``recommended_cluster_ceiling``: :func:`ceiling`).
    """
    by_group: dict[tuple[str, str, str, str | None, str], list[Row]] = defaultdict(list)
    for row in util:
        by_group[
            (row["cluster"], row["user"], row["client_id"], row["ip"], row["quota_key"])
        ].append(row)
    out = []
    for (cluster, user, client_id, ip, key), rows in by_group.items():
        peaks = [r[quantile] for r in rows if r[quantile] is not None]
        if not peaks:
            continue
        peak = max(peaks)
        quota = rows[0]["quota_value"]
        censored = any(r["censored"] for r in rows)
        target = _target(peak, quota if censored else None, headroom)
        note = CENSORED_NOTE if censored else None
        recommended = readable_quota(key, target)
        points = tuple(
            (share, _max_of(rows, column))
            for share, column in ((0.5, "p50"), (0.95, "p95"), (0.99, "p99"), (1.0, "max"))
        )
        size, source = request_size(key, recommended, given=(request_sizes or {}).get(key))
        top = points[-1][1]
        brokers = rows[0]["brokers_observed"]
        out.append(
            {
                "cluster": cluster,
                "user": user,
                "client_id": client_id,
                "ip": ip,
                "quota_key": key,
                "quota_value": quota,
                "peak_p99": peak,
                "recommended": recommended,
                "recommended_text": format_quota_value(key, recommended),
                "entity": entity_json(own_entity(group_tags(user, client_id, ip))),
                "censored": censored,
                "note": note,
                "share_over": share_over(recommended, points),
                "throttle_at_max_ms": (
                    steady_throttle_ms(key, top, recommended, size) if top is not None else None
                ),
                "request_bytes": size,
                "request_bytes_source": source,
                "brokers_observed": brokers,
                "cluster_p99": rows[0]["cluster_p99"],
                "cluster_ceiling": ceiling(key, quota, brokers),
                "recommended_cluster_ceiling": ceiling(key, recommended, brokers),
            }
        )
    return sorted(
        out, key=lambda r: (r["cluster"], r["user"], r["client_id"], r["ip"] or "", r["quota_key"])
    )


def _target(peak: float, held_at: float | None, headroom: float) -> float:
    """``peak`` x ``headroom``; a group held at quota ``held_at`` (censored:
    its true demand is unknown) is never recommended below ``held_at`` x
    ``headroom``."""
    target = peak * headroom
    return target if held_at is None else max(target, held_at * headroom)


def _max_of(rows: Sequence[Row], column: str) -> float | None:
    """The largest known ``column`` over a group's brokers (``None``: none known)."""
    values = [r.get(column) for r in rows]
    known = [v for v in values if v is not None and not math.isnan(v)]
    return max(known) if known else None


def unit_of(key: str) -> str:
    """The unit of a quota key's values."""
    return QUOTA_KEYS[key].unit
