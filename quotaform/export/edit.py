"""Editing manifest files in place with ruamel.yaml's round-trip mode, so
comments, key order, quoting and layout are kept (``quotaform import``)."""

from __future__ import annotations

import copy
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.tokens import CommentToken

from quotaform.errors import ExportError, InputError
from quotaform.export.build import LiveQuotas, quota_entry, yaml_quota_value
from quotaform.inputs.files import read_text, shown
from quotaform.inputs.limits import LIMITS
from quotaform.inputs.yamlsource import check_structure, describe_yaml_error
from quotaform.kafka.entity import Entity
from quotaform.kafka.units import parse_quota_value, same_quotas
from quotaform.manifest.models import EntitySpec

__all__ = [
    "ManifestFile",
    "add_entities",
    "dump_documents",
    "entry_entity",
    "manifest_yaml",
    "target_document",
    "update_entities",
]

# The layout of examples/: maps indented by 2, sequence items by 4 with the
# dash at 2. A wide line keeps flow maps ({user: ..., client-id: ...}) on one
# line whatever the names.
_MAPPING_INDENT = 2
_SEQUENCE_INDENT = 4
_DASH_OFFSET = 2
_WIDTH = 4096


def _number(value: float) -> int | float:
    return int(value) if value.is_integer() else value


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


def target_document(documents: Sequence[object]) -> CommentedMap | None:
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
    """Whether the values written in a manifest entry read as ``live``."""
    try:
        return same_quotas({k: parse_quota_value(k, v) for k, v in raw.items()}, live)
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


def manifest_yaml(*, explicit_start: bool = False) -> YAML:
    """The round-trip YAML instance quotaform writes with: comments, key order
    and quotes kept, the examples/ layout (``indent(mapping=2, sequence=4,
    offset=2)``), lines never folded."""
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.indent(mapping=_MAPPING_INDENT, sequence=_SEQUENCE_INDENT, offset=_DASH_OFFSET)
    yaml.width = _WIDTH
    yaml.explicit_start = explicit_start
    yaml.brace_single_entry_mapping_in_flow_sequence = True  # `[{shape: user}]` as written
    return yaml


def dump_documents(yaml: YAML, documents: Sequence[object]) -> str:
    """The documents as YAML text, with ``yaml``'s layout."""
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
            raw = read_text(path, LIMITS["manifest"], nul=True)
        except InputError as exc:
            raise ExportError(str(exc)) from None
        crlf = "\r\n" in raw
        text = raw.replace("\r\n", "\n")
        preamble, body = _split_preamble(text)
        yaml = manifest_yaml(explicit_start=body.startswith("---"))
        try:
            check_structure(body)
            documents = [d for d in yaml.load_all(body) if d is not None]
        except YAMLError as exc:
            line, message = describe_yaml_error(exc, body)
            where = f"{shown(path)}:{line}" if line is not None else shown(path)
            raise ExportError(f"{where}: {message}") from None
        # ruamel writes a one-key map in a flow sequence without braces
        # (`[shape: user]`) unless told: keep the braces the file uses, so
        # `scope: [{shape: user}, ...]` is written back byte for byte.
        keeps = False
        for braces in (True, False):
            yaml.brace_single_entry_mapping_in_flow_sequence = braces
            keeps = preamble + dump_documents(yaml, documents) == text
            if keeps:
                break
        else:
            yaml.brace_single_entry_mapping_in_flow_sequence = True
        return cls(path, text, documents, crlf, keeps, yaml, preamble)

    def text(self) -> str:
        """The documents as YAML text (``\\r\\n`` line ends if the file had them)."""
        text = self.preamble + dump_documents(self.yaml, self.documents)
        return text.replace("\n", "\r\n") if self.crlf else text
