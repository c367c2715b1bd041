"""Read the cluster's live quotas inside a scope, with strict DescribeClientQuotas filters."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from quotaform.desired import Scope
from quotaform.entity import Entity
from quotaform.wire.types import FilterComponent

__all__ = ["ALL_SHAPES", "LiveState", "QuotaReader", "read_live_state", "shape_filter"]

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
    """

    entities: Mapping[Entity, Mapping[str, float]]
    unmanaged: int = 0
    cluster_id: str | None = None
    rpc_counts: Mapping[str, int] = field(default_factory=dict)


def shape_filter(shape: Iterable[str]) -> list[FilterComponent]:
    """ANY components for every entity type of ``shape``; with ``strict=True``
    this matches exactly the entities of that shape, defaults included."""
    return [FilterComponent.any(t) for t in shape]


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
    described too, only to count what the plan leaves alone.

    Raises:
        BrokerError: from the wire layer (AuthorizationError when the principal
            lacks DESCRIBE_CONFIGS on CLUSTER).
    """
    owned = set(scope.shapes)
    shapes = ALL_SHAPES if count_unmanaged else tuple(s for s in ALL_SHAPES if s in owned)
    before = sum(reader.rpc_counts.values())
    entities: dict[Entity, Mapping[str, float]] = {}
    unmanaged = 0
    for shape in shapes:
        for entity, quotas in reader.describe_client_quotas(
            shape_filter(shape), strict=True
        ).items():
            if shape in owned and scope.contains(entity):
                entities[entity] = quotas
            else:
                unmanaged += 1
    rpcs = sum(reader.rpc_counts.values()) - before
    return LiveState(
        entities=entities,
        unmanaged=unmanaged,
        cluster_id=cluster_id,
        rpc_counts={"DescribeClientQuotas": rpcs},
    )
