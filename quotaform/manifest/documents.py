"""One manifest document: read from YAML, validated by the models, with line
numbers for every problem.

Lines come from ruamel.yaml's node trees (:mod:`quotaform.inputs.yamlsource`),
which remember where each key and item was written; pydantic's error locations
are walked down that tree. A document that fails validation keeps the parts
that validate on their own (:func:`_salvage`), so the set-level checks of
:mod:`quotaform.manifest.loader` still report on them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from ruamel.yaml.error import YAMLError

from quotaform.errors import InputError, ManifestProblem
from quotaform.inputs.files import read_text
from quotaform.inputs.limits import LIMITS
from quotaform.inputs.yamlsource import Lines, Loc, describe_yaml_error, read_documents
from quotaform.kafka.entity import Entity, escape_unprintable
from quotaform.kafka.units import render_raw
from quotaform.manifest.files import find_manifest_files
from quotaform.manifest.models import (
    ALL_CLUSTERS,
    ChangeBudgetSpec,
    ManifestDocument,
    ProbeSpec,
    ProtectEntry,
    QuotaEntry,
    QuotaValues,
    ScopeEntry,
    StoragePolicySpec,
)
from quotaform.manifest.pydantic_errors import Wording, suggest, validation_problems
from quotaform.plan.state import SourceLocation

__all__ = ["DeclaredEntry", "Document", "read_set", "written_ip"]


def _yaml_problem(path: str, exc: YAMLError, text: str) -> ManifestProblem:
    line, message = describe_yaml_error(exc, text)
    return ManifestProblem(path, line, "(yaml)", message)


def _read_documents(path: Path, problems: list[ManifestProblem]) -> Iterator[tuple[Any, Lines]]:
    """``(plain data, lines)`` of each non-empty document
    (:func:`quotaform.inputs.yamlsource.read_documents`); read and YAML errors
    become problems."""
    display = str(path)
    try:
        # A NUL is refused by the YAML reader itself, with its line.
        text = read_text(path, LIMITS["manifest"], nul=True)
    except InputError as exc:
        problems.append(ManifestProblem(display, exc.line, "(file)", exc.reason))
        return
    try:
        yield from read_documents(text)
    except YAMLError as exc:
        problems.append(_yaml_problem(display, exc, text))


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


def _field_names(loc: Loc) -> list[str] | None:
    """The field names (as written) of the model at ``loc``, if one is."""
    model = _model_at(loc)
    if model is None:
        return None
    return [info.alias or name for name, info in model.model_fields.items()]


def _unknown_quota_key(loc: Loc, error: Mapping[str, Any]) -> str | None:
    """An unknown key in ``values`` is named in Kafka's words."""
    if error["type"] != "extra_forbidden" or _model_at(loc[:-1]) is not QuotaValues:
        return None
    name = str(loc[-1])
    known = _field_names(loc[:-1]) or []
    return (
        f"unknown quota key {escape_unprintable(repr(name))}: {suggest(name, known)}Kafka "
        f'rejects it ("Invalid configuration key {escape_unprintable(name)}"); '
        f"known keys: {', '.join(known)}"
    )


#: Manifests are written by people: quotaform's words, hints from the models.
_WORDING = Wording(fields=_field_names, special=_unknown_quota_key)


# ----------------------------------------------------------------- documents


@dataclass(frozen=True, slots=True)
class DeclaredEntry:
    """One validated ``spec.quotas`` entry, kept without its models: a load
    of 100,000 entries holding their pydantic models peaked 140 MiB higher
    (benchmarks/README.md).

    Attributes:
        entity: the entity (default parts have name ``None``).
        values: quota key -> quota value (bytes/s, %, mutations/s,
            connections/s), sorted by key.
        prevent_destroy: ``preventDestroy``.
        written_ip: the ip as written (:func:`written_ip`), which may not be its
            canonical spelling.
    """

    entity: Entity
    values: dict[str, float]
    prevent_destroy: bool = False
    written_ip: str | None = None

    @classmethod
    def of(cls, entry: QuotaEntry, raw: Any) -> DeclaredEntry:
        """From a validated entry and its raw YAML data."""
        entity = raw.get("entity") if isinstance(raw, dict) else None
        return cls(
            entry.entity.to_entity(),
            entry.values.as_dict(),
            entry.prevent_destroy,
            written_ip(entity),
        )


def written_ip(raw_entity: Any) -> str | None:
    """The ip of a raw ``entity`` mapping as written (before normalising),
    if it has one."""
    written = raw_entity.get("ip") if isinstance(raw_entity, dict) else None
    return written if isinstance(written, str) else None


@dataclass
class Document:
    """One manifest document and the parts of it that validated.

    ``budget`` maps the YAML names of ``spec.changeBudget`` (``maxDeletes``,
    ...) to their values, for the set-level agreement check."""

    path: str
    root: Any  # plain data (its spec.quotas is emptied: the entries are in quotas)
    lines: Lines  # where the document's fields are written
    clusters: tuple[str, ...] | None = None  # None: not known (metadata invalid)
    shared: bool = False  # named by metadata.clusters rather than metadata.cluster
    cluster_id: str | None = None
    scope: list[ScopeEntry] | None = None  # None: not declared
    scope_valid: bool = True
    allow_deletes: bool | None = None  # None: not set here
    quotas: list[tuple[int, DeclaredEntry]] = field(default_factory=list)
    protect: list[tuple[int, ProtectEntry]] = field(default_factory=list)
    probes: list[tuple[int, ProbeSpec]] = field(default_factory=list)
    budget: dict[str, float | int] = field(default_factory=dict)  # YAML name -> value
    storage: StoragePolicySpec | None = None  # spec.storagePolicy, when valid

    def locate(self, *loc: int | str) -> tuple[int | None, str]:
        return self.lines.locate(loc)

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


def _salvage(doc: Document, plain: dict[Any, Any]) -> None:
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
        ("protect", ProtectEntry, doc.protect),
        ("probes", ProbeSpec, doc.probes),
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


def _take_quotas(plain: dict[Any, Any]) -> list[Any] | None:
    """Detach a ``spec.quotas`` list from ``plain`` (leaving an empty one) so
    it is validated entry by entry (:func:`_validate_quotas`); ``None``: no
    list there (the document's validation reports what is)."""
    spec = plain.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("quotas"), list):
        return None
    entries: list[Any] = spec["quotas"]
    spec["quotas"] = []
    return entries


def _validate_quotas(
    doc: Document, entries: list[Any], problems: list[ManifestProblem]
) -> list[tuple[int, DeclaredEntry]]:
    """Validate each ``spec.quotas`` entry on its own, keeping the valid ones
    as :class:`DeclaredEntry` and freeing each entry's raw data and models as
    it goes; problems carry the entry's full location."""
    declared = []
    validate = QuotaEntry.model_validate
    for index, raw in enumerate(entries):
        entries[index] = None
        try:
            entry = validate(raw)
        except ValidationError as exc:
            at = ("spec", "quotas", index)
            problems += validation_problems(
                exc, doc.path, locate=doc.lines.locate, at=at, wording=_WORDING
            )
            continue
        declared.append((index, DeclaredEntry.of(entry, raw)))
    return declared


def _parse_document(
    path: str, root: Any, lines: Lines, problems: list[ManifestProblem]
) -> Document | None:
    if not isinstance(root, dict):
        what = "a list" if isinstance(root, list) else f"{render_raw(root)}"
        line = lines.locate(())[0] if isinstance(root, list) else None
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
    doc = Document(path, root, lines)
    plain = root
    entries = _take_quotas(plain)
    try:
        model = ManifestDocument.model_validate(plain)
    except ValidationError as exc:
        problems += validation_problems(exc, doc.path, locate=doc.lines.locate, wording=_WORDING)
        _salvage(doc, plain)
        model = None
    if entries is not None:
        doc.quotas = _validate_quotas(doc, entries, problems)
    if model is None:
        return doc
    doc.clusters = model.metadata.names
    doc.shared = model.metadata.clusters is not None
    doc.cluster_id = model.metadata.cluster_id
    doc.scope = model.spec.scope
    if "allow_deletes" in model.spec.model_fields_set:
        doc.allow_deletes = model.spec.allow_deletes
    doc.protect = list(enumerate(model.spec.protect or ()))
    doc.probes = list(enumerate(model.spec.probes or ()))
    doc.storage = model.spec.storage_policy
    if model.spec.change_budget is not None:
        doc.budget = _budget_values(model.spec.change_budget)
    return doc


def read_set(
    paths: Sequence[str | Path],
    problems: list[ManifestProblem],
    warnings: list[ManifestProblem] | None = None,
) -> list[Document]:
    """Every non-empty document of every file of the set, in file order; read,
    YAML and per-document validation problems go to ``problems``, skipped
    files to ``warnings``."""
    docs: list[Document] = []
    for file in find_manifest_files(paths, problems, warnings):
        for root, lines in _read_documents(file, problems):
            doc = _parse_document(str(file), root, lines, problems)
            if doc is not None:
                docs.append(doc)
    if not docs and not problems:
        where = str(paths[0]) if paths else "(no paths given)"
        problems.append(ManifestProblem(where, None, "(file)", "no manifest documents found"))
    return docs
