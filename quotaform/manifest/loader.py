"""Load a manifest set into a :class:`~quotaform.plan.state.DesiredState`.

Strict loading (topicctl's rule): every problem in every file is collected and
reported together, each with its file, 1-based line and field path, in one
:class:`~quotaform.errors.ManifestError`. Files are found by
:mod:`quotaform.manifest.files`, each document read and validated by
:mod:`quotaform.manifest.documents`; this module checks the set as a whole
(one cluster, agreement, scope coverage, duplicates, overlays). Nothing here
talks to Kafka.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from quotaform.errors import ManifestError, ManifestProblem
from quotaform.inputs.yamlsource import gc_paused
from quotaform.kafka.entity import DEFAULT_NAME, USER, Entity, shape_from_name, shape_name
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.names import user_name_problems
from quotaform.kafka.resolution import Principal, QuotaIndex, ShadowKind, shadows
from quotaform.kafka.units import render_raw
from quotaform.manifest.documents import DeclaredEntry, Document, read_set, written_ip
from quotaform.manifest.models import ALL_CLUSTERS, ScopeEntry
from quotaform.plan.state import (
    ChangeBudget,
    DesiredEntity,
    DesiredState,
    Probe,
    Scope,
    ScopeRule,
    SourceLocation,
)
from quotaform.plan.storage_types import SCALED_KEY, StoragePolicy

_log = logging.getLogger(__name__)

__all__ = ["load_manifests", "manifest_clusters"]

_BUDGET_FIELDS = {
    "maxDeletes": "max_deletes",
    "maxDeleteFraction": "max_delete_fraction",
    "maxRelaxFactor": "max_relax_factor",
}


def _check_keys(
    doc: Document, index: int, entry: DeclaredEntry, problems: list[ManifestProblem]
) -> None:
    """Keys that do not apply to the entry's entity type (a per-document check)."""
    entity = entry.entity
    for key in entry.values:
        spec = QUOTA_KEYS[key]
        if not spec.applies_to(entity.types):
            applies = (
                "ip entities"
                if spec.entity_types == {"ip"}
                else ("user, client-id and user+client-id entities")
            )
            problems.append(
                doc.problem(
                    f"{key} does not apply to {shape_name(entity.types)} entities (Kafka: "
                    f'"Invalid configuration key {key}"); it applies to {applies}',
                    "spec",
                    "quotas",
                    index,
                    "values",
                    key,
                )
            )


def _check_names(
    doc: Document,
    loc: tuple[int | str, ...],
    entity: Entity,
    warnings: list[ManifestProblem],
    ip_as_written: str | None,
) -> str:
    """Warnings about names that are valid but probably not meant (user
    names: :func:`~quotaform.kafka.names.user_name_problems`); returns a
    note on a respelled IP (empty when none) for later messages. ``loc`` is the
    entity's location in the document (``spec, quotas, 3, entity``);
    ``ip_as_written`` the ip as written (:func:`~quotaform.manifest.documents.written_ip`)."""
    note = ""
    for etype, name in entity.parts:
        at = (*loc, etype)
        if etype == USER and name is not None:
            warnings += [doc.problem(message, *at) for message in user_name_problems(name)]
        if name == DEFAULT_NAME:
            warnings.append(
                doc.problem(
                    f'"{DEFAULT_NAME}" is an ordinary {etype} name to Kafka, not the default '
                    f"{etype}; write {{default: true}} for the default {etype}",
                    *at,
                )
            )
        if etype == "ip" and ip_as_written is not None and ip_as_written != name:
            note = f" ({render_raw(ip_as_written)} is the same address)"
            warnings.append(
                doc.problem(
                    f"ip {render_raw(ip_as_written)} is used as {render_raw(name)}, its canonical "
                    "spelling: Kafka stores two spellings of one address as separate "
                    "entities that enforce as one",
                    *at,
                )
            )
    return note


def _raw_at(doc: Document, loc: tuple[int | str, ...]) -> Any:
    """The document's raw data at ``loc``."""
    raw: Any = doc.root
    for part in loc:
        raw = raw[part]
    return raw


def _agree(
    values: Sequence[tuple[Document, object]],
    loc: tuple[str, ...],
    what: str,
    problems: list[ManifestProblem],
) -> object | None:
    """The first value; a problem for each document that differs from it."""
    if not values:
        return None
    first_doc, first = values[0]
    first_at = SourceLocation(first_doc.path, first_doc.locate(*loc)[0] or 1)
    for doc, value in values[1:]:
        if value != first:
            problems.append(
                doc.problem(
                    f"{render_raw(value)} differs from {render_raw(first)} at {first_at}: "
                    f"all manifests of a set must {what}",
                    *loc,
                )
            )
    return first


def _scope_rule(entry: ScopeEntry) -> ScopeRule:
    prefixes = entry.prefixes.as_dict() if entry.prefixes is not None else None
    return ScopeRule.build(
        shape_from_name(entry.shape), prefixes, include_defaults=entry.include_defaults
    )


def _named(docs: Sequence[Document]) -> list[str]:
    """Cluster names the documents give, sorted, ``"*"`` left out."""
    return sorted({n for d in docs for n in d.clusters or () if n != ALL_CLUSTERS})


def _select(
    docs: list[Document],
    cluster: str | None,
    where: str,
    problems: list[ManifestProblem],
) -> tuple[str | None, list[Document], bool] | None:
    """``(cluster name, the documents for it, whether every document's cluster
    is known)``, or ``None`` when the set cannot be narrowed to one cluster (a
    problem says why) and set-level checks must not run. The name is ``None``
    only when no document gives a valid one (already a problem)."""
    named = _named(docs)
    if cluster is None and not any(d.shared for d in docs):
        # The single-cluster form: differing names are most likely a typo.
        name = _agree(
            [(d, d.clusters[0]) for d in docs if d.clusters],
            ("metadata", "cluster"),
            "name the same cluster",
            problems,
        )
        return (str(name) if name is not None else None), docs, True
    if cluster is None:
        if len(named) == 1:
            return named[0], [d for d in docs if d.clusters is None or d.applies_to(named[0])], True
        shared = next(d for d in docs if d.shared)
        if not named:
            problems.append(
                shared.problem(
                    'no manifest names a cluster: "*" stands for every cluster the set '
                    "names; name one with metadata.cluster or metadata.clusters",
                    *shared.clusters_loc,
                )
            )
            return None
        first = named[0]
        second = next(
            d for d in docs if any(n not in (first, ALL_CLUSTERS) for n in d.clusters or ())
        )
        problems.append(
            second.problem(
                f"the manifests name {len(named)} clusters ({', '.join(named)}): "
                "choose one with --cluster NAME (connecting with its profile from "
                "quotaform.clusters.yaml), or plan them all with --all-clusters",
                *second.clusters_loc,
            )
        )
        return None
    if cluster not in named:
        listed = f"the set names {', '.join(named)}" if named else "the set names no cluster"
        problems.append(
            ManifestProblem(
                where,
                None,
                "metadata.cluster",
                f"no manifest names cluster {render_raw(cluster)} ({listed}); "
                '"*" documents apply only to clusters some document names',
            )
        )
        return None
    selected = [d for d in docs if d.applies_to(cluster)]
    return cluster, selected, all(d.clusters is not None for d in docs)


def manifest_clusters(paths: Sequence[str | Path]) -> list[str]:
    """The cluster names a manifest set gives, sorted (``"*"`` left out): the
    clusters ``load_manifests(paths, cluster=name)`` can load.

    Raises:
        ManifestError: a file or document cannot be read or validated (the
            same per-document problems :func:`load_manifests` reports).
    """
    problems: list[ManifestProblem] = []
    docs = read_set(paths, problems)
    if problems:
        raise ManifestError(problems)
    return _named(docs)


@dataclass(frozen=True, slots=True)
class _Declared:
    """One quota entry before overlays are merged, with the note on a
    respelled IP for duplicate messages."""

    desired: DesiredEntity
    note: str


def _merge(shared: _Declared | None, own: _Declared | None) -> DesiredEntity:
    """A cluster's own declaration overlays the shared one key by key."""
    if shared is None or own is None:
        found = own or shared
        assert found is not None
        return found.desired
    quotas = {**shared.desired.quotas, **own.desired.quotas}
    return DesiredEntity(
        entity=own.desired.entity,
        quotas=MappingProxyType({k: quotas[k] for k in sorted(quotas)}),
        # Protection only adds up: an overlay cannot drop what the shared file asks.
        prevent_destroy=shared.desired.prevent_destroy or own.desired.prevent_destroy,
        source=own.desired.source,
        shared_source=shared.desired.source,
    )


def _agreed_budget(docs: Sequence[Document], problems: list[ManifestProblem]) -> ChangeBudget:
    """``spec.allowDeletes`` and ``spec.changeBudget``, which every document
    that sets one must agree on."""
    allow_deletes = _agree(
        [(d, d.allow_deletes) for d in docs if d.allow_deletes is not None],
        ("spec", "allowDeletes"),
        "agree on allowDeletes",
        problems,
    )
    limits: dict[str, Any] = {}
    for yaml_name, field in _BUDGET_FIELDS.items():
        limits[field] = _agree(
            [(d, d.budget[yaml_name]) for d in docs if yaml_name in d.budget],
            ("spec", "changeBudget", yaml_name),
            f"agree on changeBudget.{yaml_name}",
            problems,
        )
    return ChangeBudget(allow_deletes=bool(allow_deletes), **limits)


def _declared_scope(
    docs: Sequence[Document], known: bool, problems: list[ManifestProblem]
) -> tuple[Scope, bool]:
    """The union of the documents' ``spec.scope`` and whether it is complete
    enough to judge coverage (``known``: nothing unreadable, every cluster
    known). A set that declares no scope at all is a problem."""
    scope = Scope.build(_scope_rule(e) for d in docs for e in (d.scope or ()))
    known = known and all(d.scope_valid for d in docs)
    if docs and known and not any(d.scope is not None for d in docs):
        problems.append(
            docs[0].problem(
                "no manifest declares spec.scope: the set must say which entities it owns, "
                "e.g. scope: [{shape: user}, {shape: client-id}, {shape: user+client-id}, "
                "{shape: ip}]",
                "spec",
                "scope",
            )
        )
        known = False
    return scope, known


def _outside(entity: Entity, scope: Scope, what: str = "") -> str:
    return (
        f"{entity} is {what}outside the manifests' scope ({scope}): add a "
        "spec.scope entry that owns it, or remove it"
    )


def _declared_entities(
    docs: Sequence[Document],
    scope: Scope | None,
    problems: list[ManifestProblem],
    warnings: list[ManifestProblem],
) -> tuple[dict[Entity, _Declared], dict[Entity, _Declared]]:
    """``(shared, own)``: the quota entries of shared documents
    (``metadata.clusters``) and of the cluster's own, each by entity. Within
    one level a repeat is a problem; ``scope`` (``None``: not known) must own
    every entity."""
    levels: tuple[dict[Entity, _Declared], dict[Entity, _Declared]] = ({}, {})
    for doc in docs:
        declared = levels[0] if doc.shared else levels[1]
        for index, entry in doc.quotas:
            loc = ("spec", "quotas", index, "entity")
            entity = entry.entity
            note = _check_names(doc, loc, entity, warnings, entry.written_ip)
            if entity in declared:
                first = declared[entity]
                problems.append(
                    doc.problem(
                        f"{entity} is declared twice: first at "
                        f"{first.desired.source}{first.note or note}",
                        *loc,
                    )
                )
                continue
            if scope is not None and not scope.contains(entity):
                problems.append(doc.problem(_outside(entity, scope), *loc))
            declared[entity] = _Declared(
                DesiredEntity(
                    entity=entity,
                    quotas=MappingProxyType(entry.values),
                    prevent_destroy=entry.prevent_destroy,
                    source=doc.source("spec", "quotas", index),
                ),
                note,
            )
    return levels


def _protected_entities(
    docs: Sequence[Document],
    declared: Sequence[dict[Entity, _Declared]],
    scope: Scope | None,
    problems: list[ManifestProblem],
    warnings: list[ManifestProblem],
) -> dict[Entity, SourceLocation]:
    """``spec.protect`` entries (which ``scope`` must own), then every
    ``preventDestroy`` entity at the declaration that sets it (an overlaid
    entity's source is the cluster's own, which need not be that one)."""
    protected: dict[Entity, SourceLocation] = {}
    for doc in docs:
        for index, protect in doc.protect:
            loc = ("spec", "protect", index, "entity")
            entity = protect.entity.to_entity()
            _check_names(doc, loc, entity, warnings, written_ip(_raw_at(doc, loc)))
            if scope is not None and not scope.contains(entity):
                problems.append(doc.problem(_outside(entity, scope, "protected but "), *loc))
            protected.setdefault(entity, doc.source("spec", "protect", index))
    for level in declared:
        for entity, found in level.items():
            if found.desired.prevent_destroy:
                protected.setdefault(entity, found.desired.source)
    return protected


def _probes(docs: Sequence[Document], warnings: list[ManifestProblem]) -> list[Probe]:
    """``spec.probes`` of every document, in order, each principal once (the
    first declaration is its source); a user name that is probably not meant
    is a warning, as in an entity."""
    seen: dict[Principal, Probe] = {}
    for doc in docs:
        for index, spec in doc.probes:
            if spec.user is not None:
                at = ("spec", "probes", index, USER)
                warnings += [doc.problem(m, *at) for m in user_name_problems(spec.user)]
            principal = spec.to_principal()
            seen.setdefault(principal, Probe(principal, doc.source("spec", "probes", index)))
    return list(seen.values())


def _shadow_warnings(entities: Mapping[Entity, DesiredEntity]) -> list[ManifestProblem]:
    """One warning per declared (entity, key) the declared configuration
    itself keeps from applying (:func:`~quotaform.kafka.resolution.shadows`),
    naming the entry that takes its place."""
    found = []
    index = QuotaIndex({e: d.quotas for e, d in entities.items()})
    for shadow in shadows(index):
        here, there = entities[shadow.entity].source, entities[shadow.by].source
        by = f"{shadow.by.label()} ({there.path}:{there.line})"
        if shadow.kind is ShadowKind.NEVER:
            message = (
                f"{shadow.entity.label()} never applies to anyone for {shadow.key}: {by} "
                f"sets it too, and every connection has a user (ANONYMOUS at least), so "
                f"Kafka resolves {shadow.key} at that user level first and never looks up "
                f"{shadow.entity.label()}"
            )
        else:
            message = (
                f"{shadow.entity.label()} applies to {shadow.key} only for connections "
                f"that send no client id: {by} sets it for every connection with one"
            )
        found.append(ManifestProblem(here.path, here.line, f"values.{shadow.key}", message))
    return found


def _storage_policy(
    docs: Sequence[Document],
    declared: Mapping[Entity, DesiredEntity],
    problems: list[ManifestProblem],
    warnings: list[ManifestProblem],
) -> StoragePolicy | None:
    """``spec.storagePolicy``: documents that declare one must agree; every
    ``appliesTo`` entity must be declared with ``producer_byte_rate`` (else it
    would silently scale nothing); an ``exempt`` entity that is not is a warning."""
    with_policy = [d for d in docs if d.storage is not None]
    if not with_policy:
        return None
    spec = _agree(
        [(d, d.storage.model_dump(mode="json", by_alias=True)) for d in with_policy if d.storage],
        ("spec", "storagePolicy"),
        "agree on storagePolicy",
        problems,
    )
    if spec is None:
        return None
    first = with_policy[0]
    assert first.storage is not None
    policy = first.storage.to_policy(first.source("spec", "storagePolicy"))
    for field, entities in (("appliesTo", policy.applies_to or ()), ("exempt", policy.exempt)):
        for index, entity in enumerate(entities):
            wanted = declared.get(entity)
            if wanted is not None and SCALED_KEY in wanted.quotas:
                continue
            what = (
                "the policy would scale nothing for it"
                if field == "appliesTo"
                else "nothing to exempt"
            )
            message = f"{entity.label()} is not declared with {SCALED_KEY}: {what}"
            target = problems if field == "appliesTo" else warnings
            target.append(first.problem(message, "spec", "storagePolicy", field, index))
    return policy


def load_manifests(paths: Sequence[str | Path], *, cluster: str | None = None) -> DesiredState:
    """Load, validate and merge manifest files into one :class:`DesiredState`.

    Args:
        paths: files (any name) and directories (searched recursively for
            ``*.yaml`` / ``*.yml``, sorted, hidden entries skipped). Each file may
            hold several YAML documents (``---``); empty documents are ignored.
        cluster: the cluster to load the set for. Documents name one cluster
            (``metadata.cluster``: the cluster's own document) or several
            (``metadata.clusters``, ``["*"]`` for every cluster the set names:
            a shared document). With a name, the documents for that cluster are
            used and the others ignored (their per-document problems are still
            reported); the name must be given by some document. ``None``: the
            set must name exactly one cluster.

    Returns:
        The cluster's name and id, scope (the union of the documents'
        ``spec.scope``), the declared entities with their quota values as
        float64 (bytes/s, %, mutations/s, connections/s), the protected
        entities (``spec.protect`` and ``preventDestroy``), the declared
        change budget (``spec.allowDeletes``, ``spec.changeBudget``), and
        warnings. An entity declared both by a shared document and by the
        cluster's own document gets the shared values overridden and
        extended, key by key, by the cluster's own.

    Raises:
        ManifestError: with every problem in every file: YAML syntax and duplicate
            keys, unknown or missing fields, bad entity names and shapes
            (KIP-546/KIP-612), CIDR or host names as ip, bad quota values
            (``ClientQuotaControlManager.validateQuotaKeyValue`` rules), keys not
            valid for the entity type, the same entity declared twice by
            documents of one kind (shared or the cluster's own), documents
            naming different clusters without ``cluster`` to choose, an unknown
            ``cluster``, differing cluster ids / allowDeletes / change budgets,
            no scope declared anywhere, and entities (declared or protected)
            outside the scope.
    """
    # The load makes a few objects per YAML scalar and frees few: the cyclic
    # collector would walk them again and again (about 30 % of the load).
    with gc_paused():
        return _load(paths, cluster)


def _load(paths: Sequence[str | Path], cluster: str | None) -> DesiredState:
    start = time.perf_counter()
    problems: list[ManifestProblem] = []
    warnings: list[ManifestProblem] = []
    docs = read_set(paths, problems, warnings)
    _log.info(
        "read %d manifest document(s) from %d file(s) in %.3f s",
        len(docs),
        len({d.path for d in docs}),
        time.perf_counter() - start,
    )
    # A document that could not be read may have carried scope entries: judging
    # coverage without it would report entities that are in fact owned.
    unreadable = any(p.field in ("(yaml)", "(file)", "(document)") for p in problems)
    for doc in docs:
        for index, entry in doc.quotas:
            _check_keys(doc, index, entry, problems)

    where = str(paths[0]) if paths else "(no paths given)"
    selection = _select(docs, cluster, where, problems)
    if selection is None:
        raise ManifestError(problems)
    name, docs, clusters_known = selection

    cluster_id = _agree(
        [(d, d.cluster_id) for d in docs if d.cluster_id is not None],
        ("metadata", "clusterId"),
        "name the same clusterId",
        problems,
    )
    budget = _agreed_budget(docs, problems)
    scope, scope_known = _declared_scope(docs, not unreadable and clusters_known, problems)
    judged = scope if scope_known else None
    shared, own = _declared_entities(docs, judged, problems, warnings)
    protected = _protected_entities(docs, (own, shared), judged, problems, warnings)
    probes = _probes(docs, warnings)
    if problems:
        raise ManifestError(problems)
    merged = {e: _merge(shared.get(e), own.get(e)) for e in {**shared, **own}}
    storage = _storage_policy(docs, merged, problems, warnings)
    if problems:
        raise ManifestError(problems)
    warnings += _shadow_warnings(merged)
    _log.info(
        "loaded %d entities for cluster %r in %.3f s",
        len({**shared, **own}),
        name,
        time.perf_counter() - start,
    )
    return DesiredState.build(
        cluster=str(name),
        cluster_id=cluster_id if isinstance(cluster_id, str) else None,
        scope=scope,
        entities=merged.values(),
        warnings=[str(w) for w in sorted(warnings, key=ManifestProblem.sort_key)],
        protected=protected,
        budget=budget,
        probes=probes,
        storage=storage,
    )
