"""Kafka client-quota entities and quota keys: the vocabulary every module shares.

An *entity* is a map from *entity type* (``user``, ``client-id``, ``ip``) to
*entity name*; the *default entity* of a type has the name ``None`` (null on the
wire, shown as ``<default>`` by Kafka's tools). A user literally named
``"<default>"`` is an ordinary, different entity (``ClientQuotaEntity``).

Quota keys and their rules come from Kafka's ``QuotaConfig`` (server-common) and
``ClientQuotaControlManager.validateQuotaKeyValue``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ENTITY_TYPES",
    "QUOTA_KEYS",
    "Entity",
    "EntityShape",
    "KeySpec",
    "ValueType",
    "key_spec",
]

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

#: Entity types in display and sort order.
ENTITY_TYPES: tuple[str, ...] = (USER, CLIENT_ID, IP)
_TYPE_ORDER = {t: i for i, t in enumerate(ENTITY_TYPES)}

#: The shapes Kafka accepts: each a sorted tuple of entity types (KIP-546, KIP-612).
VALID_SHAPES: frozenset[tuple[str, ...]] = frozenset(
    {(USER,), (CLIENT_ID,), (USER, CLIENT_ID), (IP,)}
)
_SHAPE_ORDER = {s: i for i, s in enumerate([(USER,), (CLIENT_ID,), (USER, CLIENT_ID), (IP,)])}

_ABSENT: Any = object()

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


class ValueType(enum.Enum):
    """How the controller checks a quota value (``QuotaConfig`` ConfigDef type)."""

    LONG = "LONG"
    INT = "INT"
    DOUBLE = "DOUBLE"


@dataclass(frozen=True, slots=True)
class KeySpec:
    """One quota key.

    Attributes:
        key: the quota key, e.g. ``producer_byte_rate``.
        value_type: LONG / INT values must be whole numbers (tolerance 1e-6 on the
            controller); DOUBLE values may be fractional.
        entity_types: entity types the key is valid for.
        unit: human unit of the value (``bytes/s``, ``%``, ``mutations/s``,
            ``connections/s``).
    """

    key: str
    value_type: ValueType
    entity_types: frozenset[str]
    unit: str

    @property
    def max_value(self) -> int | None:
        """Largest accepted value (Long.MAX / Integer.MAX), ``None`` for DOUBLE."""
        if self.value_type is ValueType.LONG:
            return LONG_MAX
        if self.value_type is ValueType.INT:
            return INT_MAX
        return None


_CLIENT = frozenset({USER, CLIENT_ID})

#: Every quota key quotaform manages, by name (``QuotaConfig``).
QUOTA_KEYS: Mapping[str, KeySpec] = {
    s.key: s
    for s in (
        KeySpec("producer_byte_rate", ValueType.LONG, _CLIENT, "bytes/s"),
        KeySpec("consumer_byte_rate", ValueType.LONG, _CLIENT, "bytes/s"),
        KeySpec("request_percentage", ValueType.DOUBLE, _CLIENT, "%"),
        KeySpec("controller_mutation_rate", ValueType.DOUBLE, _CLIENT, "mutations/s"),
        KeySpec("connection_creation_rate", ValueType.INT, frozenset({IP}), "connections/s"),
    )
}


def key_spec(key: str) -> KeySpec | None:
    """The :class:`KeySpec` of ``key``, or ``None`` when Kafka has no such quota key."""
    return QUOTA_KEYS.get(key)


EntityShape = tuple[tuple[str, bool], ...]
"""An entity's shape: sorted ``(entity type, is_default)`` pairs."""


@dataclass(frozen=True, slots=True)
class Entity:
    """A client-quota entity: sorted ``(entity type, entity name)`` pairs.

    ``name is None`` means the default entity of that type. Build one with
    :meth:`of` or :meth:`from_mapping`; both sort the parts (user, client-id, ip)
    so equal entities compare and hash equal.

    Raises:
        ValueError: (from the constructors) for an unknown entity type or a type
            given twice. Shape rules (ip alone) are checked by
            :meth:`shape_problem`, not here, so the wire layer can send what the
            broker should judge.
    """

    parts: tuple[tuple[str, str | None], ...]

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, str | None]) -> Entity:
        """Entity from ``{entity type: name or None}``."""
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
    def types(self) -> tuple[str, ...]:
        """The entity types, sorted."""
        return tuple(t for t, _ in self.parts)

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
        if self.types not in VALID_SHAPES:
            if IP in self.types:
                return "ip cannot be combined with user or client-id (KIP-612)"
            return f"unsupported entity shape {'+'.join(self.types) or '(empty)'}"
        return None

    def __str__(self) -> str:
        return ", ".join(f"{t}={'<default>' if n is None else repr(n)}" for t, n in self.parts)
