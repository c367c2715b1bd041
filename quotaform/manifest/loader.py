"""Load manifest files into a :class:`~quotaform.desired.DesiredState`.

Strict loading (topicctl's rule): every problem in every file is collected and
reported together, each with its file, 1-based line and field path, in one
:class:`ManifestError`. Lines come from ruamel.yaml's round-trip nodes, which
remember where each key and item was written; pydantic's error locations are
walked down that node tree.

Nothing here talks to Kafka.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import Node

from quotaform.desired import (
    ChangeLimits,
    DesiredEntity,
    DesiredState,
    Scope,
    ScopeRule,
    SourceLocation,
    shape_from_name,
    shape_name,
)
from quotaform.entity import QUOTA_KEYS, Entity
from quotaform.errors import QuotaformError
from quotaform.manifest.models import (
    ALL_CLUSTERS,
    ChangeBudgetSpec,
    ManifestDocument,
    ProtectEntry,
    QuotaEntry,
    QuotaValues,
    ScopeEntry,
)
from quotaform.units import render_raw
from quotaform.yamlsource import Loc, compose_documents, describe_yaml_error, locate

__all__ = [
    "MANIFEST_SUFFIXES",
    "ManifestError",
    "ManifestProblem",
    "load_manifests",
    "manifest_clusters",
]

#: File suffixes picked up when a directory is given.
MANIFEST_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True, slots=True)
class ManifestProblem:
    """One thing wrong with the manifests.

    Attributes:
        path: the file, as given or as found under a given directory.
        line: 1-based line of the offending key or item, ``None`` when unknown
            (unreadable file, a problem of the whole set).
        field: dotted field path inside the document, e.g.
            ``spec.quotas[2].values.producer_byte_rate``; ``(yaml)`` for YAML
            syntax, ``(file)`` for files that cannot be read.
        message: what is wrong and, where possible, how to fix it.
    """

    path: str
    line: int | None
    field: str
    message: str

    def sort_key(self) -> tuple[str, int, str, str]:
        """By path, then line (unknown lines first), field, message."""
        return (self.path, self.line or 0, self.field, self.message)

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.field}: {self.message}"


class ManifestError(QuotaformError):
    """The manifests are invalid; ``problems`` lists every problem found.

    ``str()`` gives one problem per line, ``path:line: field: message``, sorted
    by path and line. The CLI exits with ``exit_code`` 1.
    """

    exit_code = 1

    def __init__(self, problems: Sequence[ManifestProblem]) -> None:
        self.problems: tuple[ManifestProblem, ...] = tuple(
            sorted(problems, key=ManifestProblem.sort_key)
        )
        super().__init__("\n".join(str(p) for p in self.problems))


# --------------------------------------------------------------------------- files


def _find_files(paths: Sequence[str | Path], problems: list[ManifestProblem]) -> list[Path]:
    """Files to read, in order: given files as they are; directories expanded
    recursively to ``*.yaml`` / ``*.yml`` sorted by relative path, skipping hidden
    files and directories (editor droppings, ``.git``). A file reached twice is
    read once."""
    found: list[Path] = []
    seen: set[Path] = set()
    for given in paths:
        path = Path(given)
        if path.is_dir():
            members = sorted(
                (
                    p
                    for p in path.rglob("*")
                    if p.suffix in MANIFEST_SUFFIXES
                    and p.is_file()
                    and not any(part.startswith(".") for part in p.relative_to(path).parts)
                ),
                key=lambda p: p.relative_to(path).as_posix(),
            )
            if not members:
                problems.append(
                    ManifestProblem(str(path), None, "(file)", "no *.yaml or *.yml files found")
                )
        elif path.exists():
            members = [path]
        else:
            problems.append(ManifestProblem(str(path), None, "(file)", "no such file or directory"))
            continue
        for member in members:
            key = member.resolve()
            if key not in seen:
                seen.add(key)
                found.append(member)
    return found


def _yaml_problem(path: str, exc: YAMLError) -> ManifestProblem:
    line, message = describe_yaml_error(exc)
    return ManifestProblem(path, line, "(yaml)", message)


def _read_documents(path: Path, problems: list[ManifestProblem]) -> Iterator[tuple[Any, Node]]:
    """``(plain data, node)`` of each non-empty document
    (:func:`quotaform.yamlsource.compose_documents`); read and YAML errors
    become problems."""
    display = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        problems.append(ManifestProblem(display, None, "(file)", f"not UTF-8 text: {exc.reason}"))
        return
    except OSError as exc:
        problems.append(ManifestProblem(display, None, "(file)", f"cannot read: {exc.strerror}"))
        return
    try:
        yield from compose_documents(text)
    except YAMLError as exc:
        problems.append(_yaml_problem(display, exc))


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The model class whose fields live at ``loc`` (for "allowed fields" hints)."""
    model: type[BaseModel] | None = ManifestDocument
    for part in loc:
        if isinstance(part, int) or model is None:
            continue
        annotation = None
        for name, info in model.model_fields.items():
            if part in (name, info.alias):
                annotation = info.annotation
        model = _unwrap_model(annotation)
    return model


def _unwrap_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (list, Union, UnionType):
        for arg in get_args(annotation):
            found = _unwrap_model(arg)
            if found is not None:
                return found
    return None


def _field_names(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _suggest(word: object, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(str(word), choices, n=1)
    return f"did you mean {close[0]}? " if close else ""


def _message(error: Mapping[str, Any]) -> str:
    """A reader's message for one pydantic error."""
    kind = error["type"]
    loc: Loc = tuple(error["loc"])
    given = error.get("input")
    ctx = error.get("ctx") or {}
    if kind == "value_error" and "error" in ctx:
        return str(ctx["error"])
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        name = loc[-1]
        model = _model_at(loc[:-1])
        allowed = _field_names(model) if model is not None else []
        if model is QuotaValues:
            return (
                f"unknown quota key {str(name)!r}: {_suggest(name, allowed)}Kafka rejects it "
                f'("Invalid configuration key {name}"); known keys: {", ".join(allowed)}'
            )
        hint = _suggest(name, allowed)
        return f"unknown field {str(name)!r}: {hint}allowed: {', '.join(allowed)}"
    if kind == "literal_error":
        return f"expected {ctx.get('expected')}, got {render_raw(given)}"
    if kind in ("too_short", "string_too_short"):
        return "must not be empty"
    expected = {
        "string_type": "a string",
        "bool_type": "true or false",
        "list_type": "a list",
        "dict_type": "a mapping",
        "model_type": "a mapping",
        "model_attributes_type": "a mapping",
    }.get(kind)
    if expected is not None:
        return f"expected {expected}, got {render_raw(given)}"
    return f"{error['msg']} (got {render_raw(given)})"


# ----------------------------------------------------------------- documents


@dataclass
class _Document:
    """One manifest document and the parts of it that validated."""

    path: str
    root: Any  # plain data
    node: Node  # the same document's node tree, for line numbers
    clusters: tuple[str, ...] | None = None  # None: not known (metadata invalid)
    shared: bool = False  # named by metadata.clusters rather than metadata.cluster
    cluster_id: str | None = None
    scope: list[ScopeEntry] | None = None  # None: not declared
    scope_valid: bool = True
    allow_deletes: bool | None = None  # None: not set here
    quotas: list[tuple[int, QuotaEntry]] = field(default_factory=list)
    protect: list[tuple[int, ProtectEntry]] = field(default_factory=list)
    budget: dict[str, float | int] = field(default_factory=dict)  # YAML name -> value

    def locate(self, *loc: int | str) -> tuple[int | None, str]:
        return locate(self.node, loc)

    def problem(self, message: str, *loc: int | str) -> ManifestProblem:
        line, path = self.locate(*loc)
        return ManifestProblem(self.path, line, path, message)

    def source(self, *loc: int | str) -> SourceLocation:
        line, _ = self.locate(*loc)
        return SourceLocation(self.path, line or 1)

    @property
    def clusters_loc(self) -> tuple[str, str]:
        return ("metadata", "clusters" if self.shared else "cluster")

    def applies_to(self, cluster: str) -> bool:
        """Whether this document is part of ``cluster``'s set."""
        names = self.clusters or ()
        return cluster in names or (self.shared and ALL_CLUSTERS in names)


def _budget_values(spec: ChangeBudgetSpec) -> dict[str, float | int]:
    return {
        info.alias or name: getattr(spec, name)
        for name, info in ChangeBudgetSpec.model_fields.items()
        if name in spec.model_fields_set
    }


def _salvage(doc: _Document, plain: dict[Any, Any]) -> None:
    """After a failed validation, keep whatever parts validate on their own so
    set-level checks (duplicates, scope, cluster) still report on them."""

    def valid(model: type[BaseModel], value: Any) -> Any:
        try:
            return model.model_validate(value)
        except ValidationError:
            return None

    metadata = plain.get("metadata")
    if isinstance(metadata, dict):
        # Taken field by field: a bad label must not hide a cluster mismatch.
        cluster, clusters = metadata.get("cluster"), metadata.get("clusters")
        if isinstance(cluster, str) and cluster and clusters is None:
            doc.clusters = (cluster,)
        elif (
            isinstance(clusters, list)
            and clusters
            and all(isinstance(c, str) and c for c in clusters)
            and cluster is None
        ):
            doc.clusters, doc.shared = tuple(clusters), True
        if isinstance(metadata.get("clusterId"), str) and metadata["clusterId"]:
            doc.cluster_id = metadata["clusterId"]
    spec = plain.get("spec")
    if not isinstance(spec, dict):
        doc.scope_valid = "spec" not in plain
        return
    if isinstance(spec.get("allowDeletes"), bool):
        doc.allow_deletes = spec["allowDeletes"]
    scope = spec.get("scope")
    if "scope" in spec:
        entries = [valid(ScopeEntry, e) for e in scope] if isinstance(scope, list) else [None]
        doc.scope = [e for e in entries if e is not None]
        doc.scope_valid = bool(entries) and all(e is not None for e in entries)
    for key, model, target in (
        ("quotas", QuotaEntry, doc.quotas),
        ("protect", ProtectEntry, doc.protect),
    ):
        raw_list = spec.get(key)
        if isinstance(raw_list, list):
            for index, raw in enumerate(raw_list):
                entry = valid(model, raw)
                if entry is not None:
                    target.append((index, entry))
    budget = spec.get("changeBudget")
    if isinstance(budget, dict):
        for name, value in budget.items():
            part = valid(ChangeBudgetSpec, {name: value})
            if part is not None:
                doc.budget.update(_budget_values(part))


def _parse_document(
    path: str, root: Any, node: Node, problems: list[ManifestProblem]
) -> _Document | None:
    if not isinstance(root, dict):
        what = "a list" if isinstance(root, list) else f"{render_raw(root)}"
        line = node.start_mark.line + 1 if isinstance(root, list) else None
        problems.append(
            ManifestProblem(
                path,
                line,
                "(document)",
                f"a manifest document must be a mapping with apiVersion, kind, metadata "
                f"and spec; got {what}",
            )
        )
        return None
    doc = _Document(path, root, node)
    plain = root
    try:
        model = ManifestDocument.model_validate(plain)
    except ValidationError as exc:
        for error in exc.errors():
            problems.append(doc.problem(_message(error), *error["loc"]))
        _salvage(doc, plain)
        return doc
    doc.clusters = model.metadata.names
    doc.shared = model.metadata.clusters is not None
    doc.cluster_id = model.metadata.cluster_id
    doc.scope = model.spec.scope
    if "allow_deletes" in model.spec.model_fields_set:
        doc.allow_deletes = model.spec.allow_deletes
    doc.quotas = list(enumerate(model.spec.quotas))
    doc.protect = list(enumerate(model.spec.protect or ()))
    if model.spec.change_budget is not None:
        doc.budget = _budget_values(model.spec.change_budget)
    return doc


def _read_set(paths: Sequence[str | Path], problems: list[ManifestProblem]) -> list[_Document]:
    docs: list[_Document] = []
    for file in _find_files(paths, problems):
        for root, node in _read_documents(file, problems):
            doc = _parse_document(str(file), root, node, problems)
            if doc is not None:
                docs.append(doc)
    if not docs and not problems:
        where = str(paths[0]) if paths else "(no paths given)"
        problems.append(ManifestProblem(where, None, "(file)", "no manifest documents found"))
    return docs


# ----------------------------------------------------------------- set checks


def _check_keys(
    doc: _Document, index: int, entry: QuotaEntry, problems: list[ManifestProblem]
) -> None:
    """Keys that do not apply to the entry's entity type (a per-document check)."""
    entity = entry.entity.to_entity()
    for key in entry.values.as_dict():
        spec = QUOTA_KEYS[key]
        if not set(entity.types) <= spec.entity_types:
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
    doc: _Document,
    loc: tuple[int | str, ...],
    entity: Entity,
    warnings: list[ManifestProblem],
) -> str:
    """Warnings about names that are valid but probably not meant; returns a
    note on a respelled IP (empty when none) for later messages. ``loc`` is the
    entity's location in the document (``spec, quotas, 3, entity``)."""
    note = ""
    raw_entity: Any = doc.root
    for part in loc:
        raw_entity = raw_entity[part]
    for etype, name in entity.parts:
        at = (*loc, etype)
        if name == "<default>":
            warnings.append(
                doc.problem(
                    f'"<default>" is an ordinary {etype} name to Kafka, not the default '
                    f"{etype}; write {{default: true}} for the default {etype}",
                    *at,
                )
            )
        raw = raw_entity.get(etype)
        if etype == "ip" and isinstance(raw, str) and str(raw) != name:
            note = f" ({render_raw(str(raw))} is the same address)"
            warnings.append(
                doc.problem(
                    f"ip {render_raw(str(raw))} is used as {render_raw(name)}, its canonical "
                    "spelling: Kafka stores two spellings of one address as separate "
                    "entities that enforce as one",
                    *at,
                )
            )
    return note


def _agree(
    values: Sequence[tuple[_Document, object]],
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


def _named(docs: Sequence[_Document]) -> list[str]:
    """Cluster names the documents give, sorted, ``"*"`` left out."""
    return sorted({n for d in docs for n in d.clusters or () if n != ALL_CLUSTERS})


def _select(
    docs: list[_Document],
    cluster: str | None,
    where: str,
    problems: list[ManifestProblem],
) -> tuple[str | None, list[_Document], bool] | None:
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
                "load them for one cluster at a time (--cluster NAME)",
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
    docs = _read_set(paths, problems)
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
        ``spec.scope``), ``allowDeletes``, the declared entities with their quota
        values as float64 (bytes/s, %, mutations/s, connections/s), the
        protected entities (``spec.protect`` and ``preventDestroy``), the change
        budget (``spec.changeBudget``), and warnings. An entity declared both by
        a shared document and by the cluster's own document gets the shared
        values overridden and extended, key by key, by the cluster's own.

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
    problems: list[ManifestProblem] = []
    warnings: list[ManifestProblem] = []
    docs = _read_set(paths, problems)
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
    allow_deletes = _agree(
        [(d, d.allow_deletes) for d in docs if d.allow_deletes is not None],
        ("spec", "allowDeletes"),
        "agree on allowDeletes",
        problems,
    )
    budget: dict[str, Any] = {}
    for yaml_name in ("maxDeletes", "maxDeleteFraction", "maxRelaxFactor"):
        budget[yaml_name] = _agree(
            [(d, d.budget[yaml_name]) for d in docs if yaml_name in d.budget],
            ("spec", "changeBudget", yaml_name),
            f"agree on changeBudget.{yaml_name}",
            problems,
        )

    scope = Scope.build(_scope_rule(e) for d in docs for e in (d.scope or ()))
    scope_known = not unreadable and clusters_known and all(d.scope_valid for d in docs)
    if docs and scope_known and not any(d.scope is not None for d in docs):
        problems.append(
            docs[0].problem(
                "no manifest declares spec.scope: the set must say which entities it owns, "
                "e.g. scope: [{shape: user}, {shape: client-id}, {shape: user+client-id}, "
                "{shape: ip}]",
                "spec",
                "scope",
            )
        )
        scope_known = False

    def outside(entity: Entity, what: str) -> str:
        return (
            f"{entity} is {what}outside the manifests' scope ({scope}): add a "
            "spec.scope entry that owns it, or remove it"
        )

    # Shared documents (metadata.clusters) first, then the cluster's own: the
    # second level overlays the first; within a level a repeat is an error.
    levels: tuple[dict[Entity, _Declared], dict[Entity, _Declared]] = ({}, {})
    for doc in docs:
        declared = levels[0] if doc.shared else levels[1]
        for index, entry in doc.quotas:
            loc = ("spec", "quotas", index, "entity")
            entity = entry.entity.to_entity()
            note = _check_names(doc, loc, entity, warnings)
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
            if scope_known and not scope.contains(entity):
                problems.append(doc.problem(outside(entity, ""), *loc))
            declared[entity] = _Declared(
                DesiredEntity(
                    entity=entity,
                    quotas=MappingProxyType(entry.values.as_dict()),
                    prevent_destroy=entry.prevent_destroy,
                    source=doc.source("spec", "quotas", index),
                ),
                note,
            )
    shared, own = levels
    desired = [_merge(shared.get(e), own.get(e)) for e in {**shared, **own}]

    protected: dict[Entity, SourceLocation] = {}
    for doc in docs:
        for index, protect in doc.protect:
            loc = ("spec", "protect", index, "entity")
            entity = protect.entity.to_entity()
            _check_names(doc, loc, entity, warnings)
            if scope_known and not scope.contains(entity):
                problems.append(doc.problem(outside(entity, "protected but "), *loc))
            protected.setdefault(entity, doc.source("spec", "protect", index))
    # preventDestroy where it is written (a merged entity's source is the
    # cluster's own declaration, which need not be the one that sets it).
    for level in (own, shared):
        for entity, found in level.items():
            if found.desired.prevent_destroy:
                protected.setdefault(entity, found.desired.source)

    if problems:
        raise ManifestError(problems)
    return DesiredState.build(
        cluster=str(name),
        cluster_id=cluster_id if isinstance(cluster_id, str) else None,
        scope=scope,
        allow_deletes=bool(allow_deletes),
        entities=desired,
        warnings=[str(w) for w in sorted(warnings, key=ManifestProblem.sort_key)],
        protected=protected,
        change_limits=ChangeLimits(
            max_deletes=budget["maxDeletes"],
            max_delete_fraction=budget["maxDeleteFraction"],
            max_relax_factor=budget["maxRelaxFactor"],
        ),
    )
