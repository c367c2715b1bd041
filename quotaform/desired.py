"""The desired state: what the manifests ask for, free of YAML and pydantic.

``load_manifests`` (``quotaform.manifest``) builds a :class:`DesiredState`; the
diff compares it with the live cluster. Everything here is a frozen value:
tuples and read-only mappings, ordered deterministically.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from quotaform.entity import CLIENT_ID, ENTITY_TYPES, IP, USER, VALID_SHAPES, Entity

__all__ = [
    "SHAPE_NAMES",
    "ChangeLimits",
    "DesiredEntity",
    "DesiredState",
    "Scope",
    "ScopeRule",
    "SourceLocation",
    "shape_from_name",
    "shape_name",
]

_TYPE_ORDER = {t: i for i, t in enumerate(ENTITY_TYPES)}

#: Manifest spelling of each valid shape (``spec.scope[].shape``).
SHAPE_NAMES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        USER: (USER,),
        CLIENT_ID: (CLIENT_ID,),
        f"{USER}+{CLIENT_ID}": (USER, CLIENT_ID),
        IP: (IP,),
    }
)


def _shape_key(shape: tuple[str, ...]) -> tuple[object, ...]:
    # Whatever order Entity.sort_key gives shapes, so scopes list like entities.
    return Entity.from_pairs((t, None) for t in shape).sort_key()


def shape_from_name(name: str) -> tuple[str, ...]:
    """``"user+client-id"`` -> ``("user", "client-id")``.

    Raises:
        ValueError: not one of ``user``, ``client-id``, ``user+client-id``, ``ip``
            (the shapes of KIP-546 / KIP-612).
    """
    try:
        return SHAPE_NAMES[name]
    except KeyError:
        raise ValueError(
            f"unknown shape {name!r} (expected one of {', '.join(SHAPE_NAMES)})"
        ) from None


def shape_name(shape: tuple[str, ...]) -> str:
    """``("user", "client-id")`` -> ``"user+client-id"``."""
    return "+".join(shape)


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """Where something was declared: a manifest file path (as given) and a 1-based line."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True, slots=True)
class ScopeRule:
    """One ``spec.scope`` entry: a set of entities the manifests own.

    Attributes:
        shape: entity types, sorted like :attr:`Entity.types`, e.g.
            ``("user", "client-id")``; one of the shapes in :data:`SHAPE_NAMES`.
        prefixes: ``((entity type, (prefix, ...)), ...)`` sorted by entity type.
            A *named* part of that type is owned only when its name starts with one
            of the prefixes; types without an entry own every name.
        include_defaults: whether *default* parts (name ``None``) are owned.

    An entity matches when its types equal ``shape`` exactly, every named part
    passes its prefix filter and, if any part is a default,
    ``include_defaults`` is true. So with ``shape=("user", "client-id")``,
    ``prefixes=(("user", ("svc-",)),)`` and defaults included,
    ``{user=svc-a, client-id=<default>}`` and ``{user=<default>, client-id=x}``
    match but ``{user=bob, client-id=x}`` does not.
    """

    shape: tuple[str, ...]
    prefixes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    include_defaults: bool = True

    @classmethod
    def build(
        cls,
        shape: Iterable[str],
        prefixes: Mapping[str, Iterable[str]] | None = None,
        *,
        include_defaults: bool = True,
    ) -> ScopeRule:
        """A rule with its shape and prefixes put in canonical order.

        Raises:
            ValueError: the shape is not a Kafka shape, or a prefix names an
                entity type outside the shape.
        """
        ordered = Entity.from_pairs((t, None) for t in set(shape)).types
        if ordered not in VALID_SHAPES:
            raise ValueError(f"unsupported shape {shape_name(ordered)!r}")
        pairs = []
        for etype, names in (prefixes or {}).items():
            if etype not in ordered:
                raise ValueError(
                    f"prefixes for {etype!r}, which is not part of shape {shape_name(ordered)!r}"
                )
            pairs.append((etype, tuple(sorted(set(names)))))
        pairs.sort(key=lambda p: _TYPE_ORDER[p[0]])
        return cls(ordered, tuple(pairs), include_defaults)

    def prefixes_for(self, entity_type: str) -> tuple[str, ...] | None:
        """The prefixes filtering names of ``entity_type``, ``None`` = all names."""
        for etype, names in self.prefixes:
            if etype == entity_type:
                return names
        return None

    def matches(self, entity: Entity) -> bool:
        """Whether this rule owns ``entity`` (see the class docstring)."""
        if entity.types != self.shape:
            return False
        for etype, name in entity.parts:
            if name is None:
                if not self.include_defaults:
                    return False
                continue
            allowed = self.prefixes_for(etype)
            if allowed is not None and not name.startswith(allowed):
                return False
        return True

    def __str__(self) -> str:
        details = [
            f"{etype} names starting with {' or '.join(repr(p) for p in names)}"
            for etype, names in self.prefixes
        ]
        if not self.include_defaults:
            details.append("no defaults")
        suffix = f" [{'; '.join(details)}]" if details else ""
        return f"{shape_name(self.shape)}{suffix}"


@dataclass(frozen=True, slots=True)
class Scope:
    """What the manifest set owns: the union of its :class:`ScopeRule` s.

    Entities outside the scope are left alone by plan and apply, whatever the
    cluster holds for them.
    """

    rules: tuple[ScopeRule, ...]

    @classmethod
    def build(cls, rules: Iterable[ScopeRule]) -> Scope:
        """A scope of ``rules`` without repeats, ordered by shape (like entities),
        then prefixes, rules that include defaults first."""
        return cls(
            tuple(
                sorted(
                    set(rules),
                    key=lambda r: (_shape_key(r.shape), r.prefixes, not r.include_defaults),
                )
            )
        )

    def contains(self, entity: Entity) -> bool:
        """Whether any rule owns ``entity``."""
        return any(rule.matches(entity) for rule in self.rules)

    @property
    def shapes(self) -> tuple[tuple[str, ...], ...]:
        """The distinct shapes the rules cover, in :meth:`Entity.sort_key` order
        (``("user",), ("client-id",), ("user", "client-id"), ("ip",)``): what the
        live side needs to describe."""
        return tuple(sorted({rule.shape for rule in self.rules}, key=_shape_key))

    def __str__(self) -> str:
        return ", ".join(str(rule) for rule in self.rules) or "(nothing)"


@dataclass(frozen=True, slots=True)
class DesiredEntity:
    """One declared entity and its quotas.

    Attributes:
        entity: the client-quota entity (``None`` names are default entities).
        quotas: quota key -> value as Kafka stores it (float64), sorted by key:
            bytes/s for ``producer_byte_rate`` / ``consumer_byte_rate``, % of one
            thread for ``request_percentage``, mutations/s for
            ``controller_mutation_rate``, connections/s for
            ``connection_creation_rate``. Keys not listed are not managed for
            this entity.
        prevent_destroy: the manifest asks never to delete this entity nor
            remove any of its quota keys (``preventDestroy: true``).
        source: where the entity was declared; for an entity declared by a
            shared document and overlaid by a cluster's own document, the
            cluster's own declaration.
        shared_source: the shared declaration (``metadata.clusters``) that
            ``source`` overlays, ``None`` when there is none.
    """

    entity: Entity
    quotas: Mapping[str, float]
    prevent_destroy: bool
    source: SourceLocation
    shared_source: SourceLocation | None = None


@dataclass(frozen=True, slots=True)
class ChangeLimits:
    """The change budget the manifests declare (``spec.changeBudget``).

    ``None`` means "not declared here": the guard's default (or a flag)
    applies. :func:`quotaform.guards.budget_from_manifest` turns these into a
    :class:`~quotaform.guards.ChangeBudget`.

    Attributes:
        max_deletes: most entities one plan may delete.
        max_delete_fraction: largest share (0 to 1) of the live in-scope
            entities one plan may delete.
        max_relax_factor: largest factor by which one plan may raise a quota
            value (a removed key counts as raised to its fallback).
    """

    max_deletes: int | None = None
    max_delete_fraction: float | None = None
    max_relax_factor: float | None = None


def _no_protection() -> Mapping[Entity, SourceLocation]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class DesiredState:
    """Everything a manifest set declares, validated.

    Attributes:
        cluster: the cluster's name: the one the set names (``metadata.cluster``),
            or the one it was loaded for when it names several.
        cluster_id: the expected Kafka cluster id (``metadata.clusterId``), or
            ``None`` when no manifest gives one.
        scope: what the manifests own.
        allow_deletes: whether owned entities absent from the manifests may be
            deleted (``spec.allowDeletes``, default false).
        entities: entity -> :class:`DesiredEntity`, iterating in
            :meth:`Entity.sort_key` order.
        warnings: ``path:line: field: message`` texts about things that are valid
            but probably not meant (e.g. a user literally named ``"<default>"``).
        protected: entities that must never be deleted, each with where the
            protection is declared (a ``spec.protect`` entry, else the
            ``preventDestroy`` declaration), iterating in
            :meth:`Entity.sort_key` order. Unlike ``preventDestroy``, a
            ``spec.protect`` entry outlives the entity's own declaration: it
            is what keeps an undeclared entity from being deleted.
        change_limits: the declared change budget (``spec.changeBudget``).
    """

    cluster: str
    cluster_id: str | None
    scope: Scope
    allow_deletes: bool
    entities: Mapping[Entity, DesiredEntity]
    warnings: tuple[str, ...] = ()
    protected: Mapping[Entity, SourceLocation] = field(default_factory=_no_protection)
    change_limits: ChangeLimits = ChangeLimits()

    @classmethod
    def build(
        cls,
        *,
        cluster: str,
        cluster_id: str | None,
        scope: Scope,
        allow_deletes: bool,
        entities: Iterable[DesiredEntity],
        warnings: Iterable[str] = (),
        protected: Mapping[Entity, SourceLocation] | None = None,
        change_limits: ChangeLimits | None = None,
    ) -> DesiredState:
        """A state with entities sorted and wrapped read-only.

        ``protected`` is completed with every ``preventDestroy`` entity (at its
        declaration) that it does not already name.

        Raises:
            ValueError: the same entity is given twice.
        """
        by_entity: dict[Entity, DesiredEntity] = {}
        for desired in sorted(entities, key=lambda d: d.entity.sort_key()):
            if desired.entity in by_entity:
                raise ValueError(f"entity {desired.entity} given twice")
            by_entity[desired.entity] = desired
        guarded = dict(protected or {})
        for desired in by_entity.values():
            if desired.prevent_destroy:
                guarded.setdefault(desired.entity, desired.source)
        return cls(
            cluster=cluster,
            cluster_id=cluster_id,
            scope=scope,
            allow_deletes=allow_deletes,
            entities=MappingProxyType(by_entity),
            warnings=tuple(warnings),
            protected=MappingProxyType(
                {e: guarded[e] for e in sorted(guarded, key=Entity.sort_key)}
            ),
            change_limits=change_limits or ChangeLimits(),
        )
