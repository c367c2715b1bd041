"""Read the cluster's live quotas inside a scope, with strict DescribeClientQuotas filters."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from quotaform.desired import Scope, shape_name
from quotaform.entity import Entity
from quotaform.wire.types import FilterComponent

__all__ = [
    "ALL_SHAPES",
    "LiveState",
    "QuotaReader",
    "describe_shapes",
    "read_live_state",
    "shape_filter",
]

#: Every entity shape Kafka accepts, as sorted entity types.
ALL_SHAPES: tuple[tuple[str, ...], ...] = (
    ("user",),
    ("client-id",),
    ("user", "client-id"),
    ("ip",),
)


class QuotaReader(Protocol):
    """What reading needs of a client: the describe half of the wire layer."""

    rpc_counts: dict[str, int]

    def describe_client_quotas(
        self, components: list[FilterComponent], *, strict: bool
    ) -> dict[Entity, dict[str, float]]: ...


@dataclass(frozen=True, slots=True)
class LiveState:
    """The live quotas of the entities in scope.

    Attributes:
        entities: ``{entity: {quota key: quota value}}`` for in-scope entities.
        unmanaged: live entities of the described shapes outside the scope.
        cluster_id: the cluster's id, when the caller knows it.
        rpc_counts: DescribeClientQuotas calls made, by API name.
        unmanaged_by_shape: shape name (``user+client-id``) -> unmanaged
            entities of that shape, for every shape described (zeros
            included), in :data:`ALL_SHAPES` order; empty when unknown.

    Raises:
        ValueError: (on construction) the per-shape counts do not add up to
            ``unmanaged``.
    """

    entities: Mapping[Entity, Mapping[str, float]]
    unmanaged: int = 0
    cluster_id: str | None = None
    rpc_counts: Mapping[str, int] = field(default_factory=dict)
    unmanaged_by_shape: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.unmanaged_by_shape and sum(self.unmanaged_by_shape.values()) != self.unmanaged:
            raise ValueError(
                f"unmanaged_by_shape adds up to {sum(self.unmanaged_by_shape.values())}, "
                f"not unmanaged={self.unmanaged}"
            )


def shape_filter(shape: Iterable[str]) -> list[FilterComponent]:
    """ANY components for every entity type of ``shape``; with ``strict=True``
    this matches exactly the entities of that shape, defaults included."""
    return [FilterComponent.any(t) for t in shape]


def describe_shapes(
    reader: QuotaReader, shapes: Iterable[tuple[str, ...]]
) -> dict[Entity, dict[str, float]]:
    """Every live entity of ``shapes``: one strict DescribeClientQuotas per shape.

    Returns:
        ``{entity: {quota key: quota value}}`` over all the shapes.
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
    described too, only to count (per shape) what the plan leaves alone.

    Raises:
        BrokerError: from the wire layer (AuthorizationError when the principal
            lacks DESCRIBE_CONFIGS on CLUSTER).
    """
    owned = set(scope.shapes)
    shapes = ALL_SHAPES if count_unmanaged else tuple(s for s in ALL_SHAPES if s in owned)
    before = sum(reader.rpc_counts.values())
    entities: dict[Entity, Mapping[str, float]] = {}
    by_shape: dict[str, int] = {}
    for shape in shapes:
        outside = 0
        for entity, quotas in describe_shapes(reader, [shape]).items():
            if scope.contains(entity):
                entities[entity] = quotas
            else:
                outside += 1
        by_shape[shape_name(shape)] = outside
    rpcs = sum(reader.rpc_counts.values()) - before
    return LiveState(
        entities=entities,
        unmanaged=sum(by_shape.values()),
        cluster_id=cluster_id,
        rpc_counts={"DescribeClientQuotas": rpcs},
        unmanaged_by_shape=MappingProxyType(by_shape),
    )
