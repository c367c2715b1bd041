"""pydantic models of one manifest document (``apiVersion: quotaform.io/v1``,
``kind: ClientQuotas``): the boundary where YAML becomes typed data.

The models are strict (no ``"yes"`` for booleans, no numbers for names) and
forbid unknown fields. They check what one document can check on its own:
types, entity parts and shapes, IP syntax, quota values. Rules that need the
whole set (same cluster, scope coverage, duplicates, key vs. entity type) live
in :mod:`quotaform.manifest.loader`. Model docstrings and field descriptions
become the JSON Schema's descriptions (``schemas/manifest.schema.json``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails

from quotaform.kafka.entity import SHAPE_NAMES, mixes_ip, present_types
from quotaform.kafka.keys import QUOTA_KEYS, ValueType
from quotaform.kafka.names import normalise_ip
from quotaform.kafka.resolution import Principal
from quotaform.kafka.units import parse_quota_value, render_raw, value_pattern
from quotaform.manifest.model_base import (
    CONFIG,
    ENTITY_FIELD_TYPES,
    DefaultEntity,
    EntitySpec,
    reject_null,
)
from quotaform.manifest.storage_spec import LimitSpec, StoragePolicySpec, parse_duration
from quotaform.plan.state import ChangeBudget

__all__ = [
    "ALL_CLUSTERS",
    "API_VERSION",
    "KIND",
    "ChangeBudgetSpec",
    "DefaultEntity",
    "EntitySpec",
    "LimitSpec",
    "ManifestDocument",
    "Metadata",
    "ProbeSpec",
    "ProtectEntry",
    "QuotaEntry",
    "QuotaValues",
    "ScopeEntry",
    "ScopePrefixes",
    "Spec",
    "StoragePolicySpec",
    "parse_duration",
]

API_VERSION = "quotaform.io/v1"
KIND = "ClientQuotas"
#: ``metadata.clusters: ["*"]``: a shared document for every cluster the set names.
ALL_CLUSTERS = "*"


def _value_schema(key: str) -> WithJsonSchema:
    """A value of ``key``: a number, or a string in the unit grammar of
    :mod:`quotaform.kafka.units` (the pattern admits exactly what parses)."""
    spec = QUOTA_KEYS[key]
    whole = spec.value_type is not ValueType.DOUBLE
    number: dict[str, Any] = {"type": "integer" if whole else "number", "exclusiveMinimum": 0}
    if spec.max_value is not None:
        number["maximum"] = spec.max_value
    return WithJsonSchema(
        {
            "description": spec.description,
            "anyOf": [number, {"type": "string", "pattern": value_pattern(key)}],
        }
    )


def _parse_value(value: object, info: ValidationInfo) -> float:
    key = info.field_name or ""
    if value is None:
        raise ValueError(
            f"{key} is null: give a value, or delete the line to leave the key unmanaged"
        )
    return parse_quota_value(key, value)


def _not_empty(values: BaseModel) -> BaseModel:
    if not values.model_fields_set:
        raise ValueError("values must set at least one quota key")
    return values


class _QuotaValuesBase(BaseModel):
    """Quota key -> value for one entity; at least one key. Keys left out are
    not managed for the entity. Values must be greater than 0
    (ClientQuotaControlManager.validateQuotaKeyValue)."""

    model_config = ConfigDict(**CONFIG, json_schema_extra={"minProperties": 1})

    def as_dict(self) -> dict[str, float]:
        """The keys given, sorted, with their values (bytes/s, %, mutations/s,
        connections/s as documented per field)."""
        return {key: getattr(self, key) for key in sorted(self.model_fields_set)}


# One optional field per quota key of the table, each parsed by the unit grammar.
_validators: dict[str, Any] = {
    "parse": field_validator("*", mode="before")(_parse_value),
    "not_empty": model_validator(mode="after")(_not_empty),
}
_value_fields: dict[str, Any] = {
    key: (Annotated[float | None, _value_schema(key)], None) for key in QUOTA_KEYS
}
QuotaValues: type[_QuotaValuesBase] = create_model(
    "QuotaValues",
    __base__=_QuotaValuesBase,
    __doc__=_QuotaValuesBase.__doc__,
    __validators__=_validators,
    **_value_fields,
)
if TYPE_CHECKING:
    _Values = _QuotaValuesBase  # what the generated model is to the type checker
else:
    _Values = QuotaValues


class QuotaEntry(BaseModel):
    """One entity and the quotas the manifests want for it."""

    model_config = CONFIG

    entity: EntitySpec
    values: _Values
    prevent_destroy: bool = Field(
        default=False,
        alias="preventDestroy",
        description="Refuse to delete this entity or to remove any of its quota keys "
        "(a removed key means unlimited throughput or a fallback), whatever allowDeletes "
        "and the command-line flags say. It lasts only while this entry does: to keep "
        "an entity after its entry is removed, list it in spec.protect.",
    )


class ProtectEntry(BaseModel):
    """An entity that must never be deleted, whether or not a manifest declares
    its quotas (Terraform's prevent_destroy, kept apart from the declaration so
    that removing the declaration cannot remove the protection)."""

    model_config = CONFIG

    entity: EntitySpec


class ProbeSpec(BaseModel):
    """A client that matters to reviewers: plans and drift reports show what a
    change does to its effective quotas. A user and/or a client id (a part
    left out is unknown: the view covers what is certain), or an ip."""

    model_config = ConfigDict(**CONFIG, json_schema_extra={"minProperties": 1})

    user: str | None = Field(
        default=None,
        min_length=1,
        description="The user principal name, without 'User:' (ANONYMOUS for "
        "unauthenticated clients).",
    )
    client_id: str | None = Field(
        default=None,
        alias="client-id",
        description='The client.id the client sends; "" for a client that sends none.',
    )
    ip: str | None = Field(default=None, min_length=1, description="The client's IP address.")

    @field_validator("ip", mode="after")
    @classmethod
    def _normalise_ip(cls, value: str | None) -> str | None:
        return None if value is None else normalise_ip(value)

    @model_validator(mode="after")
    def _check_parts(self) -> ProbeSpec:
        if mixes_ip(present_types(user=self.user, client_id=self.client_id, ip=self.ip)):
            raise ValueError("a probe is a user and/or client-id, or an ip, not both (KIP-612)")
        if self.ip is None and self.user is None and self.client_id is None:
            raise ValueError("a probe needs a user, a client-id, or an ip")
        return self

    def to_principal(self) -> Principal:
        """The :class:`~quotaform.kafka.resolution.Principal` the probe stands for."""
        if self.ip is not None:
            return Principal(ip=self.ip)
        return Principal(user=self.user, client_id=self.client_id)


class ChangeBudgetSpec(BaseModel):
    """Limits on what one plan may change; apply refuses a plan over them unless
    the matching command-line flag allows it. Documents that set a field must
    agree on it; command-line options override."""

    model_config = ConfigDict(**CONFIG, json_schema_extra={"minProperties": 1})

    max_deletes: int | None = Field(
        default=None,
        alias="maxDeletes",
        ge=0,
        description="Most entities one plan may delete (--allow-mass-delete to exceed). "
        "Default: no limit.",
    )
    max_delete_fraction: float | None = Field(
        default=None,
        alias="maxDeleteFraction",
        ge=0,
        le=1,
        description="Largest share (0 to 1) of the live in-scope entities one plan may "
        "delete (--allow-mass-delete to exceed). Default: no limit.",
    )
    max_relax_factor: float | None = Field(
        default=None,
        alias="maxRelaxFactor",
        ge=1,
        description="Largest factor by which one plan may raise a quota value; removing "
        "a key raises it to its fallback (another entity's value, or unlimited) "
        "(--allow-relax to exceed). Default: 10.",
    )

    _no_null = field_validator(
        "max_deletes", "max_delete_fraction", "max_relax_factor", mode="before"
    )(reject_null)

    @model_validator(mode="after")
    def _not_empty(self) -> ChangeBudgetSpec:
        if not self.model_fields_set:
            raise ValueError(
                "changeBudget must set at least one of maxDeletes, "
                "maxDeleteFraction, maxRelaxFactor"
            )
        return self

    def to_budget(self) -> ChangeBudget:
        """The :class:`~quotaform.plan.state.ChangeBudget` this entry declares."""
        return ChangeBudget(
            max_deletes=self.max_deletes,
            max_delete_fraction=self.max_delete_fraction,
            max_relax_factor=self.max_relax_factor,
        )


_PrefixList = Annotated[
    list[Annotated[str, Field(min_length=1)]],
    Field(min_length=1),
]


class ScopePrefixes(BaseModel):
    """Per entity type of the shape: own only names starting with one of these
    prefixes (plain string prefixes, case-sensitive)."""

    model_config = CONFIG

    user: _PrefixList | None = None
    client_id: _PrefixList | None = Field(default=None, alias="client-id")
    ip: _PrefixList | None = None

    _no_null = field_validator("user", "client_id", "ip", mode="before")(reject_null)

    def as_dict(self) -> dict[str, list[str]]:
        """``{entity type: prefixes}`` for the types given."""
        return {
            etype: value
            for field, etype in ENTITY_FIELD_TYPES.items()
            if (value := getattr(self, field)) is not None
        }


class ScopeEntry(BaseModel):
    """Entities of one shape that the manifests own. Owned entities that no
    manifest declares are deleted only with allowDeletes; everything outside the
    scope is never touched."""

    model_config = CONFIG

    shape: Annotated[
        str,
        WithJsonSchema(
            {
                "description": "Entity types of the owned entities.",
                "enum": list(SHAPE_NAMES),
                "type": "string",
            }
        ),
    ]
    prefixes: ScopePrefixes | None = Field(
        default=None,
        description="Own only names starting with one of these prefixes, per entity "
        "type of the shape. Default: every name.",
    )
    include_defaults: bool = Field(
        default=True,
        alias="includeDefaults",
        description="Whether default entities of the shape are owned too.",
    )

    _no_null = field_validator("prefixes", mode="before")(reject_null)

    @field_validator("shape", mode="before")
    @classmethod
    def _known_shape(cls, value: object) -> object:
        if isinstance(value, str) and value in SHAPE_NAMES:
            return value
        names = [repr(n) for n in SHAPE_NAMES]
        expected = f"{', '.join(names[:-1])} or {names[-1]}"
        raise ValueError(f"expected {expected}, got {render_raw(value)}")

    @model_validator(mode="after")
    def _prefix_types_in_shape(self) -> ScopeEntry:
        if self.prefixes is not None:
            types = self.shape.split("+")
            for etype in self.prefixes.as_dict():
                if etype not in types:
                    raise ValueError(f"prefixes.{etype}: {etype} is not part of shape {self.shape}")
        return self


_ClusterName = Annotated[str, Field(min_length=1)]


def _value_error(field: str, data: Any, message: str) -> InitErrorDetails:
    return {
        "type": "value_error",
        "loc": (field,),
        "input": data.get(field),
        "ctx": {"error": ValueError(message)},
    }


def _details(exc: ValidationError) -> list[InitErrorDetails]:
    return [
        {"type": e["type"], "loc": e["loc"], "input": e["input"], "ctx": e.get("ctx", {})}
        for e in exc.errors()
    ]


class Metadata(BaseModel):
    """Which cluster(s) the manifest is for: exactly one of cluster (this
    cluster's own document) and clusters (a document shared by several)."""

    model_config = ConfigDict(
        **CONFIG,
        json_schema_extra={
            "oneOf": [{"required": ["cluster"]}, {"required": ["clusters"]}],
            "dependentSchemas": {"clusterId": {"required": ["cluster"]}},
        },
    )

    cluster: str | None = Field(
        default=None,
        min_length=1,
        description="The cluster's name. Its quota entries override, key by key, those "
        "of shared documents (metadata.clusters) for the same entity.",
    )
    clusters: list[_ClusterName] | None = Field(
        default=None,
        min_length=1,
        description='A shared document: the clusters it applies to, or ["*"] for every '
        "cluster the set names. Documents naming one cluster (metadata.cluster) "
        "override its entries key by key.",
        json_schema_extra={
            "uniqueItems": True,
            # "*" only alone
            "not": {"contains": {"const": ALL_CLUSTERS}, "minItems": 2},
        },
    )
    cluster_id: str | None = Field(
        default=None,
        alias="clusterId",
        min_length=1,
        description="Expected Kafka cluster id; plan refuses to run against another. "
        "Only with metadata.cluster.",
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Free-form string labels.")

    _no_null = field_validator("cluster", "clusters", "cluster_id", mode="before")(reject_null)

    @field_validator("clusters", mode="after")
    @classmethod
    def _distinct_clusters(cls, value: list[str]) -> list[str]:
        if ALL_CLUSTERS in value and len(value) > 1:
            raise ValueError('"*" already names every cluster: list it alone')
        repeated = sorted({c for c in value if value.count(c) > 1})
        if repeated:
            raise ValueError(f"{render_raw(repeated[0])} is listed twice")
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _one_way_to_name_clusters(
        cls, data: Any, handler: ModelWrapValidatorHandler[Metadata]
    ) -> Metadata:
        # A wrap validator, so these are reported next to the fields' own
        # errors (an "after" validator would be skipped when a label is bad),
        # each at its own field.
        found: list[InitErrorDetails] = []
        if isinstance(data, dict):
            if "cluster" not in data and "clusters" not in data:
                found.append({"type": "missing", "loc": ("cluster",), "input": data})
            if "cluster" in data and "clusters" in data:
                found.append(
                    _value_error(
                        "clusters",
                        data,
                        "give cluster (this cluster's own document) or clusters (a document "
                        "shared by several clusters), not both",
                    )
                )
            if data.get("clusterId") is not None and "clusters" in data:
                found.append(
                    _value_error(
                        "clusterId",
                        data,
                        "only allowed with cluster: a document shared by several clusters "
                        "(clusters) cannot name one cluster id",
                    )
                )
        try:
            model = handler(data)
        except ValidationError as exc:
            if found:
                raise ValidationError.from_exception_data(
                    exc.title, [*_details(exc), *found]
                ) from None
            raise
        if found:
            raise ValidationError.from_exception_data(cls.__name__, found)
        return model

    @property
    def names(self) -> tuple[str, ...]:
        """The cluster names as written (``("*",)`` for every cluster)."""
        return (self.cluster,) if self.cluster is not None else tuple(self.clusters or ())


class Spec(BaseModel):
    """What the manifests own and the quotas they want."""

    model_config = CONFIG

    scope: list[ScopeEntry] | None = Field(
        default=None,
        min_length=1,
        description="What the manifest set owns: the union of every document's entries. "
        "At least one document of a set must declare a scope.",
    )
    allow_deletes: bool = Field(
        default=False,
        alias="allowDeletes",
        description="Delete owned entities that no manifest declares. Documents that "
        "set it must agree. Default false.",
    )
    quotas: list[QuotaEntry] = Field(
        default_factory=list, description="Entities and their quota values."
    )
    protect: list[ProtectEntry] | None = Field(
        default=None,
        description="Entities that must never be deleted, declared in quotas or not: "
        "a plan deleting one is refused whatever allowDeletes and the command-line "
        "flags say. Each must be inside the scope.",
    )
    change_budget: ChangeBudgetSpec | None = Field(
        default=None,
        alias="changeBudget",
        description="Limits on what one plan may change (deletes, raised quotas).",
    )
    probes: list[ProbeSpec] | None = Field(
        default=None,
        description="Clients that matter: every plan and drift report shows what it does "
        "to their effective quotas (value, source entity, quota group), per key.",
    )
    storage_policy: StoragePolicySpec | None = Field(
        default=None,
        alias="storagePolicy",
        description="Scale producer_byte_rate by cluster-wide volume usage (storage-aware "
        "quotas). Documents of a set that declare one must agree.",
    )

    _no_null = field_validator(
        "scope", "protect", "change_budget", "probes", "storage_policy", mode="before"
    )(reject_null)


class ManifestDocument(BaseModel):
    """A quotaform ClientQuotas manifest: desired Kafka client quotas for one cluster."""

    model_config = CONFIG

    api_version: Literal["quotaform.io/v1"] = Field(alias="apiVersion")
    kind: Literal["ClientQuotas"]
    metadata: Metadata
    spec: Spec
