"""Kafka's rules as Spark column expressions, generated from the tables of
:mod:`quotaform.kafka` (never written out a second time): readable rounding
and unit formatting (:mod:`~quotaform.kafka.units`), the throttle formula and
its caps (:mod:`~quotaform.kafka.throttle`), the steady state after a
change (:mod:`~quotaform.kafka.impact`), user-tag decoding
(:mod:`~quotaform.kafka.metrics`), the broker's step-1 tags, the quota-group
changes and a group's own entity (:mod:`~quotaform.kafka.resolution`).

Each function takes and returns :class:`~pyspark.sql.Column` values and
answers as its Python counterpart does, row for row: the conformance cases
(``tests/conformance/units_throttle_cases.yaml``) run through both.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from quotaform.kafka.entity import CLIENT_ID, USER, shape_name
from quotaform.kafka.impact import (
    SOURCE_DEFAULT,
    SOURCE_FETCH_CAP,
    SOURCE_GIVEN,
    STEADY_RULES,
)
from quotaform.kafka.keys import AT_ONCE, QUOTA_KEYS
from quotaform.kafka.resolution import (
    GROUP_CHANGES,
    OWN_LEVELS,
    TAG_LEVELS,
    TAGS_BY_MASK,
    UNMATCHED_TAG_TYPES,
)
from quotaform.kafka.throttle import (
    DEFAULT_QUOTA_WINDOW_S,
    QUOTA_WINDOW_SIZE_S,
    THROTTLE_CAP_MS,
    THROTTLE_RULES,
)
from quotaform.kafka.units import (
    BINARY_UNITS,
    FORMAT_DECIMALS,
    FORMAT_UNITS,
    FORMAT_UNITS_FROM,
    READABLE_EPSILON,
    READABLE_FINE_BELOW,
    READABLE_FINE_STEPS,
    READABLE_STEPS_PER_UNIT,
    UNIT_SUFFIX,
)

__all__ = [
    "demand_cut",
    "enforcing_nodes",
    "first_throttle_ms",
    "group_change",
    "java_round",
    "own_entity_json",
    "quota_text",
    "readable_quota",
    "refused_fetch_ms",
    "request_size",
    "share_over",
    "steady_throttle_ms",
    "step1_tag",
    "throttle_time_ms",
    "throughput_after",
    "user_name",
    "whole_fetch_rate",
]


#: The units of the quota keys, in key order.
_UNITS = tuple(dict.fromkeys(s.unit for s in QUOTA_KEYS.values()))


def _keys_with_unit(unit: str) -> list[str]:
    return [k for k, s in QUOTA_KEYS.items() if s.unit == unit]


def _by_unit(key: Column, per_unit: Mapping[str, Column]) -> Column:
    """``per_unit[unit of key]``; null for a key that is not a quota key."""
    expr: Column | None = None
    for unit, value in per_unit.items():
        cond = key.isin(_keys_with_unit(unit))
        expr = F.when(cond, value) if expr is None else expr.when(cond, value)
    assert expr is not None
    return expr


# ------------------------------------------------------------------ units


def readable_quota(key: Column, value: Column) -> Column:
    """:func:`quotaform.kafka.units.readable_quota` (double ``value`` in the
    unit of the quota key ``key``): a double, rounded up."""
    eps = F.lit(READABLE_EPSILON)

    def steps(per: int) -> Column:
        return F.greatest(F.lit(1 / per), F.ceil(value * F.lit(per) - eps) / F.lit(per))

    per_unit = {unit: steps(per) for unit, per in READABLE_STEPS_PER_UNIT.items()}
    byte_expr = per_unit["bytes/s"]
    for _, size in reversed(BINARY_UNITS):  # the largest unit reached wins: built inside out
        step = F.when(
            value < READABLE_FINE_BELOW * size, F.lit(size / READABLE_FINE_STEPS)
        ).otherwise(F.lit(float(size)))
        byte_expr = F.when(value >= size, F.ceil(value / step - eps) * step).otherwise(byte_expr)
    per_unit["bytes/s"] = byte_expr
    return _by_unit(key, per_unit).cast("double")


def _plain(value: Column) -> Column:
    """A whole double without ``.0``; others as Spark writes a double (see
    :func:`quota_text`)."""
    whole = value == F.floor(value)
    return F.when(whole, F.floor(value).cast("long").cast("string")).otherwise(value.cast("string"))


def quota_text(key: Column, value: Column) -> Column:
    """:func:`quotaform.kafka.units.format_quota_value` for finite values:
    a whole byte rate from :data:`~quotaform.kafka.units.FORMAT_UNITS_FROM`
    in the first unit of :data:`~quotaform.kafka.units.FORMAT_UNITS` where it
    is exact with at most :data:`~quotaform.kafka.units.FORMAT_DECIMALS`
    decimals, else the plain number, with the unit's suffix (``%``).

    Non-whole values are written as Spark casts a double to text (Java's
    ``Double.toString``): Python's ``repr`` for the tenths a recommendation
    holds (``2.1``), not for every double (``1.0E-5``, ``1.23456785E7``).
    ``value`` appears in the expression some 60 times: pass a column, not a
    computation."""
    scale = 10**FORMAT_DECIMALS
    in_unit: Column = F.lit(None).cast("string")
    for name, size in reversed(FORMAT_UNITS):  # the first unit that fits wins: inside out
        scaled = (value * scale / size).cast("long")
        exact = (value >= size) & (F.pmod(value * scale, F.lit(float(size))) == 0)
        whole = F.floor(scaled / scale).cast("long").cast("string")
        frac = F.regexp_replace(
            F.lpad(F.pmod(scaled, F.lit(scale)).cast("string"), FORMAT_DECIMALS, "0"), "0+$", ""
        )
        shown = F.when(frac == "", whole).otherwise(F.concat(whole, F.lit("."), frac))
        in_unit = F.when(exact, F.concat(shown, F.lit(name))).otherwise(in_unit)
    in_units = (
        key.isin(_keys_with_unit("bytes/s"))
        & (value >= FORMAT_UNITS_FROM)
        & (value == F.floor(value))
    )
    suffix = _by_unit(key, {unit: F.lit(UNIT_SUFFIX.get(unit, "")) for unit in _UNITS})
    return F.concat(F.coalesce(F.when(in_units, in_unit), _plain(value)), suffix)


# ------------------------------------------------------------------ throttling


def java_round(value: Column) -> Column:
    """:func:`quotaform.kafka.throttle.java_round`: Java's ``Math.round`` of a
    double (halves up, exact), as a double."""
    whole = F.floor(value).cast("double")
    return F.when(value - whole >= F.lit(0.5), whole + F.lit(1.0)).otherwise(whole)


def throttle_time_ms(key: Column, observed: Column, quota: Column, *, window_s: float) -> Column:
    """:func:`quotaform.kafka.throttle.throttle_time_ms`: ``Math.round((O - T)
    / T * W_ms)`` when O > T, capped for the keys :data:`THROTTLE_RULES`
    marks, 0.0 when O <= T or the quota is null (unlimited) or <= 0."""
    throttle = _capped(key, java_round((observed - quota) / quota * F.lit(window_s * 1000.0)))
    return (
        F.when(quota.isNull() | (quota <= 0) | (observed <= quota), F.lit(0.0))
        .otherwise(throttle)
        .cast("double")
    )


def _capped(key: Column, throttle: Column) -> Column:
    capped_keys = [k for k, rule in THROTTLE_RULES.items() if rule.capped]
    return F.when(key.isin(capped_keys), F.least(throttle, F.lit(THROTTLE_CAP_MS))).otherwise(
        throttle
    )


# ------------------------------------------------------------------ after a change


def request_size(
    key: Column, quota: Column, *, given: Mapping[str, float], window_s: float
) -> tuple[Column, Column]:
    """:func:`quotaform.kafka.impact.request_size`: S (``given[key]``, else
    the key's default of :data:`STEADY_RULES`, at most the fetch cap
    ``T x (W - size)`` for the fetch-capped keys) and its source."""
    chosen: Column | None = None
    source: Column | None = None
    for k, rule in STEADY_RULES.items():
        size, src = (given[k], SOURCE_GIVEN) if k in given else (rule.default_size, SOURCE_DEFAULT)
        cond = key == k
        chosen = (
            F.when(cond, F.lit(float(size)))
            if chosen is None
            else chosen.when(cond, F.lit(float(size)))
        )
        source = F.when(cond, F.lit(src)) if source is None else source.when(cond, F.lit(src))
    assert chosen is not None and source is not None
    capped_keys = [k for k, rule in STEADY_RULES.items() if rule.fetch_capped]
    cap = quota * F.lit(window_s - QUOTA_WINDOW_SIZE_S)
    at_cap = key.isin(capped_keys) & quota.isNotNull() & (quota > 0) & (cap < chosen)
    return (
        F.when(at_cap, cap).otherwise(chosen).cast("double"),
        F.when(at_cap, F.lit(SOURCE_FETCH_CAP)).otherwise(source),
    )


def _limited(observed: Column, quota: Column) -> Column:
    return F.coalesce(quota.isNotNull() & (quota > 0) & (observed > quota), F.lit(False))


def whole_fetch_rate(quota: Column, size: Column, *, window_s: float) -> Column:
    """:func:`quotaform.kafka.impact.whole_fetch_rate`: ``k x S / (X x
    E[ceil(L / X)])`` (``k = max(1, floor(T x W' / S))``, ``W' = window_s -
    quota.window.size.seconds / 2``, ``X = (k + 1) x S / T - W'``, L uniform
    over the window's last sample), at most T, term for term."""
    held, fit = _whole_fetches(quota, size, window_s)
    refused = (fit + F.lit(1.0)) * size / quota - held
    first, last = window_s - QUOTA_WINDOW_SIZE_S, window_s
    asks = (_ceil_integral(F.lit(last), refused) - _ceil_integral(F.lit(first), refused)) / F.lit(
        last - first
    )
    return F.least(quota, fit * size / (refused * asks))


def _ceil_integral(upto: Column, step: Column) -> Column:
    """:func:`quotaform.kafka.impact._ceil_integral`, term for term."""
    n = F.floor(upto / step).cast("double")
    return step * n * (n + F.lit(1.0)) / F.lit(2.0) + (n + F.lit(1.0)) * (upto - n * step)


def _whole_fetches(quota: Column, size: Column, window_s: float) -> tuple[Column, Column]:
    """W' and k (a double) of :func:`quotaform.kafka.impact.whole_fetch_rate`."""
    held = F.lit(window_s - QUOTA_WINDOW_SIZE_S / 2)
    return held, F.greatest(F.lit(1.0), F.floor(quota * held / size).cast("double"))


def refused_fetch_ms(quota: Column, size: Column, *, window_s: float) -> Column:
    """:func:`quotaform.kafka.impact.refused_fetch_ms`: ``Math.round(((k + 1) x
    S / T - W') x 1000)``."""
    held, fit = _whole_fetches(quota, size, window_s)
    return java_round(((fit + F.lit(1.0)) * size / quota - held) * F.lit(1000.0))


def throughput_after(
    key: Column,
    observed: Column,
    quota: Column,
    size: Column,
    *,
    window_s: float,
    typical: Column | None = None,
) -> Column:
    """:func:`quotaform.kafka.impact.throughput_after`: ``typical`` (``observed``
    when not given) when unlimited or ``observed`` <= T; else the held rate
    (T, or :func:`whole_fetch_rate` for the whole-request keys of
    :data:`STEADY_RULES`), at most ``typical``."""
    whole = [k for k, rule in STEADY_RULES.items() if rule.whole_requests]
    rate = observed if typical is None else typical
    held = F.when(key.isin(whole) & (size > 0), whole_fetch_rate(quota, size, window_s=window_s))
    held = held.otherwise(quota)
    return F.when(_limited(observed, quota), F.least(rate, held)).otherwise(rate).cast("double")


def demand_cut(observed: Column, quota: Column) -> Column:
    """:func:`quotaform.kafka.impact.demand_cut`: ``1 - T / O`` when O > T, else 0.0."""
    return (
        F.when(_limited(observed, quota) & (observed > 0), F.lit(1.0) - quota / observed)
        .otherwise(F.lit(0.0))
        .cast("double")
    )


def steady_throttle_ms(
    key: Column,
    observed: Column,
    quota: Column,
    size: Column,
    *,
    window_s: float = DEFAULT_QUOTA_WINDOW_S,
) -> Column:
    """:func:`quotaform.kafka.impact.steady_throttle_ms`: ``Math.round(S / T x
    1000)`` when O > T (:func:`refused_fetch_ms` for the whole-request keys of
    :data:`STEADY_RULES`), capped for the keys :data:`THROTTLE_RULES` marks,
    else 0.0."""
    whole = [k for k, rule in STEADY_RULES.items() if rule.whole_requests]
    held = F.when(
        key.isin(whole) & (size > 0), refused_fetch_ms(quota, size, window_s=window_s)
    ).otherwise(java_round(size / quota * F.lit(1000.0)))
    return (
        F.when(_limited(observed, quota), _capped(key, held)).otherwise(F.lit(0.0)).cast("double")
    )


def first_throttle_ms(
    key: Column, observed: Column, quota: Column, size: Column, *, window_s: float
) -> Column:
    """:func:`quotaform.kafka.impact.first_throttle_ms`: :func:`throttle_time_ms`,
    :func:`steady_throttle_ms` for the token-bucket keys of :data:`STEADY_RULES`."""
    bucket = [k for k, rule in STEADY_RULES.items() if rule.token_bucket]
    steady = steady_throttle_ms(key, observed, quota, size, window_s=window_s)
    return F.when(key.isin(bucket), steady).otherwise(
        throttle_time_ms(key, observed, quota, window_s=window_s)
    )


def share_over(value: Column, points: Sequence[tuple[float, Column]]) -> Column:
    """:func:`quotaform.kafka.impact.share_over`: the estimated share of
    samples above ``value`` from ``(cumulative share, quantile)`` points,
    linear between two, null when a point is null or NaN."""
    unknown = functools.reduce(lambda a, b: a | b, [q.isNull() | F.isnan(q) for _, q in points])
    expr = F.when(unknown, F.lit(None).cast("double")).when(value >= points[-1][1], F.lit(0.0))
    expr = expr.when(value < points[0][1], F.lit(1.0 - points[0][0]))
    for (s0, q0), (s1, q1) in itertools.pairwise(points):
        expr = expr.when(
            (q0 <= value) & (value < q1),
            F.lit(1.0) - (F.lit(s0) + F.lit(s1 - s0) * (value - q0) / (q1 - q0)),
        )
    return expr.otherwise(F.lit(0.0)).cast("double")


def enforcing_nodes(key: Column, observed: Column) -> Column:
    """:func:`quotaform.kafka.keys.enforcing_nodes`: of the ``observed`` nodes
    reporting a group's usage of ``key``, how many enforce its quota at once
    (:data:`~quotaform.kafka.keys.AT_ONCE` by the key's ``enforced_on``)."""
    expr = observed
    for where, cap in AT_ONCE.items():
        keys = [k for k, s in QUOTA_KEYS.items() if s.enforced_on == where]
        if cap is not None and keys:
            expr = F.when(key.isin(keys), F.least(observed, F.lit(cap))).otherwise(expr)
    return expr


# ------------------------------------------------------------------ names and groups


def user_name(tag: Column) -> Column:
    """:func:`quotaform.kafka.metrics.unsanitize_user`: ``url_decode`` (Java's
    ``URLDecoder``, as Kafka's ``Sanitizer.desanitize``) after escaping what
    the Python rule keeps as written and ``URLDecoder`` would not: ``+`` and a
    ``%`` not followed by two hex digits (which make ``url_decode`` fail)."""
    escaped = F.regexp_replace(F.regexp_replace(tag, "%(?![0-9A-Fa-f]{2})", "%25"), "[+]", "%2B")
    return F.url_decode(escaped)


def step1_tag(etype: str, name: Column, mask: Column, found_level: Column) -> Column:
    """The broker's step-1 tag of type ``etype`` (``user`` or ``client-id``):
    ``name`` where :data:`TAGS_BY_MASK` (for ``mask``, the array of the shape
    names that set the key on the broker) or, when mixed, the first existing
    level of :data:`TAG_LEVELS` (``found_level``, null when none:
    :data:`UNMATCHED_TAG_TYPES`) sets that tag, else ``""``."""
    size = F.size(mask)
    expr: Column | None = None
    for shapes, types in TAGS_BY_MASK.items():
        cond = functools.reduce(
            lambda a, b: a & b,
            [F.array_contains(mask, shape_name(s)) for s in shapes],
            size == len(shapes),
        )
        value = name if etype in types else F.lit("")
        expr = F.when(cond, value) if expr is None else expr.when(cond, value)
    assert expr is not None
    unmatched = name if etype in UNMATCHED_TAG_TYPES else F.lit("")
    levels = [lvl.number for lvl in TAG_LEVELS if etype in lvl.tag_types]
    return (
        expr.when(found_level.isNull(), unmatched)
        .when(found_level.isin(levels), name)
        .otherwise(F.lit(""))
    )


def group_change(is_ip: Column, split: Column, unknown_tag: Column, same_tags: Column) -> Column:
    """:func:`quotaform.kafka.resolution.group_change` from its four facts
    (booleans; null reads as false), looked up in :data:`GROUP_CHANGES`."""
    facts: Sequence[Column] = (is_ip, split, unknown_tag, same_tags)
    # The facts as the bits of an index into the table's outcomes.
    code = functools.reduce(
        lambda a, b: a + b,
        [F.coalesce(f, F.lit(False)).cast("int") * (1 << i) for i, f in enumerate(facts)],
    )
    outcomes = [""] * (1 << len(facts))
    for known, outcome in GROUP_CHANGES.items():
        outcomes[sum(int(f) << i for i, f in enumerate(known))] = outcome
    return F.element_at(F.array(*[F.lit(o) for o in outcomes]), code + 1)


def own_entity_json(user: Column, client_id: Column, ip: Column) -> Column:
    """:func:`quotaform.kafka.resolution.own_entity` of a group (``user`` the
    decoded name; ``""`` for an empty tag) as the plan JSON's entity object:
    the level of :data:`OWN_LEVELS` for its non-empty tags, ``{ip}`` for ip
    groups."""
    opts = {"ignoreNullFields": "false"}
    names = {USER: user, CLIENT_ID: client_id}
    expr = F.when(ip.isNotNull(), F.to_json(F.struct(ip.alias("ip")), opts))
    for (has_user, has_client), level in OWN_LEVELS.items():
        cond = ((user != "") == F.lit(has_user)) & ((client_id != "") == F.lit(has_client))
        parts = [names[etype].alias(etype) for etype, _ in level.template]
        expr = expr.when(cond, F.to_json(F.struct(*parts), opts))
    return expr
