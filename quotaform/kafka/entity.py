"""Client-quota entities: entity types, the shapes Kafka accepts, and one label.

An *entity* is a map from *entity type* (``user``, ``client-id``, ``ip``) to
*entity name*; the *default entity* of a type has the name ``None`` (null on the
wire, shown as ``<default>`` by Kafka's tools). A user literally named
``"<default>"`` is an ordinary, different entity (``ClientQuotaEntity``).

The valid combinations of entity types (*shapes*) are those of KIP-546 and
KIP-612: ``user``, ``client-id``, ``user+client-id`` and ``ip``; ``ip`` never
combines with the others. :data:`SHAPES` is the one list of them, in the order
quotaform shows them.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from types import MappingProxyType
from typing import Any

__all__ = [
    "CLIENT_ID",
    "CONFIG_COMMAND_TYPES",
    "CONFIG_COMMAND_WORDS",
    "DEFAULT_NAME",
    "ENTITY_TYPES",
    "IP",
    "SHAPES",
    "SHAPE_NAMES",
    "USER",
    "Entity",
    "EntityShape",
    "Shape",
    "config_command_label",
    "escape_unprintable",
    "mixes_ip",
    "present_types",
    "quote_name",
    "shape_from_name",
    "shape_name",
]

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

#: How Kafka's tools show a default entity's name (``None`` here, null on the
#: wire). A name literally spelled so is an ordinary, different entity.
DEFAULT_NAME = "<default>"

#: Entity types in display and sort order.
ENTITY_TYPES: tuple[str, ...] = (USER, CLIENT_ID, IP)
_TYPE_ORDER = {t: i for i, t in enumerate(ENTITY_TYPES)}

Shape = tuple[str, ...]
"""An entity shape: its entity types in :data:`ENTITY_TYPES` order, e.g.
``("user", "client-id")``."""

#: The shapes Kafka accepts (KIP-546, KIP-612), in display and sort order.
SHAPES: tuple[Shape, ...] = ((USER,), (CLIENT_ID,), (USER, CLIENT_ID), (IP,))
_SHAPE_ORDER = {s: i for i, s in enumerate(SHAPES)}


def mixes_ip(types: Iterable[str]) -> bool:
    """True when ``types`` combine ``ip`` with ``user`` or ``client-id``: Kafka
    never accepts that (KIP-612, ``ClientQuotaControlManager``)."""
    present = set(types)
    return IP in present and len(present) > 1


def present_types(*, user: object = None, client_id: object = None, ip: object = None) -> Shape:
    """The entity types given a value (not ``None``), in display order: the
    parts a client or a filter names, for :func:`mixes_ip`."""
    given = ((USER, user), (CLIENT_ID, client_id), (IP, ip))
    return tuple(t for t, value in given if value is not None)


def shape_name(shape: Iterable[str]) -> str:
    """``("user", "client-id")`` -> ``"user+client-id"`` (the manifests' spelling)."""
    return "+".join(shape)


#: Manifest spelling of each valid shape (``spec.scope[].shape``) -> the shape.
SHAPE_NAMES: Mapping[str, Shape] = MappingProxyType({shape_name(s): s for s in SHAPES})


def shape_from_name(name: str) -> Shape:
    """``"user+client-id"`` -> ``("user", "client-id")``.

    Raises:
        ValueError: not one of ``user``, ``client-id``, ``user+client-id``, ``ip``.
    """
    try:
        return SHAPE_NAMES[name]
    except KeyError:
        raise ValueError(
            f"unknown shape {name!r} (expected one of {', '.join(SHAPE_NAMES)})"
        ) from None


#: ``kafka-configs --entity-type`` values (``ConfigCommand``) -> Kafka's entity
#: type, and the words ``kafka-configs --describe`` prints for each entity type.
CONFIG_COMMAND_TYPES: Mapping[str, str] = MappingProxyType(
    {"users": USER, "clients": CLIENT_ID, "ips": IP}
)
CONFIG_COMMAND_WORDS: Mapping[str, str] = MappingProxyType(
    {USER: "user-principal", CLIENT_ID: "client-id", IP: "ip"}
)


def config_command_label(entity: Entity) -> str:
    """How ``kafka-configs --describe`` names ``entity``: ``user-principal
    'alice', the default client-id`` (``ConfigCommand``; names unescaped, as
    Kafka prints them)."""
    return ", ".join(
        f"the default {CONFIG_COMMAND_WORDS[t]}"
        if name is None
        else f"{CONFIG_COMMAND_WORDS[t]} '{name}'"
        for t, name in entity.parts
    )


_ABSENT: Any = object()

# Characters never sent raw to a terminal or a log: controls (C0, DEL, C1 such
# as CSI), format characters (bidi overrides), separators that break lines.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def escape_unprintable(text: str) -> str:
    """``text`` with every control, format or line-separator character written
    as an escape (``\\x1b`` -> ``\\u001b``): safe to print on a terminal or in
    a log, one line, nothing hidden (bidi overrides included)."""
    if text.isprintable():
        return text
    return "".join(
        (f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
        if unicodedata.category(ch) in _UNSAFE_CATEGORIES
        else ch
        for ch in text
    )


def quote_name(name: str) -> str:
    """An entity name as quotaform prints it: a JSON string literal with every
    unprintable character escaped (:func:`escape_unprintable`), e.g.
    ``"svc-a"``, ``"a\\u001b[31m"``."""
    return escape_unprintable(json.dumps(name, ensure_ascii=False))


_first = itemgetter(0)
_SHAPE_TUPLES: dict[Shape, Shape] = {}

EntityShape = tuple[tuple[str, bool], ...]
"""An entity's shape with defaults marked: sorted ``(entity type, is_default)`` pairs."""


@dataclass(frozen=True, slots=True)
class Entity:
    """A client-quota entity: sorted ``(entity type, entity name)`` pairs.

    ``name is None`` means the default entity of that type. Build one with
    :meth:`of` or :meth:`from_mapping`; both sort the parts (user, client-id, ip)
    so equal entities compare and hash equal.

    Raises:
        ValueError: (from the constructors) for a type given twice. Shape rules
            (ip alone, known types) are checked by :meth:`shape_problem`, not
            here, so the wire layer can send what the broker should judge.
    """

    parts: tuple[tuple[str, str | None], ...]
    #: The entity types, sorted: the entity's :data:`Shape` (one shared tuple per shape).
    types: Shape = field(init=False, repr=False, compare=False)
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Both are asked for millions of times in a 100,000-entity plan.
        types = tuple(map(_first, self.parts))
        object.__setattr__(self, "types", _SHAPE_TUPLES.setdefault(types, types))
        object.__setattr__(self, "_hash", hash(self.parts))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[Entity], tuple[tuple[tuple[str, str | None], ...]]]:
        # Rebuilt from the parts: a string's hash differs between processes.
        return (Entity, (self.parts,))

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, str | None]) -> Entity:
        """Entity from ``{entity type: name or None}`` (the JSON plan's ``entity``)."""
        return cls.from_pairs(mapping.items())

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, str | None]]) -> Entity:
        """Entity from ``(entity type, name or None)`` pairs in any order."""
        seen: dict[str, str | None] = {}
        for etype, name in pairs:
            if etype in seen:
                raise ValueError(f"entity type {etype!r} given twice")
            seen[etype] = name
        return cls(tuple(sorted(seen.items(), key=lambda p: (_TYPE_ORDER.get(p[0], 99), p[0]))))

    @classmethod
    def of(cls, *, user: Any = _ABSENT, client_id: Any = _ABSENT, ip: Any = _ABSENT) -> Entity:
        """Entity from keyword parts (``str`` or ``None``); an omitted part is absent,
        ``None`` is the default.

        ``Entity.of(user="alice", client_id=None)`` is ``{user=alice, client-id=<default>}``.
        """
        given = ((USER, user), (CLIENT_ID, client_id), (IP, ip))
        return cls.from_pairs((t, v) for t, v in given if v is not _ABSENT)

    @property
    def shape(self) -> EntityShape:
        """``((entity type, is_default), ...)``, e.g. ``(("user", False), ("client-id", True))``."""
        return tuple((t, n is None) for t, n in self.parts)

    def as_dict(self) -> dict[str, str | None]:
        """``{entity type: name or None}`` (the JSON plan's ``entity`` object)."""
        return dict(self.parts)

    def name(self, entity_type: str) -> str | None:
        """The name of one part (``None`` = default).

        Raises:
            KeyError: the entity has no part of that type.
        """
        for t, n in self.parts:
            if t == entity_type:
                return n
        raise KeyError(entity_type)

    @property
    def is_default(self) -> bool:
        """True when any part is a default entity."""
        return any(n is None for _, n in self.parts)

    def sort_key(self) -> tuple[object, ...]:
        """Deterministic ordering: by shape (user, client-id, user+client-id, ip),
        then by names with the default entity first."""
        return (
            _SHAPE_ORDER.get(self.types, len(_SHAPE_ORDER)),
            self.types,
            tuple((n is not None, n or "") for _, n in self.parts),
        )

    def shape_problem(self) -> str | None:
        """Why Kafka would reject this combination of entity types, or ``None``."""
        unknown = [t for t in self.types if t not in _TYPE_ORDER]
        if unknown:
            return f"unknown entity type {unknown[0]!r} (expected one of {', '.join(ENTITY_TYPES)})"
        if self.types not in _SHAPE_ORDER:
            if mixes_ip(self.types):
                return "ip cannot be combined with user or client-id (KIP-612)"
            return f"unsupported entity shape {shape_name(self.types) or '(empty)'}"
        return None

    def label(self) -> str:
        """The one spelling of an entity in quotaform's messages and reports:
        ``user="svc-a", client-id=<default>``. Names are JSON-quoted (control
        characters escaped), so a user literally named ``"<default>"`` never
        reads as the default entity and no name can break a line."""
        return ", ".join(
            f"{t}={DEFAULT_NAME}" if n is None else f"{t}={quote_name(n)}" for t, n in self.parts
        )

    def __str__(self) -> str:
        return self.label()
