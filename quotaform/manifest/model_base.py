"""What every manifest model shares: strict, frozen, unknown fields refused,
an explicit null refused with the field's YAML name, and the entity an
entry names (``EntitySpec``: the quotas, the protected entries, the storage
policy's ``appliesTo`` and ``exempt``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from quotaform.kafka.entity import CLIENT_ID, IP, USER, Entity
from quotaform.kafka.names import normalise_ip
from quotaform.kafka.units import render_raw

__all__ = ["CONFIG", "ENTITY_FIELD_TYPES", "DefaultEntity", "EntitySpec", "reject_null"]

#: Every manifest model's configuration.
CONFIG = ConfigDict(
    extra="forbid", frozen=True, strict=True, populate_by_name=False, defer_build=True
)

#: Field names as the manifests spell them, for messages.
YAML_NAMES = {
    "cluster_id": "clusterId",
    "client_id": "client-id",
    "change_budget": "changeBudget",
    "max_deletes": "maxDeletes",
    "max_delete_fraction": "maxDeleteFraction",
    "max_relax_factor": "maxRelaxFactor",
}


def reject_null(value: object, info: ValidationInfo) -> object:
    # Optional fields use None for "left out"; an explicit YAML null is more
    # likely a half-deleted entry than a wish, so it is refused.
    if value is None:
        field = info.field_name or ""
        name = YAML_NAMES.get(field, field)
        raise ValueError(f"{name} is null: give a value, or leave {name} out")
    return value


_ENTITY_PART_SCHEMA = {
    "anyOf": [
        {"type": "string", "minLength": 1, "description": "An entity name, taken verbatim."},
        {
            "type": "object",
            "description": "The default entity of this type (null on the wire, "
            "<default> in Kafka's tools).",
            "properties": {"default": {"const": True}},
            "required": ["default"],
            "additionalProperties": False,
        },
    ]
}

ENTITY_FIELD_TYPES = {"user": "user", "client_id": "client-id", "ip": "ip"}


class DefaultEntity(BaseModel):
    """{default: true}: the default entity of a type (name null on the wire)."""

    model_config = CONFIG

    default: Literal[True]


EntityPart = Annotated[str | DefaultEntity | None, WithJsonSchema(_ENTITY_PART_SCHEMA)]


class EntitySpec(BaseModel):
    """A client-quota entity: one part per entity type, each a name or
    {default: true}. Valid shapes: user, client-id, user + client-id, ip
    (KIP-546, KIP-612); ip never combines with user or client-id."""

    model_config = ConfigDict(**CONFIG, json_schema_extra={"minProperties": 1})

    user: EntityPart = Field(
        default=None,
        description="The user principal name, without 'User:' (ANONYMOUS for "
        "unauthenticated clients), or {default: true}.",
    )
    client_id: EntityPart = Field(
        default=None,
        alias="client-id",
        description="The client.id the client sends, or {default: true}.",
    )
    ip: EntityPart = Field(
        default=None,
        description="An IPv4 or IPv6 address (no CIDR, no host names), or {default: true}. "
        "IPv6 is normalised to its compressed form.",
    )

    @field_validator("user", "client_id", "ip", mode="before")
    @classmethod
    def _check_part(cls, value: object, info: ValidationInfo) -> object:
        etype = ENTITY_FIELD_TYPES[info.field_name or ""]
        if isinstance(value, str):
            if value == "":
                raise ValueError(
                    f'an empty {etype} name is rejected by Kafka ("Empty {etype} not '
                    f'supported"); write {{default: true}} for the default {etype}'
                )
            return normalise_ip(value) if etype == "ip" else value
        if isinstance(value, dict) and set(value) == {"default"} and value["default"] is True:
            return DefaultEntity(default=True)
        if isinstance(value, dict) and set(value) == {"default"} and value["default"] is False:
            raise ValueError(
                "{default: false} is not allowed: write a name, {default: true} for "
                f"the default {etype}, or leave {etype} out"
            )
        if value is None:
            raise ValueError(
                f"{etype} is null: write a name, {{default: true}} for the default "
                f"{etype}, or leave {etype} out"
            )
        raise ValueError(
            f"expected a {etype} name (a non-empty string) or {{default: true}}, "
            f"got {render_raw(value)}"
        )

    @model_validator(mode="after")
    def _check_shape(self) -> EntitySpec:
        if self.user is None and self.client_id is None and self.ip is None:
            raise ValueError("an entity needs at least one of user, client-id, ip")
        problem = self.to_entity().shape_problem()
        if problem is not None:
            raise ValueError(problem)
        return self

    def to_entity(self) -> Entity:
        """The :class:`~quotaform.kafka.entity.Entity` (default parts have name ``None``)."""
        # Built in the entity's canonical order (user, client-id, ip) without
        # sorting: this runs for every entry of every load.
        parts: list[tuple[str, str | None]] = []
        for etype, value in ((USER, self.user), (CLIENT_ID, self.client_id), (IP, self.ip)):
            if value is not None:
                parts.append((etype, value if isinstance(value, str) else None))
        return Entity(tuple(parts))
