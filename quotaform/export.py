"""Live quotas back into manifests: ``quotaform export`` and ``quotaform import``.

The round trip is the point: an exported file, or a manifest set after an
import, loads with :func:`~quotaform.manifest.load_manifests` and plans with no
changes against the cluster it came from. So every written name and value must
read back to exactly what the cluster holds; entities that a manifest cannot
express faithfully are left out and reported (:class:`Skipped`).

The module has three layers:

* pure builders: :func:`export_scope`, :func:`split_exportable`,
  :func:`manifest_document`, :func:`add_entities`, :func:`update_entities`
  turn live quotas into ruamel.yaml round-trip nodes (``CommentedMap``), and
  edit them, without reading or writing anything;
* small file functions: :func:`manifest_yaml`, :class:`ManifestFile`,
  :func:`write_new_file`, :func:`replace_file`;
* the two workflows the CLI runs, :func:`export_manifest` and
  :func:`import_entities`, which read the cluster through a client the caller
  opened (read-only is enough).
"""

from __future__ import annotations

import copy
import io
import math
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.resolver import VersionedResolver
from ruamel.yaml.scalarstring import DoubleQuotedScalarString
from ruamel.yaml.tokens import CommentToken

from quotaform import __version__
from quotaform.desired import SHAPE_NAMES, Scope, ScopeRule, shape_from_name, shape_name
from quotaform.entity import QUOTA_KEYS, Entity
from quotaform.errors import QuotaformError
from quotaform.live import QuotaReader, read_live_state
from quotaform.manifest import ManifestError, load_manifests
from quotaform.manifest.loader import MANIFEST_SUFFIXES
from quotaform.manifest.models import API_VERSION, KIND, EntitySpec, normalise_ip
from quotaform.render.text import entity_label
from quotaform.units import format_quota_value, parse_quota_value
from quotaform.wire import QuotaAdminClient
from quotaform.workflow import check_cluster

__all__ = [
    "DEFAULT_NAME_COMMENT",
    "IMPORT_COMMENT",
    "ClusterReader",
    "ExportError",
    "ExportResult",
    "ImportResult",
    "LiveQuotas",
    "ManifestFile",
    "Skipped",
    "add_entities",
    "entry_entity",
    "export_header",
    "export_manifest",
    "export_scope",
    "import_entities",
    "manifest_document",
    "manifest_yaml",
    "parse_prefixes",
    "quota_entry",
    "replace_file",
    "split_exportable",
    "update_entities",
    "write_new_file",
    "yaml_name",
    "yaml_quota_value",
]

LiveQuotas = Mapping[Entity, Mapping[str, float]]
"""``{entity: {quota key: value}}``, as in :attr:`LiveState.entities`."""

#: The comment above each entry ``import`` adds; ``{date}`` is an ISO date.
IMPORT_COMMENT = "imported from the live cluster {date}"

#: End-of-line comment on an entity with a part literally named ``<default>``.
DEFAULT_NAME_COMMENT = '"<default>" is an ordinary {etype} name here, not the default {etype}'

# The layout of examples/: maps indented by 2, sequence items by 4 with the
# dash at 2. A wide line keeps flow maps ({user: ..., client-id: ...}) on one
# line whatever the names.
_MAPPING_INDENT = 2
_SEQUENCE_INDENT = 4
_DASH_OFFSET = 2
_WIDTH = 4096


class ExportError(QuotaformError):
    """Export or import cannot proceed (bad options, file exists, not a manifest
    of the set, edited manifests that would not load). The CLI exits with 1."""


@dataclass(frozen=True, slots=True)
class Skipped:
    """A live entity left out because a manifest cannot reproduce it exactly.

    Attributes:
        entity: the live entity.
        reason: why, e.g. ``ip "2001:DB8::1" would be read as "2001:db8::1"``.
    """

    entity: Entity
    reason: str

    def __str__(self) -> str:
        return f"{entity_label(self.entity)}: {self.reason}"


# ----------------------------------------------------------------- scope


def parse_prefixes(texts: Iterable[str]) -> dict[str, list[str]]:
    """``["user=svc-", "user=app-", "client-id=web"]`` ->
    ``{"user": ["svc-", "app-"], "client-id": ["web"]}``.

    Raises:
        ExportError: not ``TYPE=PREFIX``, an unknown entity type or an empty prefix.
    """
    parsed: dict[str, list[str]] = {}
    for text in texts:
        etype, sep, prefix = text.partition("=")
        if not sep or etype not in ("user", "client-id", "ip") or not prefix:
            raise ExportError(
                f"--prefix {text!r}: expected TYPE=PREFIX with TYPE one of user, client-id, "
                "ip and a non-empty prefix, e.g. --prefix user=svc-"
            )
        parsed.setdefault(etype, []).append(prefix)
    return parsed


def export_scope(
    shapes: Iterable[str],
    prefixes: Mapping[str, Sequence[str]] | None = None,
    *,
    include_defaults: bool = True,
) -> Scope:
    """The scope of an export: one rule per shape name (``user``, ``client-id``,
    ``user+client-id``, ``ip``); each rule filters names by the prefixes of the
    entity types it contains (``user=svc-`` applies to ``user`` and
    ``user+client-id``).

    Raises:
        ExportError: no shape, an unknown shape, or prefixes for an entity type
            that none of the shapes contains.
    """
    names = list(dict.fromkeys(shapes))
    if not names:
        raise ExportError(f"give at least one shape ({', '.join(SHAPE_NAMES)})")
    prefixes = prefixes or {}
    rules: list[ScopeRule] = []
    try:
        for name in names:
            shape = shape_from_name(name)
            own = {t: p for t, p in prefixes.items() if t in shape}
            rules.append(ScopeRule.build(shape, own or None, include_defaults=include_defaults))
    except ValueError as exc:
        raise ExportError(str(exc)) from None
    unused = [t for t in prefixes if not any(t in rule.shape for rule in rules)]
    if unused:
        raise ExportError(
            f"--prefix {unused[0]}=...: no exported shape ({', '.join(names)}) has "
            f"{unused[0]} names"
        )
    return Scope.build(rules)


# ----------------------------------------------------------------- names and values

_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@/+=-]*")
# A name is written plain only when YAML 1.1 readers (PyYAML, yamllint) and
# YAML 1.2 readers (quotaform's loader) both take it for a string: "yes", "010"
# and "12:30" are not strings to YAML 1.1.
_RESOLVERS = (VersionedResolver(version=(1, 1)), VersionedResolver(version=(1, 2)))
_STR_TAG = "tag:yaml.org,2002:str"
_INT_TEXT = re.compile(r"[0-9]+")
_FLOAT_TEXT = re.compile(r"[0-9]*\.?[0-9]+(e[+-]?[0-9]+)?|[0-9]+\.[0-9]*")


def yaml_name(name: str) -> str:
    """An entity name as a YAML scalar: plain when it is a simple word that
    every YAML version reads as that string (``svc-a``, ``192.0.2.1``), else a
    double-quoted string (``"2001:db8::10"``, ``"<default>"``, ``"yes"``,
    ``"my app"``)."""
    plain = (
        name != "<default>"
        and _PLAIN_NAME.fullmatch(name) is not None
        and all(str(r.resolve(ScalarNode, name, (True, False))) == _STR_TAG for r in _RESOLVERS)
    )
    return name if plain else DoubleQuotedScalarString(name)


def yaml_quota_value(key: str, value: float) -> object:
    """A quota value as a YAML scalar, in readable units
    (:func:`~quotaform.units.format_quota_value`): ``"10MiB"`` plain,
    ``"150%"`` double-quoted, plain numbers as YAML numbers (``200``, ``2.5``)."""
    text = format_quota_value(key, value)
    if text.endswith("%"):
        return DoubleQuotedScalarString(text)
    if _INT_TEXT.fullmatch(text):
        return int(text)
    if _FLOAT_TEXT.fullmatch(text):
        return float(text)
    return text


def _number(value: float) -> int | float:
    return int(value) if value.is_integer() else value


def _problem(entity: Entity, quotas: Mapping[str, float]) -> str | None:
    """Why a manifest cannot reproduce ``entity`` with ``quotas`` exactly, or None."""
    for etype, name in entity.parts:
        if name == "":
            return f"empty {etype} name"
        if etype == "ip" and name is not None:
            try:
                canonical = normalise_ip(name)
            except ValueError as exc:
                return str(exc)
            if canonical != name:
                return (
                    f"ip {name!r} would be read as {canonical!r}, a different entity to "
                    "Kafka; set the quota on the canonical spelling instead"
                )
    shape_problem = entity.shape_problem()
    if shape_problem is not None:
        return shape_problem
    if not quotas:
        return "no quota values"
    for key, value in sorted(quotas.items()):
        spec = QUOTA_KEYS.get(key)
        if spec is None:
            return f"quota key {key!r} is unknown to quotaform"
        if not set(entity.types) <= spec.entity_types:
            return f"quota key {key!r} does not apply to {shape_name(entity.types)} entities"
        if not math.isfinite(value):
            return f"{key} is {value!r}"
        try:
            back = parse_quota_value(key, yaml_quota_value(key, value))
        except ValueError as exc:
            return f"{key}={value!r} cannot be written in a manifest: {exc}"
        if back != value:  # pragma: no cover - format_quota_value promises equality
            return f"{key}={value!r} would be read back as {back!r}"
    return None


def split_exportable(
    live: LiveQuotas,
) -> tuple[dict[Entity, dict[str, float]], tuple[Skipped, ...]]:
    """Split live quotas into what a manifest reproduces exactly and the rest.

    Left out: names the loader would respell or refuse (a non-canonical or
    invalid ip, an empty name), quota keys quotaform does not know or that do
    not apply to the entity's types, and values the loader would refuse (a
    fractional byte rate the controller let through within its 1e-6 slack,
    NaN, infinities). Both results are sorted by :meth:`Entity.sort_key`.
    """
    kept: dict[Entity, dict[str, float]] = {}
    skipped: list[Skipped] = []
    for entity in sorted(live, key=Entity.sort_key):
        quotas = dict(live[entity])
        problem = _problem(entity, quotas)
        if problem is None:
            kept[entity] = quotas
        else:
            skipped.append(Skipped(entity, problem))
    return kept, tuple(skipped)


# ----------------------------------------------------------------- documents


def _flow(mapping: CommentedMap) -> CommentedMap:
    mapping.fa.set_flow_style()
    return mapping


def _entity_map(entity: Entity) -> CommentedMap:
    parts = CommentedMap()
    for etype, name in entity.parts:
        parts[etype] = _flow(CommentedMap(default=True)) if name is None else yaml_name(name)
    return _flow(parts)


def quota_entry(
    entity: Entity, quotas: Mapping[str, float], *, flow_values: bool = True
) -> CommentedMap:
    """One ``spec.quotas`` item: ``entity`` in flow style, defaults as
    ``{default: true}``, values by sorted key in readable units (flow style
    unless ``flow_values`` is false). A part literally named ``<default>`` gets
    an end-of-line comment saying it is an ordinary name."""
    values = CommentedMap((key, yaml_quota_value(key, quotas[key])) for key in sorted(quotas))
    if flow_values:
        _flow(values)
    item = CommentedMap(entity=_entity_map(entity), values=values)
    literal = [etype for etype, name in entity.parts if name == "<default>"]
    if literal:
        item.yaml_add_eol_comment(
            "; ".join(DEFAULT_NAME_COMMENT.format(etype=t) for t in literal), "entity"
        )
    return item


def _scope_entry(rule: ScopeRule) -> CommentedMap:
    entry = CommentedMap(shape=shape_name(rule.shape))
    if rule.prefixes:
        prefixes = CommentedMap()
        for etype, names in rule.prefixes:
            seq = CommentedSeq(yaml_name(name) for name in names)
            seq.fa.set_flow_style()
            prefixes[etype] = seq
        entry["prefixes"] = _flow(prefixes)
    if not rule.include_defaults:
        entry["includeDefaults"] = False
    return entry


def export_header(
    *,
    exported_at: datetime,
    bootstrap: str,
    cluster_id: str | None,
    scope: Scope,
    count: int,
    skipped: Sequence[Skipped] = (),
) -> str:
    """The comment text at the top of an exported file: when, from where (the
    bootstrap address only, never credentials), what scope, how many entities,
    and which entities were left out and why."""
    when = exported_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = [
        f"Exported by quotaform {__version__} (quotaform export) on {when}",
        f"from the live cluster at {bootstrap}"
        + (f" (cluster id {cluster_id})." if cluster_id else "."),
        f"Scope: {scope}. {count} entit{'y' if count == 1 else 'ies'}.",
        "Values are in readable units; each reads back to exactly the live value.",
    ]
    if skipped:
        lines.append(f"Left out ({len(skipped)}), a manifest cannot reproduce them exactly:")
        lines.extend(f"  {s}" for s in skipped)
    return "\n".join(lines)


def manifest_document(
    live: LiveQuotas,
    *,
    cluster: str,
    cluster_id: str | None,
    scope: Scope,
    header: str | None = None,
) -> CommentedMap:
    """A ClientQuotas document declaring exactly ``live`` inside ``scope``.

    Args:
        live: the entities to declare (filter them with
            :func:`split_exportable` first: values are written as given).
        cluster: ``metadata.cluster``.
        cluster_id: ``metadata.clusterId``, or ``None`` to leave it out.
        scope: written as ``spec.scope``, one entry per rule.
        header: comment text above ``apiVersion`` (see :func:`export_header`).

    Returns:
        A round-trip map: entities sorted by :meth:`Entity.sort_key`, keys
        sorted, ``allowDeletes: false``.
    """
    metadata = CommentedMap(cluster=cluster)
    if cluster_id is not None:
        metadata["clusterId"] = cluster_id
    quotas = CommentedSeq(
        quota_entry(entity, live[entity]) for entity in sorted(live, key=Entity.sort_key)
    )
    if not quotas:
        quotas.fa.set_flow_style()
    spec = CommentedMap()
    spec["scope"] = CommentedSeq(_scope_entry(rule) for rule in scope.rules)
    spec["allowDeletes"] = False
    spec["quotas"] = quotas
    document = CommentedMap()
    document["apiVersion"] = API_VERSION
    document["kind"] = KIND
    document["metadata"] = metadata
    document["spec"] = spec
    if header:
        document.yaml_set_start_comment(header)
    return document


# ----------------------------------------------------------------- editing


def _plain(value: Any) -> Any:
    """Round-trip data as plain dicts, lists and strs (for pydantic's strict mode)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value


def entry_entity(item: object) -> Entity | None:
    """The entity of one ``spec.quotas`` item, as the loader reads it (ip
    respelled canonically), or ``None`` when the item has no valid entity."""
    if not isinstance(item, Mapping):
        return None
    try:
        return EntitySpec.model_validate(_plain(item.get("entity"))).to_entity()
    except ValidationError:
        return None


def _quotas_of(document: object) -> CommentedSeq | None:
    if not isinstance(document, Mapping):
        return None
    spec = document.get("spec")
    if not isinstance(spec, Mapping):
        return None
    quotas = spec.get("quotas")
    return quotas if isinstance(quotas, CommentedSeq) else None


def _target_document(documents: Sequence[object]) -> CommentedMap | None:
    """The first document with ``spec.quotas``, else the first with ``spec.scope``."""
    for document in documents:
        if _quotas_of(document) is not None:
            assert isinstance(document, CommentedMap)
            return document
    for document in documents:
        spec = document.get("spec") if isinstance(document, Mapping) else None
        if isinstance(spec, CommentedMap) and "scope" in spec:
            assert isinstance(document, CommentedMap)
            return document
    return None


def add_entities(
    document: CommentedMap,
    entities: LiveQuotas,
    *,
    comment: str | None = None,
) -> list[Entity]:
    """Append the entities ``document`` does not already declare to its
    ``spec.quotas`` (created when missing), keeping everything else as it was.

    New entries come sorted by :meth:`Entity.sort_key`, each after ``comment``
    (when given; with a blank line before it unless the entry is the first),
    with their values in the style of the last existing entry (block or flow).

    Returns:
        The entities added, in that order.

    Raises:
        ExportError: the document has no ``spec`` mapping, or ``spec.quotas``
            is not a list.
    """
    spec = document.get("spec")
    if not isinstance(spec, CommentedMap):
        raise ExportError("the document has no spec mapping to add quotas to")
    if "quotas" not in spec:
        spec["quotas"] = CommentedSeq()
    quotas = spec["quotas"]
    if not isinstance(quotas, CommentedSeq):
        raise ExportError("spec.quotas is not a list")
    declared = {entry_entity(item) for item in quotas}
    new = [e for e in sorted(entities, key=Entity.sort_key) if e not in declared]
    if not new:
        return []
    flow_values = True
    if quotas:
        last_values = quotas[-1].get("values") if isinstance(quotas[-1], Mapping) else None
        if isinstance(last_values, CommentedMap):
            flow_values = bool(last_values.fa.flow_style())
        column = quotas.lc.col
    else:
        quotas.fa.set_block_style()  # `quotas: []` grows into a block list
        column = None
    if column is None:
        key_column = spec.lc.col if spec.lc.col is not None else _MAPPING_INDENT
        column = key_column + _DASH_OFFSET
    for entity in new:
        quotas.append(quota_entry(entity, entities[entity], flow_values=flow_values))
        if comment:
            quotas.yaml_set_comment_before_after_key(
                len(quotas) - 1,
                before=("\n" if len(quotas) > 1 else "") + comment,
                indent=column,
            )
    return new


def _same_values(raw: Mapping[str, Any], live: Mapping[str, float]) -> bool:
    if set(raw) != set(live):
        return False
    try:
        return all(parse_quota_value(k, raw[k]) == float(live[k]) for k in live)
    except ValueError:
        return False


def update_entities(document: CommentedMap, entities: LiveQuotas) -> list[Entity]:
    """Overwrite the declared values of ``entities`` in ``document`` with the
    given (live) ones where they differ: changed keys keep their place and
    comments, keys not given are removed, new keys are appended in key order.
    A value written as a plain number stays a plain number; others are written
    in readable units.

    Returns:
        The entities whose values changed, sorted.
    """
    quotas = _quotas_of(document)
    if quotas is None:
        return []
    changed: list[Entity] = []
    for item in quotas:
        entity = entry_entity(item)
        if entity is None or entity not in entities:
            continue
        values = item.get("values")
        live = entities[entity]
        if not isinstance(values, CommentedMap) or _same_values(values, live):
            continue
        tail = _detach_tail(values)
        for key in [k for k in values if k not in live]:
            del values[key]
            values.ca.items.pop(key, None)
        for key in sorted(live):
            old = values.get(key)
            numeric = isinstance(old, int | float) and not isinstance(old, bool)
            values[key] = _number(live[key]) if numeric else yaml_quota_value(key, live[key])
        _attach_tail(values, tail)
        changed.append(entity)
    return sorted(changed, key=Entity.sort_key)


# ruamel keeps the comment lines that follow a mapping (the next list item's
# leading comment, blank lines) on the mapping's last key, after its end-of-line
# comment. Adding or removing keys at the end would move those lines into the
# wrong entry, so they are taken off first and put back on the new last key.


def _detach_tail(mapping: CommentedMap) -> CommentToken | None:
    """Remove and return the lines after the last key's line, if any."""
    if not mapping:
        return None
    last = next(reversed(mapping))
    slot = mapping.ca.items.get(last)
    token = slot[2] if slot and len(slot) > 2 else None
    if not isinstance(token, CommentToken):
        return None
    head, _, tail = token.value.partition("\n")
    if not tail:
        return None
    rest = copy.copy(token)
    rest.value = "\n" + tail
    if head:
        token.value = head + "\n"
    else:
        slot[2] = None
    return rest


def _attach_tail(mapping: CommentedMap, tail: CommentToken | None) -> None:
    """Put lines taken by :func:`_detach_tail` after the (new) last key."""
    if tail is None or not mapping:
        return
    last = next(reversed(mapping))
    slot = mapping.ca.items.setdefault(last, [None, None, None, None])
    current = slot[2]
    if isinstance(current, CommentToken):
        current.value = current.value.rstrip("\n") + tail.value
    else:
        slot[2] = tail


# ----------------------------------------------------------------- files


def manifest_yaml(*, explicit_start: bool = False) -> YAML:
    """The round-trip YAML instance quotaform writes with: comments, key order
    and quotes kept, the examples/ layout (``indent(mapping=2, sequence=4,
    offset=2)``), lines never folded."""
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.indent(mapping=_MAPPING_INDENT, sequence=_SEQUENCE_INDENT, offset=_DASH_OFFSET)
    yaml.width = _WIDTH
    yaml.explicit_start = explicit_start
    return yaml


def _dump(yaml: YAML, documents: Sequence[object]) -> str:
    out = io.StringIO()
    yaml.dump_all(documents, out)
    return out.getvalue()


def _split_preamble(text: str) -> tuple[str, str]:
    """``(comment lines before a leading "---", the rest)``: ruamel drops
    comments that precede the first document marker, so they are kept aside."""
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            if line.rstrip("\n") == "---" or line.startswith("--- "):
                return "".join(lines[:index]), "".join(lines[index:])
            break
    return "", text


@dataclass
class ManifestFile:
    """One manifest file loaded for round-trip editing.

    Attributes:
        path: the file.
        original: its text as read (newlines normalised to ``\\n``).
        documents: its YAML documents, as round-trip nodes; edit these.
        crlf: the file used ``\\r\\n`` line ends (kept on write).
        keeps_format: an unchanged dump reproduces ``original`` byte for
            byte, so an edit changes nothing but the edited entries.
        preamble: comment lines before a leading ``---``, written back as they were.
    """

    path: Path
    original: str
    documents: list[Any]
    crlf: bool
    keeps_format: bool
    yaml: YAML
    preamble: str = ""

    @classmethod
    def read(cls, path: Path) -> ManifestFile:
        """Load ``path``.

        Raises:
            ExportError: the file cannot be read or is not YAML.
        """
        try:
            raw = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ExportError(f"{path}: cannot read: {exc}") from None
        crlf = "\r\n" in raw
        text = raw.replace("\r\n", "\n")
        preamble, body = _split_preamble(text)
        yaml = manifest_yaml(explicit_start=body.startswith("---"))
        try:
            documents = [d for d in yaml.load_all(body) if d is not None]
        except YAMLError as exc:
            raise ExportError(f"{path}: invalid YAML: {exc}") from None
        keeps = preamble + _dump(yaml, documents) == text
        return cls(path, text, documents, crlf, keeps, yaml, preamble)

    def text(self) -> str:
        """The documents as YAML text (``\\r\\n`` line ends if the file had them)."""
        text = self.preamble + _dump(self.yaml, self.documents)
        return text.replace("\n", "\r\n") if self.crlf else text


def write_new_file(path: Path, text: str, *, force: bool) -> None:
    """Write ``text`` to ``path``, which must not exist unless ``force``.

    Raises:
        ExportError: ``path`` exists and ``force`` is false, or cannot be written.
    """
    if not force:
        try:
            with path.open("x", encoding="utf-8", newline="") as out:
                out.write(text)
        except FileExistsError:
            raise ExportError(f"{path} already exists: pass --force to overwrite it") from None
        except OSError as exc:
            raise ExportError(f"{path}: cannot write: {exc.strerror}") from None
        return
    replace_file(path, text)


def replace_file(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (a temporary file renamed over
    it), keeping its permission bits.

    Raises:
        ExportError: the file cannot be written.
    """
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
                out.write(text)
            if path.exists():
                os.chmod(tmp, path.stat().st_mode & 0o7777)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise ExportError(f"{path}: cannot write: {exc.strerror}") from None


def _is_member(target: Path, paths: Sequence[str | Path]) -> bool:
    """Whether ``load_manifests(paths)`` reads ``target`` (same rules as the loader)."""
    resolved = target.resolve()
    for given in paths:
        path = Path(given)
        if path.is_dir():
            try:
                relative = target.absolute().relative_to(path.absolute())
            except ValueError:
                continue
            if resolved.suffix in MANIFEST_SUFFIXES and not any(
                part.startswith(".") for part in relative.parts
            ):
                return True
        elif path.resolve() == resolved:
            return True
    return False


# ----------------------------------------------------------------- workflows


class ClusterReader(QuotaReader, Protocol):
    """What export and import need of a client: describe, and the cluster id."""

    def cluster_id(self) -> str: ...


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What :func:`export_manifest` produced.

    Attributes:
        text: the manifest, YAML.
        entities: the entities written, sorted.
        skipped: live entities in scope left out, with the reason.
        cluster_id: the live cluster's id.
    """

    text: str
    entities: tuple[Entity, ...]
    skipped: tuple[Skipped, ...]
    cluster_id: str


def export_manifest(
    client: ClusterReader,
    *,
    cluster: str,
    scope: Scope,
    bootstrap: str,
    pin_cluster_id: bool = False,
    exported_at: datetime | None = None,
) -> ExportResult:
    """Describe the live quotas in ``scope`` and render them as one manifest.

    Args:
        client: a connected client (read-only is enough).
        cluster: ``metadata.cluster`` of the manifest.
        scope: what to export; also written as ``spec.scope``.
        bootstrap: the bootstrap address, named in the header comment.
        pin_cluster_id: write the live cluster id as ``metadata.clusterId``.
        exported_at: the time in the header (default: now).

    Raises:
        BrokerError: a describe failed.
    """
    cluster_id = client.cluster_id()
    live = read_live_state(client, scope, cluster_id=cluster_id, count_unmanaged=False)
    kept, skipped = split_exportable(live.entities)
    header = export_header(
        exported_at=exported_at or datetime.now(UTC),
        bootstrap=bootstrap,
        cluster_id=cluster_id,
        scope=scope,
        count=len(kept),
        skipped=skipped,
    )
    document = manifest_document(
        kept,
        cluster=cluster,
        cluster_id=cluster_id if pin_cluster_id else None,
        scope=scope,
        header=header,
    )
    return ExportResult(_dump(manifest_yaml(), [document]), tuple(kept), skipped, cluster_id)


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What :func:`import_entities` changed.

    Attributes:
        into: the file new entries went to.
        added: entities appended to ``into``, sorted.
        updated: ``(entity, file)`` whose declared values were replaced by the
            live ones (``--update``), sorted by entity.
        skipped: live entities in scope that no manifest could reproduce.
        reformatted: written files whose layout ruamel could not keep byte for
            byte (other than the edit itself).
    """

    into: Path
    added: tuple[Entity, ...]
    updated: tuple[tuple[Entity, str], ...]
    skipped: tuple[Skipped, ...]
    reformatted: tuple[str, ...]

    @property
    def changed(self) -> bool:
        """Whether any file was written."""
        return bool(self.added or self.updated)


def import_entities(
    paths: Sequence[str | Path],
    client: QuotaAdminClient,
    *,
    into: Path,
    update: bool = False,
    today: date | None = None,
) -> ImportResult:
    """Declare live entities the manifests at ``paths`` do not: append them to
    ``into`` (one of the set's files) and, with ``update``, overwrite declared
    values that differ from live in the files that declare them.

    Edited files keep their comments, key order and quoting. After writing,
    the whole set is loaded again; if it no longer loads, every file is put back
    as it was and the error is raised.

    Raises:
        ExportError: ``into`` is not read by ``load_manifests(paths)`` or has no
            document with ``spec.quotas`` or ``spec.scope``; the edited set
            would not load (files restored).
        ManifestError: the manifests are invalid before any edit.
        ClusterMismatchError: the manifests name another cluster id.
        BrokerError: a describe failed.
    """
    if not into.is_file() or not _is_member(into, paths):
        raise ExportError(
            f"{into} is not one of the manifest files given ({', '.join(map(str, paths))}): "
            "import edits a file of the set, so the result is checked as one"
        )
    desired = load_manifests(paths)
    check_cluster(desired, client)
    live = read_live_state(client, desired.scope, count_unmanaged=False)
    kept, skipped = split_exportable(live.entities)
    missing = {e: q for e, q in kept.items() if e not in desired.entities}
    drifted = {}
    if update:
        drifted = {
            e: q
            for e, q in kept.items()
            if e in desired.entities and dict(desired.entities[e].quotas) != q
        }

    files: dict[Path, ManifestFile] = {}
    edited: dict[Path, ManifestFile] = {}

    def file(path: Path) -> ManifestFile:
        key = path.resolve()
        if key not in files:
            files[key] = ManifestFile.read(path)
        return files[key]

    added: list[Entity] = []
    if missing:
        target = _target_document(file(into).documents)
        if target is None:
            raise ExportError(f"{into} has no document with spec.quotas or spec.scope to add to")
        comment = IMPORT_COMMENT.format(date=(today or datetime.now(UTC).date()).isoformat())
        added = add_entities(target, missing, comment=comment)
        if added:
            edited[into.resolve()] = file(into)
    updated: list[tuple[Entity, str]] = []
    by_file: dict[str, dict[Entity, Mapping[str, float]]] = {}
    for entity, quotas in drifted.items():
        by_file.setdefault(desired.entities[entity].source.path, {})[entity] = quotas
    for path, entities in sorted(by_file.items()):
        manifest = file(Path(path))
        for document in manifest.documents:
            if isinstance(document, CommentedMap):
                done = update_entities(document, entities)
                updated.extend((e, path) for e in done)
                if done:
                    edited[manifest.path.resolve()] = manifest
    updated.sort(key=lambda pair: pair[0].sort_key())

    changed = list(edited.values())
    _write_checked(changed, paths)
    return ImportResult(
        into=into,
        added=tuple(added),
        updated=tuple(updated),
        skipped=skipped,
        reformatted=tuple(str(f.path) for f in changed if not f.keeps_format),
    )


def _write_checked(changed: Sequence[ManifestFile], paths: Sequence[str | Path]) -> None:
    """Write the edited files, then load the set; restore them all if it fails."""
    if not changed:
        return
    originals = {f.path: f.path.read_bytes() for f in changed}
    try:
        for f in changed:
            replace_file(f.path, f.text())
        load_manifests(paths)
    except (ManifestError, ExportError) as exc:
        for path, content in originals.items():
            replace_file(path, content.decode("utf-8"))
        raise ExportError(
            f"the edited manifests would not load, so nothing was changed:\n{exc}"
        ) from None
