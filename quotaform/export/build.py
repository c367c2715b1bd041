"""Live quotas as manifest text: pure builders that turn ``{entity: quotas}``
into ruamel.yaml round-trip nodes, reading nothing and writing nothing.

The round trip is the point: an exported file loads with
:func:`~quotaform.manifest.load_manifests` and plans with no changes against
the cluster it came from. So every written name and value must read back to
exactly what the cluster holds; entities a manifest cannot express faithfully
are left out and reported (:class:`Skipped`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.resolver import VersionedResolver
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from quotaform import __version__
from quotaform.errors import ExportError
from quotaform.kafka.entity import (
    DEFAULT_NAME,
    ENTITY_TYPES,
    SHAPE_NAMES,
    Entity,
    shape_from_name,
    shape_name,
)
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.names import normalise_ip
from quotaform.kafka.units import format_quota_value, parse_quota_value, same_value
from quotaform.manifest.models import API_VERSION, KIND
from quotaform.plan.state import Scope, ScopeRule

__all__ = [
    "DEFAULT_NAME_COMMENT",
    "LiveQuotas",
    "Skipped",
    "export_header",
    "export_scope",
    "manifest_document",
    "parse_prefixes",
    "quota_entry",
    "split_exportable",
    "yaml_name",
    "yaml_quota_value",
]

LiveQuotas = Mapping[Entity, Mapping[str, float]]
"""``{entity: {quota key: value}}``, as in :attr:`LiveState.entities`."""

#: End-of-line comment on an entity with a part literally named ``<default>``.
DEFAULT_NAME_COMMENT = (
    f'"{DEFAULT_NAME}" is an ordinary {{etype}} name here, not the default {{etype}}'
)


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
        return f"{self.entity.label()}: {self.reason}"


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
        if not sep or etype not in ENTITY_TYPES or not prefix:
            raise ExportError(
                f"--prefix {text!r}: expected TYPE=PREFIX with TYPE one of "
                f"{', '.join(ENTITY_TYPES)} and a non-empty prefix, e.g. --prefix user=svc-"
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
        name != DEFAULT_NAME
        and _PLAIN_NAME.fullmatch(name) is not None
        and all(str(r.resolve(ScalarNode, name, (True, False))) == _STR_TAG for r in _RESOLVERS)
    )
    return name if plain else DoubleQuotedScalarString(name)


def yaml_quota_value(key: str, value: float) -> object:
    """A quota value as a YAML scalar, in readable units
    (:func:`~quotaform.kafka.units.format_quota_value`): ``"10MiB"`` plain,
    ``"150%"`` double-quoted, plain numbers as YAML numbers (``200``, ``2.5``)."""
    text = format_quota_value(key, value)
    if text.endswith("%"):
        return DoubleQuotedScalarString(text)
    if _INT_TEXT.fullmatch(text):
        return int(text)
    if _FLOAT_TEXT.fullmatch(text):
        return float(text)
    return text


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
        if not spec.applies_to(entity.types):
            return f"quota key {key!r} does not apply to {shape_name(entity.types)} entities"
        if not math.isfinite(value):
            return f"{key} is {value!r}"
        try:
            back = parse_quota_value(key, yaml_quota_value(key, value))
        except ValueError as exc:
            return f"{key}={value!r} cannot be written in a manifest: {exc}"
        if not same_value(back, value):  # pragma: no cover - format_quota_value promises equality
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
    literal = [etype for etype, name in entity.parts if name == DEFAULT_NAME]
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
