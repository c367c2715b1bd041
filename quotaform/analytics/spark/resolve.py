"""The Spark engine's quotas: each distinct look-up answered once, on the
driver, by the local engine's rule.

The quota a group is held to depends on its cluster's configuration and its
tags alone, not on its rows. So the distinct groups are collected once (a
small job over the cached per-broker groups), answered by
:func:`quotaform.analytics.local.aggregate.resolutions` (names the
configuration does not hold folded into one, then
:func:`~quotaform.kafka.resolution.quota_for_tags` once per distinct folded
look-up: the rule is written once, in :mod:`quotaform.kafka.resolution`),
and the answers handed back to Spark as a small DataFrame that
:func:`~quotaform.analytics.spark.transforms.with_quotas` broadcasts to the
groups. Before, the same look-ups were column expressions over a
configuration DataFrame: about 20 more Spark jobs and seconds of planning
per run (``benchmarks/README.md``, issue 33).
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from quotaform.analytics.local.aggregate import resolutions
from quotaform.analytics.model import CLUSTER_GROUP_COLUMNS, DEFAULT_ALIGN_S
from quotaform.analytics.spark import transforms
from quotaform.kafka.resolution import QuotaIndex

__all__ = ["QUOTAS_SCHEMA", "answers", "group_quotas", "lookups", "resolve_groups", "utilisation"]

#: A quotas frame: a group's columns and its answer.
QUOTAS_SCHEMA = pa.schema(
    [
        *[(c, pa.string()) for c in CLUSTER_GROUP_COLUMNS],
        ("quota_value", pa.float64()),
        ("level", pa.int32()),
        ("entity", pa.string()),
    ]
)

_GROUP = list(CLUSTER_GROUP_COLUMNS)


def lookups(groups: DataFrame) -> DataFrame:
    """The distinct groups of ``groups`` (``cluster``, ``user`` the tag,
    ``client_id``, ``ip``, ``quota_key``): one look-up each, whatever the
    number of rows or brokers."""
    return groups.select(*_GROUP).distinct()


def _text(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """A string column as one plain ``string`` array (Spark may hand over
    ``large_string`` or several chunks)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks else pa.array([], pa.string())
    return column.cast(pa.string())


def answers(looked_up: pa.Table, configs: Mapping[str, QuotaIndex]) -> pa.Table:
    """The answer to each look-up of ``looked_up`` (the columns of
    :func:`lookups`; ``ip`` null, empty or
    :data:`~quotaform.analytics.spark.transforms.NO_IP` for a user/client-id
    group) under ``configs`` (cluster -> its configuration): the look-ups'
    columns as given, with ``quota_value`` (null = unlimited), ``level`` and
    ``entity`` (:data:`QUOTAS_SCHEMA`). Plain Python and Arrow, on the
    driver."""
    given = {c: _text(looked_up.column(c)) for c in _GROUP}
    empty = pa.scalar("", pa.string())
    ip = pc.if_else(pc.fill_null(pc.equal(given["ip"], transforms.NO_IP), True), empty, given["ip"])
    value, level, entity = resolutions(
        given["cluster"],
        pc.fill_null(given["user"], empty),
        pc.fill_null(given["client_id"], empty),
        ip,
        given["quota_key"],
        configs,
    )
    return pa.Table.from_arrays([*given.values(), value, level, entity], schema=QUOTAS_SCHEMA)


def group_quotas(groups: DataFrame, configs: Mapping[str, QuotaIndex]) -> DataFrame:
    """The quotas frame of ``groups`` (:data:`QUOTAS_SCHEMA`, one row per
    distinct group): its look-ups collected (one small job; cache
    ``groups`` first when they are used again), answered on the driver
    (:func:`answers`), handed back to ``groups``' session."""
    table = answers(lookups(groups).toArrow(), configs)
    return groups.sparkSession.createDataFrame(table)


def resolve_groups(groups: DataFrame, configs: Mapping[str, QuotaIndex]) -> DataFrame:
    """``groups`` (``cluster``, ``user`` the tag, URL-encoded,
    ``client_id``, ``ip``, ``quota_key``; other columns kept) with the quota
    each is held to, from its tags (the broker's step 2): ``quota_value``
    (null = unlimited), ``level``, ``entity``."""
    return transforms.with_quotas(groups, quotas=group_quotas(groups, configs))


def utilisation(
    usage: DataFrame, *, configs: Mapping[str, QuotaIndex], align_s: float = DEFAULT_ALIGN_S
) -> DataFrame:
    """The utilisation table of ``usage``
    (:func:`~quotaform.analytics.spark.transforms.utilisation_of`'s columns):
    :func:`~quotaform.analytics.spark.transforms.broker_groups`, their
    look-ups answered, then the table (computed when read). The groups are
    computed twice here; the CLI's run caches them
    (:mod:`quotaform.analytics.spark.run`)."""
    groups = transforms.broker_groups(usage, align_s=align_s)
    used = groups.where(F.col("has_usage") == 1)
    return transforms.utilisation_of(groups, quotas=group_quotas(used, configs))
