"""The plan's inputs as plain data: the desired state the manifests declare and
the live state read from the cluster, with the scope that bounds both and the
change budget that bounds a plan.

:func:`quotaform.manifest.load_manifests` builds a :class:`DesiredState`;
:func:`quotaform.cluster.read.read_live_state` builds a :class:`LiveState`;
:func:`quotaform.plan.diff.compute_plan` compares them. Everything here is a
frozen value: tuples and read-only mappings, ordered deterministically.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType

from quotaform.kafka.entity import ENTITY_TYPES, SHAPES, Entity, Shape, shape_name
from quotaform.kafka.resolution import Principal
from quotaform.plan.source import SourceLocation
from quotaform.plan.storage_types import StoragePolicy

__all__ = [
    "DEFAULT_MAX_RELAX_FACTOR",
    "ChangeBudget",
    "DesiredEntity",
    "DesiredState",
    "LiveState",
    "Probe",
    "Scope",
    "ScopeRule",
    "SourceLocation",
]

_TYPE_ORDER = {t: i for i, t in enumerate(ENTITY_TYPES)}
_SHAPE_ORDER = {s: i for i, s in enumerate(SHAPES)}

#: Largest factor a quota may be raised by in one plan unless told otherwise.
DEFAULT_MAX_RELAX_FACTOR = 10.0


@dataclass(frozen=True, slots=True)
class ScopeRule:
    """One ``spec.scope`` entry: a set of entities the manifests own.

    Attributes:
        shape: entity types, sorted like :attr:`Entity.types`, e.g.
            ``("user", "client-id")``; one of :data:`~quotaform.kafka.entity.SHAPES`.
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

    shape: Shape
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
        if ordered not in _SHAPE_ORDER:
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
                    key=lambda r: (_SHAPE_ORDER[r.shape], r.prefixes, not r.include_defaults),
                )
            )
        )

    def contains(self, entity: Entity) -> bool:
        """Whether any rule owns ``entity``."""
        return any(rule.matches(entity) for rule in self.rules)

    @property
    def shapes(self) -> tuple[Shape, ...]:
        """The distinct shapes the rules cover, in :data:`~quotaform.kafka.entity.SHAPES`
        order: what the live side needs to describe."""
        return tuple(sorted({rule.shape for rule in self.rules}, key=_SHAPE_ORDER.__getitem__))

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


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeBudget:
    """What one plan may change before apply refuses it: limits and permissions.

    The same type holds what the manifests declare (``spec.allowDeletes``,
    ``spec.changeBudget``), what one run's flags say (``--allow-deletes``,
    ``--max-deletes``, ...), and their combination (:meth:`over`). ``None``
    means "not said here"; :meth:`resolved` fills in the defaults.

    Attributes:
        max_deletes: most entities one plan may delete.
        max_delete_fraction: largest share (0 to 1) of the live in-scope
            entities one plan may delete.
        max_relax_factor: largest factor ``new / old`` by which a quota value
            may rise; a removed key rises to its fallback (unlimited or an
            unknown value always exceeds). Default
            :data:`DEFAULT_MAX_RELAX_FACTOR`.
        allow_deletes: in-scope entities no manifest declares may be deleted.
        allow_mass_delete: the delete limits may be exceeded.
        allow_default_removal: a default entity may be deleted or lose a key.
        allow_relax: ``max_relax_factor`` may be exceeded.

    Protected entities (``spec.protect``, ``preventDestroy``) have no switch:
    the protection must be removed from the manifests first.
    """

    max_deletes: int | None = None
    max_delete_fraction: float | None = None
    max_relax_factor: float | None = None
    allow_deletes: bool | None = None
    allow_mass_delete: bool | None = None
    allow_default_removal: bool | None = None
    allow_relax: bool | None = None

    def over(self, base: ChangeBudget) -> ChangeBudget:
        """This budget's settings where given (not ``None``), else ``base``'s:
        ``flags.over(declared)``."""
        return replace(
            base, **{f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}
        )

    def resolved(self) -> ChangeBudget:
        """Every field set: unset limits become the defaults (no delete
        limits, :data:`DEFAULT_MAX_RELAX_FACTOR`), unset permissions false."""
        return ChangeBudget(
            max_deletes=self.max_deletes,
            max_delete_fraction=self.max_delete_fraction,
            max_relax_factor=(
                DEFAULT_MAX_RELAX_FACTOR if self.max_relax_factor is None else self.max_relax_factor
            ),
            allow_deletes=bool(self.allow_deletes),
            allow_mass_delete=bool(self.allow_mass_delete),
            allow_default_removal=bool(self.allow_default_removal),
            allow_relax=bool(self.allow_relax),
        )


@dataclass(frozen=True, slots=True)
class Probe:
    """A principal the manifests declare as mattering (``spec.probes``): plans
    and drift reports show what a change does to its effective quotas."""

    principal: Principal
    source: SourceLocation


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
        budget: the declared change budget (``spec.allowDeletes``,
            ``spec.changeBudget``); flags go over it (:meth:`ChangeBudget.over`).
        probes: the declared probes (``spec.probes``), in declaration order,
            each principal once.
        storage: the storage policy (``spec.storagePolicy``,
            :class:`~quotaform.plan.storage.StoragePolicy`), ``None`` when none
            is declared.
    """

    cluster: str
    cluster_id: str | None
    scope: Scope
    entities: Mapping[Entity, DesiredEntity]
    warnings: tuple[str, ...] = ()
    protected: Mapping[Entity, SourceLocation] = field(default_factory=_no_protection)
    budget: ChangeBudget = ChangeBudget()
    probes: tuple[Probe, ...] = ()
    storage: StoragePolicy | None = None

    @property
    def allow_deletes(self) -> bool:
        """Whether the manifests allow deletes (``spec.allowDeletes: true``)."""
        return bool(self.budget.allow_deletes)

    @property
    def quotas(self) -> dict[Entity, Mapping[str, float]]:
        """``{entity: {quota key: quota value}}`` of every declared entity."""
        return {e: d.quotas for e, d in self.entities.items()}

    @classmethod
    def build(
        cls,
        *,
        cluster: str,
        cluster_id: str | None,
        scope: Scope,
        entities: Iterable[DesiredEntity],
        warnings: Iterable[str] = (),
        protected: Mapping[Entity, SourceLocation] | None = None,
        budget: ChangeBudget | None = None,
        probes: Iterable[Probe] = (),
        storage: StoragePolicy | None = None,
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
            entities=MappingProxyType(by_entity),
            warnings=tuple(warnings),
            protected=MappingProxyType(
                {e: guarded[e] for e in sorted(guarded, key=Entity.sort_key)}
            ),
            budget=budget or ChangeBudget(),
            probes=tuple(probes),
            storage=storage,
        )


@dataclass(frozen=True, slots=True)
class LiveState:
    """The live quotas of the entities in scope, as read from the cluster.

    Attributes:
        entities: ``{entity: {quota key: quota value}}`` for in-scope entities.
        unmanaged_by_shape: shape name (``user+client-id``) -> live entities of
            that shape outside the scope, for every shape described (zeros
            included), in :data:`~quotaform.kafka.entity.SHAPES` order.
        cluster_id: the cluster's id, when the caller knows it.
        rpc_counts: RPCs made to read the state, by API name.
        outside: ``{entity: {quota key: quota value}}`` of the live entities
            outside the scope that were described (never changed, but they
            take part in every client's resolution).
    """

    entities: Mapping[Entity, Mapping[str, float]]
    unmanaged_by_shape: Mapping[str, int] = field(default_factory=dict)
    cluster_id: str | None = None
    rpc_counts: Mapping[str, int] = field(default_factory=dict)
    outside: Mapping[Entity, Mapping[str, float]] = field(default_factory=dict)

    @property
    def unmanaged(self) -> int:
        """Live entities of the described shapes outside the scope."""
        return sum(self.unmanaged_by_shape.values())
