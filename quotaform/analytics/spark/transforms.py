"""The Spark engine's transforms: pure ``DataFrame -> DataFrame`` functions.

No session, no reads, no writes here (:mod:`quotaform.analytics.spark.job`
does those). Kafka's rules are not written again: every level, the broker's
two steps, the tag-based look-up order and the quota-key metrics are read
from :mod:`quotaform.kafka.resolution` and :mod:`quotaform.kafka.keys` and
turned into column expressions; units, the throttle formula, user-tag
decoding and group changes come from
:mod:`quotaform.analytics.spark.columns`, built from the tables of
:mod:`quotaform.kafka`. So this engine and the Python one
(:mod:`quotaform.analytics.engine`) answer from the same tables; tests compare
them row for row.

Inputs:

* a *quotas* DataFrame (:func:`with_quotas`): each observed group's quota,
  answered on the driver by the local engine's rule
  (:mod:`quotaform.analytics.spark.resolve`), for the utilisation;
* a *config* DataFrame (:data:`~quotaform.analytics.spark.schemas.CONFIG_SCHEMA`),
  the configuration after a change, for :func:`impact`:
  one row per (cluster, entity, quota key) with the entity's level on its
  ladder and its named parts (``n_user``, ``n_client``, ``n_ip``; null for a
  default or absent part: the level says which);
* a *usage* DataFrame (:data:`~quotaform.analytics.spark.schemas.USAGE_SCHEMA`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from quotaform.analytics.model import (
    CENSORED_NOTE,
    CLUSTER_GROUP_COLUMNS,
    CLUSTER_SUMS,
    DEFAULT_ALIGN_S,
    DEFAULT_HEADROOM,
    DEFAULT_WINDOW_S,
    GROUP_COLUMNS,
    IMPACT_COLUMNS,
    ONE_BROKER_FIGURES,
    PERCENTILES,
    UTILISATION_COLUMNS,
    align_micros,
)
from quotaform.analytics.spark import columns
from quotaform.kafka.entity import CLIENT_ID, IP, USER
from quotaform.kafka.keys import METRICS, QUOTA_KEYS
from quotaform.kafka.resolution import (
    CLIENT_LEVELS,
    GROUP_MERGES,
    GROUP_SAME,
    IP_LEVELS,
    LOOKUP_BY_TAGS,
    TAG_LEVELS,
)

__all__ = [
    "NO_IP",
    "QUOTA_COLUMNS",
    "broker_groups",
    "cluster_usage",
    "impact",
    "recommend",
    "utilisation_of",
    "with_quotas",
]

_NAME_COLUMNS = {USER: "n_user", CLIENT_ID: "n_client", IP: "n_ip"}
_LADDERS = {"client": CLIENT_LEVELS, "ip": IP_LEVELS}


def _null() -> Column:
    """A null string (built per call: a Column needs an active SparkContext)."""
    return F.lit(None).cast("string")


# ------------------------------------------------------------------ the level table as columns


def _ints(numbers: Sequence[int]) -> Column:
    return F.array(*[F.lit(n) for n in numbers]).cast("array<int>")


def _levels_by_tags(has_user: Column, has_client: Column) -> Column:
    """The broker's step-2 look-up order (:data:`LOOKUP_BY_TAGS`) per row."""
    expr: Column | None = None
    for (user, client), levels in LOOKUP_BY_TAGS.items():
        cond = (has_user == F.lit(user)) & (has_client == F.lit(client))
        arr = _ints([lvl.number for lvl in levels])
        expr = F.when(cond, arr) if expr is None else expr.when(cond, arr)
    assert expr is not None
    return expr


def _named_at_level(ladder: str, level: Column, etype: str, name: Column) -> Column:
    """The entity's name of ``etype`` at ``level`` for a principal whose name is
    ``name``: the name where the level's template names the type, else null
    (a default or absent part)."""
    expr = _null()
    for lvl in _LADDERS[ladder]:
        if dict(lvl.template).get(etype):
            expr = F.when(level == lvl.number, name).otherwise(expr)
    return expr


def _needs_name(ladder: str, level: Column, etype: str) -> Column:
    """Whether ``level``'s template names ``etype`` (so a null name there means unknown)."""
    numbers = [lvl.number for lvl in _LADDERS[ladder] if dict(lvl.template).get(etype)]
    return level.isin(numbers) if numbers else F.lit(False)


#: Stands for "no name" (a default or absent part) in join keys, so joins
#: are plain hash equi-joins (a real name never holds a NUL character).
_NONE = "\u0000"


def _key(column: Column) -> Column:
    return F.coalesce(column, F.lit(_NONE))


def _first_existing(
    requests: DataFrame, config: DataFrame, keys: Sequence[str], ladder: str
) -> DataFrame:
    """For each request (``keys`` + principal names ``p_user``, ``p_client``,
    ``p_ip`` + an array ``levels`` in look-up order; the other columns are
    kept), the first level whose entity for that principal sets the key in
    ``config``: ``found_level``, ``found_value``, ``found_entity`` (nulls when
    none). One explode, one broadcast hash join, one aggregation."""
    names = {USER: F.col("p_user"), CLIENT_ID: F.col("p_client"), IP: F.col("p_ip")}
    payload = [c for c in requests.columns if c != "levels"]
    exploded = requests.select(*payload, F.posexplode_outer("levels").alias("pos", "level"))
    unknown = functools.reduce(
        lambda a, b: a | b,
        [
            _needs_name(ladder, F.col("level"), etype) & names[etype].isNull()
            for etype in _NAME_COLUMNS
        ],
    )
    # A level whose entity needs an unknown name cannot match: level -1.
    exploded = exploded.withColumn(
        "j_level", F.when(F.col("level").isNull() | unknown, F.lit(-1)).otherwise(F.col("level"))
    )
    for etype, column in _NAME_COLUMNS.items():
        exploded = exploded.withColumn(
            f"j_{column}", _key(_named_at_level(ladder, F.col("level"), etype, names[etype]))
        )
    cfg = F.broadcast(
        config.where(F.col("ladder") == ladder).select(
            F.col("cluster").alias("c_cluster"),
            F.col("quota_key").alias("c_quota_key"),
            F.col("level").alias("c_level"),
            *[_key(F.col(c)).alias(f"c_{c}") for c in _NAME_COLUMNS.values()],
            F.col("value").alias("c_value"),
            F.col("entity").alias("c_entity"),
        )
    )
    joined = exploded.join(
        cfg,
        (F.col("cluster") == F.col("c_cluster"))
        & (F.col("quota_key") == F.col("c_quota_key"))
        & (F.col("j_level") == F.col("c_level"))
        & (F.col("j_n_user") == F.col("c_n_user"))
        & (F.col("j_n_client") == F.col("c_n_client"))
        & (F.col("j_n_ip") == F.col("c_n_ip")),
        "left",
    )
    matched = F.when(F.col("c_level").isNotNull(), F.col("pos"))
    best = joined.groupBy(*payload).agg(
        F.min_by(
            F.struct(
                F.col("level").alias("found_level"),
                F.col("c_value").alias("found_value"),
                F.col("c_entity").alias("found_entity"),
            ),
            matched,
        ).alias("best"),
        F.min(matched).alias("_first"),
    )
    found = F.col("_first").isNotNull()
    return best.select(
        *payload,
        F.when(found, F.col("best.found_level")).alias("found_level"),
        F.when(found, F.col("best.found_value")).alias("found_value"),
        F.when(found, F.col("best.found_entity")).alias("found_entity"),
    )


def _is_ip_key() -> Column:
    ip_keys = [k for k, s in QUOTA_KEYS.items() if IP in s.entity_types]
    return F.col("quota_key").isin(ip_keys)


# ------------------------------------------------------------------ resolve


def _client_principals(groups: DataFrame) -> DataFrame:
    """The user/client-id groups of ``groups`` with the principal their tags
    name: ``p_user`` (the decoded user tag), ``p_client``, ``p_ip`` (null);
    an empty tag is null (not known from the group)."""
    return (
        groups.where(~_is_ip_key())
        .withColumn(
            "p_user",
            F.when(F.col("user") == "", _null()).otherwise(columns.user_name(F.col("user"))),
        )
        .withColumn(
            "p_client", F.when(F.col("client_id") == "", _null()).otherwise(F.col("client_id"))
        )
        .withColumn("p_ip", _null())
    )


def _ip_requests(groups: DataFrame) -> DataFrame:
    """The ip groups of ``groups`` as lookups of the ip levels (no principal)."""
    return (
        groups.where(_is_ip_key())
        .withColumn("p_user", _null())
        .withColumn("p_client", _null())
        .withColumn("p_ip", F.col("ip"))
        .withColumn("levels", _ints([lvl.number for lvl in IP_LEVELS]))
    )


#: Stands for "no ip" while the groups are computed: every grouping and join
#: below is on plain equality of non-null columns, so Spark sees they are all
#: partitioned as the one shuffle left them (a null-safe join would shuffle).
NO_IP = "\u0000"

#: The columns of a quotas frame (:func:`with_quotas`) besides the group's.
QUOTA_COLUMNS = ("quota_value", "level", "entity")


def with_quotas(groups: DataFrame, *, quotas: DataFrame) -> DataFrame:
    """``groups`` with ``quota_value`` (null = unlimited), ``level`` and
    ``entity`` from ``quotas``: one row per distinct group (``cluster``,
    ``user``, ``client_id``, ``ip``, ``quota_key``) with its answer, resolved
    on the driver (:mod:`quotaform.analytics.spark.resolve`). Broadcast: the
    groups keep the partitioning they came with, and are not shuffled. A
    group ``quotas`` lacks gets nulls."""
    a = F.broadcast(
        quotas.select(*[F.col(k).alias(f"_q_{k}") for k in _CLUSTER_GROUP], *QUOTA_COLUMNS)
    )
    on = functools.reduce(
        lambda x, y: x & y, [F.col(k).eqNullSafe(F.col(f"_q_{k}")) for k in _CLUSTER_GROUP]
    )
    kept = [c for c in groups.columns if c not in QUOTA_COLUMNS]
    return groups.join(a, on, "left").select(*kept, *QUOTA_COLUMNS)


# ------------------------------------------------------------------ utilisation


def _metric_map(kind: str) -> Column:
    pairs = [F.lit(x) for m, (key, k) in METRICS.items() if k == kind for x in (m, key)]
    return F.create_map(*pairs)


def _exact_percentile(values: Column, p: float) -> Column:
    """The exact percentile of a sorted array with linear interpolation at
    position ``p * (n - 1)``: :func:`quotaform.analytics.model.percentile`,
    term for term (null for an empty array)."""
    n = F.size(values)
    position = (n - 1).cast("double") * F.lit(p)
    low = F.floor(position).cast("int")
    high = F.ceil(position).cast("int")
    a = F.element_at(values, low + 1)
    b = F.element_at(values, high + 1)
    return (
        F.when(n == 0, F.lit(None).cast("double"))
        .when(low == high, a)
        .otherwise(a + (b - a) * (position - low))
    )


#: A group over every broker.
_CLUSTER_GROUP = list(CLUSTER_GROUP_COLUMNS)


def _fold_sum(values: Column) -> Column:
    """The values of an array added from 0.0, left to right
    (:func:`~quotaform.analytics.model.fold_sum`'s order)."""
    return F.aggregate(values, F.lit(0.0), lambda acc, x: acc + x)


def broker_groups(usage: DataFrame, *, align_s: float = DEFAULT_ALIGN_S) -> DataFrame:
    """Per observed (cluster, broker, group, key), usage and throttle-time
    samples together: the usage figures of :func:`utilisation` before the
    quota is known, in ONE shuffle of the usage rows.

    The rows are partitioned once by the group over every broker
    (``cluster``, ``user``, ``client_id``, ``ip``, ``quota_key``); every
    later grouping adds columns to those, so Spark shuffles nothing else:
    one row per (series, time) (the largest value kept, NaN only when every
    value is NaN, as the local engine keeps it), then per aligned bucket of
    ``align_s`` seconds, then per broker.

    Args:
        usage: usage rows (:data:`~quotaform.analytics.spark.schemas.USAGE_SCHEMA`),
            a (series, time) possibly more than once.
        align_s: the cluster-wide sums' bucket, seconds.

    Returns:
        One row per group and broker with any sample: the group's columns
        (``ip`` as :data:`NO_IP` when null), ``v`` (the usage values, NaN
        left out, ascending), ``has_usage`` (1 when a usage sample was seen,
        NaN counted), ``t_samples`` and ``t_over`` (throttle-time samples,
        and those > 0), ``means`` (``(bucket, mean)`` of each bucket with a
        usage value: the bucket's start in microseconds from the epoch and
        the broker's mean there, values added in ascending order) and
        ``repeats`` (rows that repeated a (series, time) already read).

    Raises:
        ValueError: ``align_s`` is not a positive duration.
    """
    align_us = F.lit(align_micros(align_s))
    usage_key = _metric_map("usage")[F.col("metric")]
    throttle_key = _metric_map("throttle")[F.col("metric")]
    is_usage = usage_key.isNotNull()
    keyed = usage.where(is_usage | throttle_key.isNotNull()).select(
        "cluster",
        "broker",
        "user",
        "client_id",
        F.coalesce(F.col("ip"), F.lit(NO_IP)).alias("ip"),
        F.coalesce(usage_key, throttle_key).alias("quota_key"),
        is_usage.alias("is_usage"),
        "timestamp",
        "value",
    )
    nan = F.isnan("value")
    # The one shuffle: every later grouping is by these columns and more.
    parted = keyed.repartition(*_CLUSTER_GROUP)
    # A metric is one (quota key, usage or throttle): the series is the group,
    # its broker and is_usage.
    one = parted.groupBy(*_CLUSTER_GROUP, "broker", "is_usage", "timestamp").agg(
        F.coalesce(F.max(F.when(~nan, F.col("value"))), F.first("value")).alias("value"),
        (F.count("*") - 1).alias("repeats"),
    )
    micros = F.unix_micros(F.col("timestamp"))
    nan = F.isnan("value")
    throttle = ~F.col("is_usage")
    buckets = one.groupBy(
        *_CLUSTER_GROUP, "broker", (micros - F.pmod(micros, align_us)).alias("bucket")
    ).agg(
        # collect_list leaves nulls (throttle samples, NaN) out.
        F.sort_array(F.collect_list(F.when(F.col("is_usage") & ~nan, F.col("value")))).alias("v"),
        F.max(F.col("is_usage").cast("int")).alias("has_usage"),
        F.count(F.when(throttle, 1)).alias("t_samples"),
        # Spark orders NaN above every number: NaN > 0 must not count.
        F.count(F.when(throttle & (F.col("value") > 0) & ~nan, 1)).alias("t_over"),
        F.sum("repeats").alias("repeats"),
    )
    n = F.size("v")
    mean = F.when(n > 0, _fold_sum(F.col("v")) / n)
    return buckets.groupBy(*_CLUSTER_GROUP, "broker").agg(
        F.sort_array(F.flatten(F.collect_list("v"))).alias("v"),
        F.max("has_usage").alias("has_usage"),
        F.sum("t_samples").alias("t_samples"),
        F.sum("t_over").alias("t_over"),
        F.collect_list(F.when(n > 0, F.struct(F.col("bucket"), mean.alias("mean")))).alias("means"),
        F.sum("repeats").alias("repeats"),
    )


def _cluster_figures(groups: DataFrame) -> DataFrame:
    """Each group's usage summed across brokers (the rule of
    :mod:`quotaform.analytics.model`) from :func:`broker_groups`' rows with a
    usage sample: per bucket the brokers' means added from 0.0 in broker
    order, the quantiles of those sums; and the brokers with a usage sample
    of the group (NaN counted). No shuffle: grouped by the group and more.

    Returns:
        One row per group: ``brokers_observed``, ``cluster_samples``,
        ``cluster_p50``, ``cluster_p95``, ``cluster_p99``, ``cluster_max``.
    """
    cells = groups.select(*_CLUSTER_GROUP, "broker", F.explode_outer("means").alias("m"))
    by_bucket = cells.groupBy(*_CLUSTER_GROUP, F.col("m.bucket").alias("bucket")).agg(
        F.array_sort(
            F.collect_list(F.when(F.col("m").isNotNull(), F.struct("broker", F.col("m.mean"))))
        ).alias("s"),
        F.collect_list("broker").alias("brokers"),
    )
    sums = by_bucket.select(
        *_CLUSTER_GROUP,
        "brokers",
        F.when(F.size("s") > 0, _fold_sum(F.transform("s", lambda x: x["mean"]))).alias("total"),
    )
    return (
        sums.groupBy(*_CLUSTER_GROUP)
        .agg(
            F.sort_array(F.collect_list("total")).alias("c"),  # nulls (NaN only) left out
            F.size(F.array_distinct(F.flatten(F.collect_list("brokers"))))
            .cast("int")
            .alias("brokers_observed"),
        )
        .select(
            *_CLUSTER_GROUP,
            "brokers_observed",
            F.size("c").cast("long").alias("cluster_samples"),
            *[
                _exact_percentile(F.col("c"), p).alias(n)
                for p, n in zip(
                    PERCENTILES, ("cluster_p50", "cluster_p95", "cluster_p99"), strict=True
                )
            ],
            F.element_at("c", -1).alias("cluster_max"),
        )
    )


def cluster_usage(samples: DataFrame, *, align_s: float = DEFAULT_ALIGN_S) -> DataFrame:
    """Each group's usage summed across brokers (the rule of
    :mod:`quotaform.analytics.model`): samples aligned on buckets of
    ``align_s`` seconds from the epoch, each broker's samples of a bucket
    averaged (NaN left out), the averages summed, and the quantiles of those
    sums; and the brokers with a usage sample of the group (NaN counted).

    Args:
        samples: usage rows (``cluster``, ``broker``, ``timestamp``,
            ``metric``, ``user``, ``client_id``, ``ip``, ``value``).

    Returns:
        One row per group (``cluster``, ``user``, ``client_id``, ``ip``,
        ``quota_key``): ``brokers_observed``, ``cluster_samples``,
        ``cluster_p50``, ``cluster_p95``, ``cluster_p99``, ``cluster_max``.

    Raises:
        ValueError: ``align_s`` is not a positive duration.
    """
    groups = broker_groups(samples, align_s=align_s).where(F.col("has_usage") == 1)
    return _cluster_figures(groups).withColumn("ip", _real_ip(F.col("ip")))


def _real_ip(ip: Column) -> Column:
    return F.when(ip != NO_IP, ip)


def _cluster_figure(name: str) -> Column:
    """A cluster-wide figure of the joined ``r`` (per broker) and ``c``
    (summed) rows: a group seen on one broker has its per-broker figures
    (:data:`~quotaform.analytics.model.ONE_BROKER_FIGURES`)."""
    same = ONE_BROKER_FIGURES.get(name)
    if same is None:
        return F.col(f"c.{name}")
    single = F.col("c.brokers_observed") == 1
    return F.when(single, F.col(f"r.{same}")).otherwise(F.col(f"c.{name}")).alias(name)


def utilisation_of(groups: DataFrame, *, quotas: DataFrame) -> DataFrame:
    """Per observed (cluster, broker, group, key): the quota (``quotas``,
    :func:`with_quotas`), exact usage quantiles p50/p95/p99 (NaN samples
    left out), max, ``utilisation_p99``, and from the group's
    ``throttle-time`` the share of samples > 0 and ``censored``; next to
    them the group's cluster-wide figures over every broker
    (``brokers_observed``, the sums' quantiles, ``cluster_ceiling``). A
    (series, time) read twice counts once. The columns of
    :data:`~quotaform.analytics.model.UTILISATION_COLUMNS`, from
    :func:`broker_groups`' rows (cache them to read their ``repeats`` and
    look-ups first: nothing is computed twice)."""
    used = groups.where(F.col("has_usage") == 1)
    per_broker = used.select(
        *GROUP_COLUMNS,
        F.size("v").cast("long").alias("samples"),
        *[
            _exact_percentile(F.col("v"), p).alias(n)
            for p, n in zip(PERCENTILES, ("p50", "p95", "p99"), strict=True)
        ],
        F.element_at("v", -1).alias("max"),
        F.when(F.col("t_samples") > 0, F.col("t_samples")).alias("t_samples"),
        F.col("t_over"),
    )
    # The quotas broadcast to the per-broker rows; the sums per group over
    # every broker beside them. Both stay partitioned by the group: the
    # join shuffles neither.
    with_quota = with_quotas(per_broker, quotas=quotas)
    r, c = with_quota.alias("r"), _cluster_figures(used).alias("c")
    joined = r.join(c, [F.col(f"r.{k}") == F.col(f"c.{k}") for k in _CLUSTER_GROUP]).select(
        "r.*", *[_cluster_figure(n) for n in CLUSTER_SUMS]
    )
    ceiling = F.col("quota_value") * columns.enforcing_nodes(
        F.col("quota_key"), F.col("brokers_observed")
    )
    computed = {
        "ip": _real_ip(F.col("ip")),
        "utilisation_p99": F.col("p99") / F.col("quota_value"),
        "throttled_share": F.col("t_over") / F.col("t_samples"),
        "censored": F.coalesce(F.col("t_over"), F.lit(0)) > 0,
        "cluster_ceiling": ceiling,
        "cluster_utilisation_p99": F.col("cluster_p99") / ceiling,
    }
    return joined.select(
        *[computed[c].alias(c) if c in computed else F.col(c) for c in UTILISATION_COLUMNS]
    )


# ------------------------------------------------------------------ impact


def _resolve_principals(requests: DataFrame, config: DataFrame, keys: Sequence[str]) -> DataFrame:
    """The broker's two steps for principals ``p_user`` / ``p_client`` (null:
    unknown) of user/client-id keys: ``keys`` + ``tag_user``, ``tag_client``
    (``""`` empty, null unknown), ``found_level``, ``found_value``, ``found_entity``."""
    masks = (
        config.where(F.col("ladder") == "client")
        .groupBy("cluster", "quota_key")
        .agg(F.collect_set("shape").alias("mask"))
    )
    step1_levels = requests.withColumn("levels", _ints([lvl.number for lvl in TAG_LEVELS]))
    first = _first_existing(step1_levels, config, keys, "client").alias("f")
    step1 = first.join(
        masks.alias("m"),
        (F.col("f.cluster") == F.col("m.cluster")) & (F.col("f.quota_key") == F.col("m.quota_key")),
        "left",
    ).select("f.*", "m.mask")
    mask = F.coalesce(F.col("mask"), F.array().cast("array<string>"))
    found_level = F.col("found_level")
    tagged = step1.select(
        *keys,
        "p_user",
        "p_client",
        "p_ip",
        columns.step1_tag(USER, F.col("p_user"), mask, found_level).alias("tag_user"),
        columns.step1_tag(CLIENT_ID, F.col("p_client"), mask, found_level).alias("tag_client"),
    )
    step2 = tagged.withColumn(
        "levels",
        _levels_by_tags(
            F.coalesce(F.col("tag_user") != "", F.lit(True)),
            F.coalesce(F.col("tag_client") != "", F.lit(True)),
        ),
    )
    return _first_existing(step2, config, [*keys, "tag_user", "tag_client"], "client")


def _variants(requests: DataFrame, config: DataFrame, keys: Sequence[str]) -> DataFrame:
    """``keys`` + ``split``: whether an entity that sets the key would match
    the principal for some value of a name it leaves unknown (null)."""
    unknown_levels = [
        lvl.number for lvl in CLIENT_LEVELS if any(named for _, named in lvl.template)
    ]
    exploded = requests.select(
        *keys, "p_user", "p_client", F.explode(_ints(unknown_levels)).alias("level")
    )
    names = {USER: F.col("p_user"), CLIENT_ID: F.col("p_client")}
    depends = functools.reduce(
        lambda a, b: a | b,
        [_needs_name("client", F.col("level"), t) & names[t].isNull() for t in names],
    )
    exploded = exploded.where(depends)
    for etype, column in ((USER, "w_user"), (CLIENT_ID, "w_client")):
        exploded = exploded.withColumn(
            column, _named_at_level("client", F.col("level"), etype, names[etype])
        )
    cfg = F.broadcast(config.where(F.col("ladder") == "client")).alias("c")
    r = exploded.alias("r")
    joined = r.join(
        cfg,
        (F.col("r.cluster") == F.col("c.cluster"))
        & (F.col("r.quota_key") == F.col("c.quota_key"))
        & (F.col("r.level") == F.col("c.level"))
        & (F.col("r.w_user").isNull() | (F.col("r.w_user") == F.col("c.n_user")))
        & (F.col("r.w_client").isNull() | (F.col("r.w_client") == F.col("c.n_client"))),
    )
    hits = (
        joined.select(*[F.col(f"r.{k}").alias(k) for k in keys])
        .distinct()
        .withColumn("split", F.lit(True))
    )
    return hits


def _tags_text(tag_user: Column, tag_client: Column, ip: Column) -> Column:
    def part(name: str, col: Column) -> Column:
        return (
            F.when(col.isNull(), F.lit(f"{name}=*"))
            .when(col == "", _null())
            .otherwise(F.concat(F.lit(f"{name}="), col))
        )

    return F.when(ip.isNotNull(), F.concat(F.lit("ip="), ip)).otherwise(
        F.concat_ws(",", part("user", tag_user), part("client-id", tag_client))
    )


def _resolved_after(groups: DataFrame, after: DataFrame, keys: list[str]) -> DataFrame:
    """Each distinct group of ``groups`` (``keys``) resolved under ``after``:
    the tags it has then (``tag_user``, ``tag_client``), ``found_level``,
    ``found_value``, ``found_entity``, and whether its clients split."""
    client = _client_principals(groups)
    resolved_client = _resolve_principals(client, after, keys)
    split = _variants(client, after, keys)
    rc, sp = resolved_client.alias("rc"), split.alias("sp")
    resolved_client = rc.join(
        sp, [F.col(f"rc.{k}").eqNullSafe(F.col(f"sp.{k}")) for k in keys], "left"
    ).select(
        *[F.col(f"rc.{k}").alias(k) for k in keys],
        *[
            F.col(f"rc.{k}").alias(k)
            for k in ("tag_user", "tag_client", "found_level", "found_value", "found_entity")
        ],
        F.coalesce(F.col("sp.split"), F.lit(False)).alias("split"),
    )
    ip_req = _ip_requests(groups)
    resolved_ip = _first_existing(ip_req, after, keys, "ip").select(
        *keys,
        F.lit("").alias("tag_user"),
        F.lit("").alias("tag_client"),
        "found_level",
        "found_value",
        "found_entity",
        F.lit(False).alias("split"),
    )
    return resolved_client.unionByName(resolved_ip)


def impact(
    util: DataFrame,
    *,
    after: DataFrame,
    window_s: float = DEFAULT_WINDOW_S,
    request_sizes: Mapping[str, float] | None = None,
) -> DataFrame:
    """:func:`quotaform.analytics.engine.impact` in Spark: the rows of
    ``util`` whose quota, source or group changes under the configuration
    ``after``, with the throughput, demand cut and throttle times after it
    (the columns of :data:`~quotaform.analytics.model.IMPACT_COLUMNS`).

    (Over 80 lines: one DataFrame plan in its steps (join the after
    answers, stage the before/after columns, sum the merging groups, keep
    the changed rows, compute the columns), each step reading the one
    before; a third of the lines name the staged columns.)"""
    keys = list(CLUSTER_GROUP_COLUMNS)
    resolved = _resolved_after(util.select(*keys).distinct(), after, keys)
    before_user = columns.user_name(F.col("u.user"))
    rows = util.alias("u").join(
        resolved.alias("a"), [F.col(f"u.{k}").eqNullSafe(F.col(f"a.{k}")) for k in keys], "left"
    )
    change = columns.group_change(
        is_ip=F.col("u.ip").isNotNull(),
        split=F.col("a.split"),
        unknown_tag=F.col("a.tag_user").isNull() | F.col("a.tag_client").isNull(),
        same_tags=(before_user == F.col("a.tag_user"))
        & (F.col("u.client_id") == F.col("a.tag_client")),
    )
    tags_after = _tags_text(F.col("a.tag_user"), F.col("a.tag_client"), F.col("u.ip"))
    staged = rows.select(
        *[F.col(f"u.{k}").alias(k) for k in GROUP_COLUMNS],
        F.col("u.quota_value").alias("quota_before"),
        F.col("a.found_value").alias("quota_after"),
        F.col("u.level").alias("level_before"),
        F.col("a.found_level").alias("level_after"),
        F.col("u.entity").alias("entity_before"),
        F.col("a.found_entity").alias("entity_after"),
        change.alias("group_change"),
        tags_after.alias("tags_after"),
        F.col("u.p99").alias("p99"),
        F.col("u.p50").alias("p50"),
        F.col("u.censored").alias("throttled_before"),
        F.col("u.brokers_observed").alias("brokers_observed"),
        F.col("u.cluster_p99").alias("cluster_p99"),
    )
    merged = Window.partitionBy("cluster", "broker", "quota_key", "tags_after")

    def summed(name: str) -> Column:  # a merging group's figure: the sum over the groups it merges
        value = F.coalesce(F.col(name), F.lit(0.0))
        return F.when(F.col("group_change") == GROUP_MERGES, F.sum(value).over(merged)).otherwise(
            value
        )

    observed, typical = summed("p99"), summed("p50")
    changed = staged.where(
        (F.col("group_change") != GROUP_SAME)
        | ~F.col("quota_before").eqNullSafe(F.col("quota_after"))
        | ~F.col("level_before").eqNullSafe(F.col("level_after"))
        | ~F.col("entity_before").eqNullSafe(F.col("entity_after"))
    )
    # The merged sum runs over every observed group, changed or not.
    all_rows = staged.withColumn("observed", observed).withColumn("typical", typical).alias("s")
    keep = changed.select(*GROUP_COLUMNS).alias("k")
    with_observed = all_rows.join(
        keep, [F.col(f"s.{c}").eqNullSafe(F.col(f"k.{c}")) for c in GROUP_COLUMNS], "left_semi"
    )
    key, observed_col, quota_after = F.col("quota_key"), F.col("observed"), F.col("quota_after")
    size, source = columns.request_size(
        key, quota_after, given=dict(request_sizes or {}), window_s=window_s
    )
    with_observed = with_observed.withColumn("request_bytes", size).withColumn(
        "request_bytes_source", source
    )
    size = F.col("request_bytes")
    predicted = columns.steady_throttle_ms(key, observed_col, quota_after, size, window_s=window_s)
    nodes = columns.enforcing_nodes(key, F.col("brokers_observed"))
    computed = {
        "predicted_throttle_ms": predicted,
        "newly_throttled": (predicted > 0) & ~F.col("throttled_before"),
        "first_throttle_ms": columns.first_throttle_ms(
            key, observed_col, quota_after, size, window_s=window_s
        ),
        "throughput_after": columns.throughput_after(
            key, observed_col, quota_after, size, window_s=window_s, typical=F.col("typical")
        ),
        "demand_cut": columns.demand_cut(observed_col, quota_after),
        "cluster_ceiling_before": F.col("quota_before") * nodes,
        "cluster_ceiling_after": quota_after * nodes,
    }
    return with_observed.select(
        *[computed[c].alias(c) if c in computed else F.col(c) for c in IMPACT_COLUMNS]
    )


# ------------------------------------------------------------------ recommend


def recommend(
    util: DataFrame,
    *,
    quantile: str = "p99",
    headroom: float = DEFAULT_HEADROOM,
    request_sizes: Mapping[str, float] | None = None,
) -> DataFrame:
    """:func:`quotaform.analytics.engine.recommend` in Spark (the columns of
    :data:`~quotaform.analytics.model.RECOMMEND_COLUMNS`): a per-broker quota
    from the busiest broker, and what it allows across the group's brokers."""
    group = list(CLUSTER_GROUP_COLUMNS)
    per_group = (
        util.where(F.col(quantile).isNotNull())
        .groupBy(*group)
        .agg(
            F.max(quantile).alias("peak_p99"),
            # The busiest broker's quantiles (NaN-free: max ignores nulls).
            *[F.max(c).alias(f"top_{c}") for c in ("p50", "p95", "p99", "max")],
            F.first("quota_value", ignorenulls=True).alias("quota_value"),
            F.max(F.col("censored").cast("int")).cast("boolean").alias("censored"),
            # The group's own figures: the same on each of its rows.
            F.max("brokers_observed").alias("brokers_observed"),
            F.max("cluster_p99").alias("cluster_p99"),
        )
    )
    target = F.col("peak_p99") * F.lit(headroom)
    target = F.when(
        F.col("censored") & F.col("quota_value").isNotNull(),
        F.greatest(target, F.col("quota_value") * F.lit(headroom)),
    ).otherwise(target)
    # Materialised before it is written out: the text refers to it many times.
    per_group = per_group.withColumn(
        "recommended", columns.readable_quota(F.col("quota_key"), target)
    )
    note = F.when(F.col("censored"), F.lit(CENSORED_NOTE)).otherwise(_null())
    key, recommended = F.col("quota_key"), F.col("recommended")
    size, source = columns.request_size(
        key, recommended, given=dict(request_sizes or {}), window_s=DEFAULT_WINDOW_S
    )
    per_group = per_group.withColumn("request_bytes", size).withColumn(
        "request_bytes_source", source
    )
    points = [
        (share, F.col(f"top_{c}"))
        for share, c in ((0.5, "p50"), (0.95, "p95"), (0.99, "p99"), (1.0, "max"))
    ]
    top = F.col("top_max")
    nodes = columns.enforcing_nodes(key, F.col("brokers_observed"))
    return per_group.select(
        *group,
        "quota_value",
        "peak_p99",
        "recommended",
        columns.quota_text(F.col("quota_key"), F.col("recommended")).alias("recommended_text"),
        columns.own_entity_json(
            columns.user_name(F.col("user")), F.col("client_id"), F.col("ip")
        ).alias("entity"),
        "censored",
        note.alias("note"),
        columns.share_over(recommended, points).alias("share_over"),
        F.when(
            top.isNotNull(),
            columns.steady_throttle_ms(key, top, recommended, F.col("request_bytes")),
        ).alias("throttle_at_max_ms"),
        "request_bytes",
        "request_bytes_source",
        "brokers_observed",
        "cluster_p99",
        (F.col("quota_value") * nodes).alias("cluster_ceiling"),
        (recommended * nodes).alias("recommended_cluster_ceiling"),
    )
