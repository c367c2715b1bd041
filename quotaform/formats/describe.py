"""The JSON live view (``describe -o json``); ``schemas/describe.schema.json``
is generated from :class:`DescribeDocument`.

Values are plain numbers in the quota key's unit (bytes/s, %, mutations/s,
connections/s) with their readable form beside them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from quotaform.cluster.wire.types import FilterComponent
from quotaform.formats.base import FROZEN
from quotaform.kafka.entity import config_command_label
from quotaform.kafka.units import format_quota_value
from quotaform.plan.state import LiveState

__all__ = ["DescribeDocument", "describe_document", "render_describe_json"]


class FilterDoc(BaseModel):
    """One filter component sent (strict)."""

    model_config = FROZEN
    entity_type: str
    match_type: Literal["exact", "default", "any"]
    match: str | None = Field(description="The entity name for exact; null otherwise.")


class DescribedEntityDoc(BaseModel):
    """One live entity and its quotas."""

    model_config = FROZEN
    entity: dict[str, str | None] = Field(
        description="Entity type -> entity name; null is the default entity."
    )
    config_command: str = Field(
        description="How kafka-configs --describe names it: user-principal 'alice', "
        "the default client-id."
    )
    quotas: dict[str, float] = Field(description="Quota key -> quota value.")
    readable: dict[str, str] = Field(description="Quota key -> value in readable units.")


class DescribeDocument(BaseModel):
    """The live quotas a filter selects (JSON)."""

    model_config = FROZEN
    format_version: Literal[1] = Field(description="Version of this format.")
    cluster_id: str | None
    filter: list[FilterDoc] | None = Field(
        description="The strict filter sent; null: every entity of every shape."
    )
    entities: list[DescribedEntityDoc] = Field(description="Sorted by entity.")
    rpc_counts: dict[str, int] = Field(description="RPCs made, by API name.")


def describe_document(
    live: LiveState, components: Sequence[FilterComponent] | None
) -> DescribeDocument:
    """The JSON model of what ``describe`` read."""
    return DescribeDocument(
        format_version=1,
        cluster_id=live.cluster_id,
        filter=None
        if components is None
        else [
            FilterDoc.model_validate(
                {
                    "entity_type": c.entity_type,
                    "match_type": c.match_type.name.lower(),
                    "match": c.match,
                }
            )
            for c in components
        ],
        entities=[
            DescribedEntityDoc(
                entity=entity.as_dict(),
                config_command=config_command_label(entity),
                quotas=dict(sorted(quotas.items())),
                readable={k: format_quota_value(k, v) for k, v in sorted(quotas.items())},
            )
            for entity, quotas in sorted(live.entities.items(), key=lambda p: p[0].sort_key())
        ],
        rpc_counts=dict(sorted(live.rpc_counts.items())),
    )


def render_describe_json(document: DescribeDocument) -> str:
    """``document`` as deterministic JSON (2-space indent, trailing newline)."""
    return json.dumps(document.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
