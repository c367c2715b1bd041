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

import re
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

from quotaform.kafka.entity import CLIENT_ID, IP, SHAPE_NAMES, USER, Entity, mixes_ip, present_types
from quotaform.kafka.keys import QUOTA_KEYS, ValueType
from quotaform.kafka.names import normalise_ip
from quotaform.kafka.resolution import Principal
from quotaform.kafka.units import parse_quota_value, render_raw, value_pattern
from quotaform.plan.state import ChangeBudget, SourceLocation
from quotaform.plan.storage_types import Limit, LimitType, OnUnknown, StoragePolicy

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

_CONFIG = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=False)


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

_ENTITY_FIELD_TYPES = {"user": "user", "client_id": "client-id", "ip": "ip"}


_YAML_NAMES = {
    "cluster_id": "clusterId",
    "client_id": "client-id",
    "change_budget": "changeBudget",
    "max_deletes": "maxDeletes",
    "max_delete_fraction": "maxDeleteFraction",
    "max_relax_factor": "maxRelaxFactor",
}


def _reject_null(value: object, info: ValidationInfo) -> object:
    # Optional fields use None for "left out"; an explicit YAML null is more
    # likely a half-deleted entry than a wish, so it is refused.
    if value is None:
        field = info.field_name or ""
        name = _YAML_NAMES.get(field, field)
        raise ValueError(f"{name} is null: give a value, or leave {name} out")
    return value


class DefaultEntity(BaseModel):
    """{default: true}: the default entity of a type (name null on the wire)."""

    model_config = _CONFIG

    default: Literal[True]


EntityPart = Annotated[str | DefaultEntity | None, WithJsonSchema(_ENTITY_PART_SCHEMA)]


class EntitySpec(BaseModel):
    """A client-quota entity: one part per entity type, each a name or
    {default: true}. Valid shapes: user, client-id, user + client-id, ip
    (KIP-546, KIP-612); ip never combines with user or client-id."""

    model_config = ConfigDict(**_CONFIG, json_schema_extra={"minProperties": 1})

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
        etype = _ENTITY_FIELD_TYPES[info.field_name or ""]
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

    model_config = ConfigDict(**_CONFIG, json_schema_extra={"minProperties": 1})

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

    model_config = _CONFIG

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

    model_config = _CONFIG

    entity: EntitySpec


class ProbeSpec(BaseModel):
    """A client that matters to reviewers: plans and drift reports show what a
    change does to its effective quotas. A user and/or a client id (a part
    left out is unknown: the view covers what is certain), or an ip."""

    model_config = ConfigDict(**_CONFIG, json_schema_extra={"minProperties": 1})

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

    model_config = ConfigDict(**_CONFIG, json_schema_extra={"minProperties": 1})

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
    )(_reject_null)

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

    model_config = _CONFIG

    user: _PrefixList | None = None
    client_id: _PrefixList | None = Field(default=None, alias="client-id")
    ip: _PrefixList | None = None

    _no_null = field_validator("user", "client_id", "ip", mode="before")(_reject_null)

    def as_dict(self) -> dict[str, list[str]]:
        """``{entity type: prefixes}`` for the types given."""
        return {
            etype: value
            for field, etype in _ENTITY_FIELD_TYPES.items()
            if (value := getattr(self, field)) is not None
        }


class ScopeEntry(BaseModel):
    """Entities of one shape that the manifests own. Owned entities that no
    manifest declares are deleted only with allowDeletes; everything outside the
    scope is never touched."""

    model_config = _CONFIG

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

    _no_null = field_validator("prefixes", mode="before")(_reject_null)

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
        **_CONFIG,
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

    _no_null = field_validator("cluster", "clusters", "cluster_id", mode="before")(_reject_null)

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


# ----------------------------------------------------------------- storage policy

_DURATION_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h|d)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
_NUMBER = r"[0-9]+(?:\.[0-9]+)?"
# ISO-8601 as java.time.Duration reads it (Strimzi's settings): days, then
# after T hours, minutes, seconds; no years or months (not a fixed length).
_ISO_DURATION_RE = re.compile(
    rf"^P(?:(?P<d>{_NUMBER})D)?(?:T(?=[0-9])(?:(?P<h>{_NUMBER})H)?(?:(?P<m>{_NUMBER})M)?"
    rf"(?:(?P<s>{_NUMBER})S)?)?$",
    re.IGNORECASE,
)
_ISO_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_DURATION_EXAMPLES = "30s, 5m, 1h, or ISO-8601 PT30S, PT5M, PT1H30M"


def _iso_duration(text: str) -> float:
    match = _ISO_DURATION_RE.match(text)
    parts = {} if match is None else {u: v for u, v in match.groupdict().items() if v}
    if not parts:
        raise ValueError(
            f"{render_raw(text)} is not an ISO-8601 duration: after P give days (P1D), "
            "after T hours, minutes or seconds, each a number before its unit "
            "(PT30S, PT5M, PT1H30M)"
        )
    return sum(float(v) * _ISO_UNITS[u] for u, v in parts.items())


def parse_duration(value: object) -> float:
    """Seconds from ``30``, ``"30s"``, ``"5m"``, ``"1h"``, ``"1.5d"``,
    ``"500ms"``, or ISO-8601 (``"PT30S"``, ``"PT5M"``, ``"PT1H30M"``,
    ``"P1D"``; Strimzi's spelling, any case).

    Raises:
        ValueError: anything else, or not above 0.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(
            f"expected a duration such as {_DURATION_EXAMPLES}, got {render_raw(value)}"
        )
    if isinstance(value, str) and value.strip()[:1] in ("P", "p"):
        seconds = _iso_duration(value.strip())
    elif isinstance(value, str):
        match = _DURATION_RE.match(value)
        if match is None:
            raise ValueError(
                f"{render_raw(value)} is not a duration (examples: {_DURATION_EXAMPLES})"
            )
        seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    else:
        seconds = float(value)
    if not seconds > 0 or seconds != seconds or seconds == float("inf"):
        raise ValueError(f"a duration must be above 0, got {render_raw(value)}")
    return seconds


class LimitSpec(BaseModel):
    """A soft or hard storage limit (the Strimzi proposal's Limit Definition):
    ConsumedBytes (breached when a volume's consumed bytes exceed the level;
    the proposal's text calls it ConsumedSpace, also accepted), MinFreeBytes
    (breached when free bytes drop below the level), MinFreePercentage
    (breached when the free share of capacity drops below the level)."""

    model_config = _CONFIG

    type: str = Field(
        description="ConsumedBytes (alias ConsumedSpace), MinFreeBytes or MinFreePercentage.",
        json_schema_extra={
            "enum": ["ConsumedBytes", "ConsumedSpace", "MinFreeBytes", "MinFreePercentage"]
        },
    )
    level: float | int | str = Field(
        description="Bytes for ConsumedBytes and MinFreeBytes (50GiB, 1TB, 1073741824); "
        'a percentage of capacity for MinFreePercentage, written "10%" or as a number '
        "1..100 meaning percent (10). A bare number below 1 (Strimzi's ratio spelling, "
        '0.1) is refused as ambiguous: write "10%" (or "0.5%" for half a percent).'
    )

    @field_validator("type", mode="after")
    @classmethod
    def _known_type(cls, value: str) -> str:
        try:
            return LimitType.parse(value).value
        except ValueError:
            raise ValueError(
                f"{render_raw(value)} is not a limit type: ConsumedBytes, MinFreeBytes or "
                "MinFreePercentage"
            ) from None

    @field_validator("level", mode="after")
    @classmethod
    def _check_level(cls, value: float | str, info: ValidationInfo) -> float | str:
        # A field validator (not a model one) so an error names the level's
        # own line; the type is validated first (field order) and, when it
        # is bad, reported alone.
        if "type" in info.data:
            _level(LimitType.parse(info.data["type"]), value)
        return value

    def to_limit(self) -> Limit:
        """The :class:`~quotaform.plan.storage.Limit` (level in bytes or %).

        Raises:
            ValueError: a level that is not a size (bytes types) or not within
                0..100 (MinFreePercentage).
        """
        kind = LimitType.parse(self.type)
        return Limit(kind, _level(kind, self.level))


def _level(kind: LimitType, value: object) -> float:
    """A limit's level: bytes, or percent for MinFreePercentage (:func:`_parse_percent`)."""
    if kind is LimitType.MIN_FREE_PERCENTAGE:
        level = _parse_percent(value, example="10%")
        if not 0 < level < 100:
            raise ValueError(f"a MinFreePercentage level is within 0..100, got {level:g}")
        return level
    try:
        return parse_quota_value("producer_byte_rate", value)
    except ValueError as exc:
        raise ValueError(str(exc).replace("producer_byte_rate", f"{kind.value} level")) from None


def _parse_percent(value: object, *, example: str) -> float:
    """Percent from ``"10%"``, ``"0.5%"`` or a number 1..100 meaning percent
    (``10``): the one rule for every percentage of ``storagePolicy``.

    A number below 1 without ``%`` is refused: Strimzi's settings are ratios
    (``0.1`` = 10 %), so it cannot be told from a small percentage.

    Raises:
        ValueError: not a number or percentage, not above 0, or ambiguous;
            ``example`` (``"10%"``) is the spelling the message suggests.
    """
    marked = isinstance(value, str) and value.strip().endswith("%")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a percentage such as {example}, got {render_raw(value)}")
    percent = parse_quota_value("request_percentage", value)
    if not marked and percent < 1:
        written = f"{percent * 100:g}%"
        raise ValueError(
            f"{render_raw(value)} is ambiguous: Strimzi writes a ratio (0..1) where "
            f'quotaform reads percent; write "{written}" (or {percent * 100:g}) for '
            f'{percent * 100:g} %, or "{percent:g}%" for {percent:g} %'
        )
    return percent


class StoragePolicySpec(BaseModel):
    """Storage-aware producer quotas: scale the declared producer_byte_rate of
    the entities it applies to by a factor from cluster-wide volume usage
    (the Strimzi volume-usage policy, run from outside the broker). Per volume:
    factor 1 while the soft limit complies, the share of the soft-to-hard
    distance that remains between them, PAUSE at or past the hard limit; the
    most restrictive volume of the cluster wins."""

    model_config = _CONFIG

    soft: LimitSpec = Field(description="Where throttling starts.")
    hard: LimitSpec = Field(
        description="Where produce is paused (pauseRate). May equal soft (the released "
        "Strimzi plug-in's single limit: OPEN, then PAUSE); never before it."
    )
    stale_after: float | int | str = Field(
        default="5m",
        alias="staleAfter",
        description="A broker whose latest snapshot is older than this is unknown "
        "(30s, 5m, 1h, or ISO-8601 as Strimzi writes it: PT30S, PT5M, PT1H30M; default 5m).",
    )
    on_unknown: Literal["PAUSE", "OPEN"] = Field(
        default="PAUSE",
        alias="onUnknown",
        description="What a broker or volume that cannot report does: PAUSE (the "
        "fail-safe, default) or OPEN (judge the brokers that reported).",
    )
    applies_to: list[EntitySpec] | None = Field(
        default=None,
        alias="appliesTo",
        description="The declared entities whose producer_byte_rate is scaled "
        "(default: every declared entity with one).",
    )
    exempt: list[EntitySpec] | None = Field(
        default=None,
        description="Entities never scaled (platform services, the snapshot publisher).",
    )
    pause_rate: float | int | str = Field(
        default=1024,
        alias="pauseRate",
        description="The producer_byte_rate written under PAUSE (the broker rejects 0); "
        "bytes/s, default 1KiB. Never above an entity's declared value.",
    )
    hysteresis: float | int | str = Field(
        default="5%",
        description='The factor\'s step in percent, written "5%" or as a number 1..50 '
        "meaning percent (5); a bare number below 1 (0.05) is refused as ambiguous, as "
        "for MinFreePercentage levels. Factors are rounded down to multiples of it and "
        "quotas are rewritten only when the state changes or the factor moves by more "
        "than one step. Above 0, at most 50%.",
    )

    _no_null = field_validator(
        "stale_after", "applies_to", "exempt", "pause_rate", "hysteresis", mode="before"
    )(_reject_null)

    @field_validator("stale_after", mode="after")
    @classmethod
    def _duration(cls, value: object) -> object:
        parse_duration(value)
        return value

    @field_validator("pause_rate", mode="after")
    @classmethod
    def _rate(cls, value: object) -> object:
        parse_quota_value("producer_byte_rate", value)
        return value

    @field_validator("hysteresis", mode="after")
    @classmethod
    def _step(cls, value: object) -> object:
        _parse_step(value)
        return value

    @model_validator(mode="after")
    def _ordered(self) -> StoragePolicySpec:
        soft, hard = self.soft.to_limit(), self.hard.to_limit()
        # Equal levels are allowed: the released Strimzi plug-in has one
        # limit, written as soft = hard; the volume goes from OPEN to PAUSE.
        if soft.type is hard.type:
            inverted = (
                soft.level > hard.level
                if soft.type is LimitType.CONSUMED_BYTES
                else soft.level < hard.level
            )
            if inverted:
                raise ValueError(
                    f"the soft limit ({soft}) must be reached before the hard limit ({hard}) "
                    "or with it: "
                    + (
                        "for ConsumedBytes the soft level is the smaller or equal"
                        if soft.type is LimitType.CONSUMED_BYTES
                        else f"for {soft.type.value} the soft level is the larger or equal"
                    )
                )
        return self

    def to_policy(self, source: SourceLocation | None = None) -> StoragePolicy:
        """The :class:`~quotaform.plan.storage.StoragePolicy`."""
        return StoragePolicy(
            soft=self.soft.to_limit(),
            hard=self.hard.to_limit(),
            stale_after_s=parse_duration(self.stale_after),
            on_unknown=OnUnknown(self.on_unknown),
            applies_to=None
            if self.applies_to is None
            else tuple(e.to_entity() for e in self.applies_to),
            exempt=tuple(e.to_entity() for e in self.exempt or ()),
            pause_rate=parse_quota_value("producer_byte_rate", self.pause_rate),
            step=_parse_step(self.hysteresis),
            source=source,
        )


def _parse_step(value: object) -> float:
    """The hysteresis step as a share (``"5%"`` or ``5`` -> 0.05)."""
    step = _parse_percent(value, example="5%") / 100.0
    if not 0 < step <= 0.5:
        raise ValueError(f"hysteresis must be above 0 and at most 50%, got {render_raw(value)}")
    return step


class Spec(BaseModel):
    """What the manifests own and the quotas they want."""

    model_config = _CONFIG

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
    )(_reject_null)


class ManifestDocument(BaseModel):
    """A quotaform ClientQuotas manifest: desired Kafka client quotas for one cluster."""

    model_config = _CONFIG

    api_version: Literal["quotaform.io/v1"] = Field(alias="apiVersion")
    kind: Literal["ClientQuotas"]
    metadata: Metadata
    spec: Spec
