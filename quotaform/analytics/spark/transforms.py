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

The utilisation table itself is aggregated per partition by the local
engine's code (:mod:`quotaform.analytics.spark.partitions`); impact and
recommend start from it.

Inputs:

* a *utilisation* DataFrame (:data:`~quotaform.analytics.model.UTILISATION_COLUMNS`);
* a *config* DataFrame (:data:`~quotaform.analytics.spark.schemas.CONFIG_SCHEMA`),
  the configuration after a change, for :func:`impact`:
  one row per (cluster, entity, quota key) with the entity's level on its
  ladder and its named parts (``n_user``, ``n_client``, ``n_ip``; null for a
  default or absent part: the level says which);
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
    DEFAULT_HEADROOM,
    DEFAULT_WINDOW_S,
    GROUP_COLUMNS,
    IMPACT_COLUMNS,
)
from quotaform.analytics.spark import columns
from quotaform.kafka.entity import CLIENT_ID, IP, USER
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.resolution import (
    CLIENT_LEVELS,
    GROUP_MERGES,
    GROUP_SAME,
    IP_LEVELS,
    LOOKUP_BY_TAGS,
    TAG_LEVELS,
)

__all__ = [
    "impact",
    "recommend",
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
