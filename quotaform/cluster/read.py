"""Read the cluster's live quotas inside a scope, with strict DescribeClientQuotas filters."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from typing import Protocol

from quotaform.cluster.wire.types import FilterComponent
from quotaform.kafka.entity import SHAPES, Entity, Shape, shape_name
from quotaform.plan.state import LiveState, Scope

_log = logging.getLogger(__name__)

__all__ = [
    "ClusterReader",
    "QuotaReader",
    "describe_matching",
    "describe_shapes",
    "read_live_state",
    "shape_filter",
]


class QuotaReader(Protocol):
    """What reading needs of a client: the describe half of the wire layer."""

    rpc_counts: dict[str, int]

    def describe_client_quotas(
        self, components: list[FilterComponent], *, strict: bool
    ) -> dict[Entity, dict[str, float]]: ...


class ClusterReader(QuotaReader, Protocol):
    """A reader that also knows the cluster's id (export, import, drift)."""

    def cluster_id(self) -> str: ...


_DESCRIBE = "DescribeClientQuotas"


def _describes(reader: QuotaReader) -> int:
    """DescribeClientQuotas requests ``reader`` made so far: only those, as
    the other facts of the cluster are read at the same time."""
    return reader.rpc_counts.get(_DESCRIBE, 0)


def shape_filter(shape: Iterable[str]) -> list[FilterComponent]:
    """ANY components for every entity type of ``shape``; with ``strict=True``
    this matches exactly the entities of that shape, defaults included."""
    return [FilterComponent.any(t) for t in shape]


def describe_shapes(reader: QuotaReader, shapes: Iterable[Shape]) -> dict[Entity, dict[str, float]]:
    """Every live entity of ``shapes``: one strict DescribeClientQuotas per shape.

    Returns:
        ``{entity: {quota key: quota value}}`` over all the shapes.

    Raises:
        BrokerError: from the wire layer (AuthorizationError when the principal
            lacks DESCRIBE_CONFIGS on CLUSTER).
    """
    live: dict[Entity, dict[str, float]] = {}
    for shape in shapes:
        live.update(reader.describe_client_quotas(shape_filter(shape), strict=True))
    return live


def read_live_state(
    reader: QuotaReader,
    scope: Scope,
    *,
    cluster_id: str | None = None,
    count_unmanaged: bool = True,
) -> LiveState:
    """Describe every entity shape once, strictly, and split by scope.

    One DescribeClientQuotas per shape (at most four): the owned shapes give
    the live state, prefix rules are applied client-side (Kafka has no prefix
    match). With ``count_unmanaged`` the shapes the scope does not own are
    described too: what the plan leaves alone is counted per shape and kept
    in :attr:`LiveState.outside` (it takes part in every client's resolution).

    Raises:
        BrokerError: from the wire layer (AuthorizationError when the principal
            lacks DESCRIBE_CONFIGS on CLUSTER).
    """
    owned = set(scope.shapes)
    shapes = SHAPES if count_unmanaged else tuple(s for s in SHAPES if s in owned)
    before = _describes(reader)
    start = time.perf_counter()
    entities: dict[Entity, dict[str, float]] = {}
    outside: dict[Entity, dict[str, float]] = {}
    by_shape: dict[str, int] = {}
    for shape in shapes:
        count = 0
        for entity, quotas in describe_shapes(reader, [shape]).items():
            if scope.contains(entity):
                entities[entity] = quotas
            else:
                outside[entity] = quotas
                count += 1
        by_shape[shape_name(shape)] = count
    _log.info(
        "read the live state: %d entities in scope, %d outside, %d RPC(s) in %.3f s",
        len(entities),
        sum(by_shape.values()),
        _describes(reader) - before,
        time.perf_counter() - start,
    )
    return LiveState(
        entities=entities,
        unmanaged_by_shape=by_shape,
        cluster_id=cluster_id,
        rpc_counts={_DESCRIBE: _describes(reader) - before},
        outside=outside,
    )


def describe_matching(
    reader: QuotaReader,
    components: Sequence[FilterComponent] | None,
    *,
    cluster_id: str | None = None,
) -> LiveState:
    """The live entities a filter selects, as ``kafka-configs --describe`` reads them.

    Args:
        components: one filter component per entity type (EXACT name,
            DEFAULT, or ANY), sent with ``strict=True``: exactly the entities
            of those types, as ``ConfigCommand`` does; ``None``: every entity
            of every shape (one RPC per shape).

    Returns:
        A :class:`~quotaform.plan.state.LiveState` holding the entities found
        (``{entity: {quota key: quota value}}``) and the RPC count; nothing
        is "unmanaged" here.

    Raises:
        BrokerError: from the wire layer (AuthorizationError without
            DESCRIBE_CONFIGS on CLUSTER; InvalidRequest for a filter the
            broker refuses, such as ip with user).
    """
    before = _describes(reader)
    if components is None:
        entities = describe_shapes(reader, SHAPES)
    else:
        entities = reader.describe_client_quotas(list(components), strict=True)
    return LiveState(
        entities=entities,
        unmanaged_by_shape={},
        cluster_id=cluster_id,
        rpc_counts={_DESCRIBE: _describes(reader) - before},
    )
