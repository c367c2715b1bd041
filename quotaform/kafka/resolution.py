"""Which quota a client really gets, from which entity, and which quota group.

Resolution is **per quota key**: for each key the most specific level whose
entity sets that key wins; values of different levels are never merged within
one key, but different keys of one client may come from different levels.

User / client-id keys, for a connection of user ``u`` with client id ``c``
(``ClientQuotaManager``, its ``DefaultQuotaCallback``):

====  ===================================  =====================
level entity                               metric tags
====  ===================================  =====================
1     ``{user=u, client-id=c}``            ``(u, c)``
2     ``{user=u, client-id=<default>}``    ``(u, c)``
3     ``{user=u}``                         ``(u, "")``
4     ``{user=<default>, client-id=c}``    ``(u, c)``
5     ``{user=<default>, client-id=<default>}``  ``(u, c)``
6     ``{user=<default>}``                 ``(u, "")``
7     ``{client-id=c}``                    ``("", c)``
8     ``{client-id=<default>}``            ``("", c)``
====  ===================================  =====================

The broker works in two steps, reproduced here exactly (:func:`resolve`):
``quotaMetricTags`` picks the metric tags from the shapes that set the key on
the broker (``quotaTypesEnabled``), then ``quotaLimit`` looks the quota up
*from the tags*. With a non-empty client id that equals "the first of levels
1-8 that sets the key, else unlimited (``Long.MAX_VALUE``)"; with an empty
client id (a client that sent none) only ``{user=u}`` and
``{user=<default>}`` can apply. Equal tags share one sensor: the *quota group*.

ip keys (``ConnectionQuotas.connectionRateForIp``): ``{ip=a}`` (level 1),
else ``{ip=<default>}`` (level 2), else unlimited (``Integer.MAX_VALUE``).

Everything here is pure data and functions over
``{Entity: {quota key: quota value}}`` maps (declared, live or planned state).
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from quotaform.kafka.entity import (
    CLIENT_ID,
    DEFAULT_NAME,
    IP,
    USER,
    Entity,
    Shape,
    mixes_ip,
    present_types,
)
from quotaform.kafka.keys import QUOTA_KEYS

__all__ = [
    "CLIENT_LEVELS",
    "GROUP_CHANGES",
    "GROUP_MERGES",
    "GROUP_SAME",
    "GROUP_SPLITS",
    "IP_LEVELS",
    "LOOKUP_BY_TAGS",
    "OWN_LEVELS",
    "TAGS_BY_MASK",
    "TAG_LEVELS",
    "UNMATCHED_TAG_TYPES",
    "Level",
    "Match",
    "MetricTags",
    "Principal",
    "QuotaIndex",
    "Resolution",
    "Shadow",
    "ShadowKind",
    "candidates",
    "group_change",
    "level_of",
    "matches",
    "own_entity",
    "quota_for_tags",
    "resolve",
    "resolve_all",
    "shadows",
    "variants",
]

Quotas = Mapping[str, float]
Entries = Mapping[Entity, Quotas]
"""``{entity: {quota key: quota value}}``: a whole quota configuration."""


@dataclass(frozen=True, slots=True)
class Level:
    """One rung of a precedence ladder.

    Attributes:
        number: 1-8 for user/client-id keys, 1-2 for ip keys (the note's and
            the ``ClientQuotaManager`` comment's numbering).
        template: ``((entity type, named), ...)`` in entity-type order:
            ``named`` True stands for the connection's own name of that type,
            False for the default entity. Level 2 is
            ``(("user", True), ("client-id", False))``.
        tag_types: the metric tags the broker sets when this level governs
            (``("user", "client-id")``, ``("user",)``, ``("client-id",)`` or
            ``("ip",)``); the other tags are empty.
    """

    number: int
    template: tuple[tuple[str, bool], ...]
    tag_types: tuple[str, ...]

    @property
    def types(self) -> Shape:
        """The entity types of the level's entity (its shape)."""
        return tuple(t for t, _ in self.template)

    def entity_for(self, names: Mapping[str, str | None]) -> Entity | None:
        """The level's entity for a connection with these names (entity type ->
        name), or ``None`` when a name the level needs is unknown (``None``)."""
        parts: list[tuple[str, str | None]] = []
        for etype, named in self.template:
            if named:
                name = names.get(etype)
                if name is None:
                    return None
                parts.append((etype, name))
            else:
                parts.append((etype, None))
        return Entity(tuple(parts))

    def pattern(self) -> str:
        """``{user=U, client-id=<default>}``: the level with U / C / A standing
        for the connection's own user, client id and address."""
        placeholder = {USER: "U", CLIENT_ID: "C", IP: "A"}
        inner = ", ".join(f"{t}={placeholder[t] if n else DEFAULT_NAME}" for t, n in self.template)
        return "{" + inner + "}"


_U, _C = (USER, CLIENT_ID), (USER,)
#: The 8 user/client-id levels, most specific first (KIP-55, ``ClientQuotaManager``).
CLIENT_LEVELS: tuple[Level, ...] = (
    Level(1, ((USER, True), (CLIENT_ID, True)), _U),
    Level(2, ((USER, True), (CLIENT_ID, False)), _U),
    Level(3, ((USER, True),), _C),
    Level(4, ((USER, False), (CLIENT_ID, True)), _U),
    Level(5, ((USER, False), (CLIENT_ID, False)), _U),
    Level(6, ((USER, False),), _C),
    Level(7, ((CLIENT_ID, True),), (CLIENT_ID,)),
    Level(8, ((CLIENT_ID, False),), (CLIENT_ID,)),
)
#: The 2 ip levels (KIP-612, ``ConnectionQuotas``).
IP_LEVELS: tuple[Level, ...] = (
    Level(1, ((IP, True),), (IP,)),
    Level(2, ((IP, False),), (IP,)),
)

#: The broker's second step (``DefaultQuotaCallback.quotaLimit``): the levels
#: looked up, in order, by which tags of the quota group are non-empty
#: ``(user tag, client-id tag)``. Every engine (this module, the Spark
#: transforms) reads this table.
LOOKUP_BY_TAGS: Mapping[tuple[bool, bool], tuple[Level, ...]] = MappingProxyType(
    {
        (True, True): tuple(CLIENT_LEVELS[i - 1] for i in (1, 2, 4, 5)),
        (True, False): tuple(CLIENT_LEVELS[i - 1] for i in (3, 6)),
        (False, True): tuple(CLIENT_LEVELS[i - 1] for i in (7, 8)),
        (False, False): (),
    }
)
_BY_TAGS = LOOKUP_BY_TAGS
#: The broker's first step looks for the first EXISTING level among these
#: (``DefaultQuotaCallback.quotaMetricTags`` in mixed mode).
TAG_LEVELS: tuple[Level, ...] = CLIENT_LEVELS[:6]
#: The broker's first step (``DefaultQuotaCallback.quotaMetricTags``) when the
#: shapes that set a key on the broker (its ``quotaTypesEnabled`` mask: 0, 1
#: client-id, 2 user, 4 user+client-id) are of at most one kind: the tags it
#: sets, whether or not an entity matches (the others are empty). With no
#: shape (mask 0) nothing is recorded. Any other mask is mixed: the tags of the
#: first existing level of :data:`TAG_LEVELS`, else :data:`UNMATCHED_TAG_TYPES`.
#: Every engine reads this table.
TAGS_BY_MASK: Mapping[frozenset[Shape], tuple[str, ...]] = MappingProxyType(
    {
        frozenset(): (CLIENT_ID,),
        frozenset({(CLIENT_ID,)}): (CLIENT_ID,),
        frozenset({(USER,)}): (USER,),
        frozenset({(USER, CLIENT_ID)}): (USER, CLIENT_ID),
    }
)
#: Mixed mode's tags when no level of :data:`TAG_LEVELS` exists for the principal.
UNMATCHED_TAG_TYPES: tuple[str, ...] = (CLIENT_ID,)
#: The level whose entity keeps a quota group's own tags, by which of its tags
#: are non-empty ``(user tag, client-id tag)``: ``{user=u, client-id=c}``,
#: ``{user=u}``, ``{client-id=c}`` (also for a group with neither tag, the
#: one a client without a client id forms under client-id quotas); ip groups:
#: ``{ip=a}``. Where a recommended quota goes (:func:`own_entity`).
OWN_LEVELS: Mapping[tuple[bool, bool], Level] = MappingProxyType(
    {
        (True, True): CLIENT_LEVELS[0],
        (True, False): CLIENT_LEVELS[2],
        (False, True): CLIENT_LEVELS[6],
        (False, False): CLIENT_LEVELS[6],
    }
)

_BY_TEMPLATE: Mapping[tuple[tuple[str, bool], ...], Level] = MappingProxyType(
    {lvl.template: lvl for lvl in (*CLIENT_LEVELS, *IP_LEVELS)}
)


def level_of(entity: Entity) -> Level:
    """The level an entity sits at (``{user=<default>}`` -> level 6).

    Raises:
        ValueError: the entity is not of a shape Kafka resolves.
    """
    template = tuple((t, n is not None) for t, n in entity.parts)
    try:
        return _BY_TEMPLATE[template]
    except KeyError:
        raise ValueError(
            f"{entity.label()} is not a client-quota entity of a shape Kafka resolves"
        ) from None


def ladder_of(entity: Entity) -> tuple[Level, ...]:
    """The ladder (:data:`CLIENT_LEVELS` or :data:`IP_LEVELS`) ``entity`` is on."""
    return IP_LEVELS if IP in entity.types else CLIENT_LEVELS


@dataclass(frozen=True, slots=True)
class Principal:
    """A client connection as the broker sees it.

    Attributes:
        user: the user principal name without ``User:`` (``ANONYMOUS`` for
            unauthenticated clients); ``None`` = unknown.
        client_id: the ``client.id`` sent; ``""`` for a client that sent none
            (the broker reads null as ``""``); ``None`` = unknown.
        ip: the client's address (canonical text); set alone.

    Raises:
        ValueError: ``ip`` combined with ``user`` or ``client_id``.
    """

    user: str | None = None
    client_id: str | None = None
    ip: str | None = None

    def __post_init__(self) -> None:
        if mixes_ip(present_types(user=self.user, client_id=self.client_id, ip=self.ip)):
            raise ValueError("an ip principal has no user or client-id")

    @property
    def is_ip(self) -> bool:
        """True for an ip principal (ip keys apply), else user/client-id keys."""
        return self.ip is not None

    def names(self) -> dict[str, str | None]:
        """``{entity type: name}``; an empty client id counts as no name (Kafka
        rejects empty entity names, so no level can name it)."""
        if self.is_ip:
            return {IP: self.ip}
        return {USER: self.user, CLIENT_ID: self.client_id or None}

    def as_dict(self) -> dict[str, str | None]:
        """``{"user": U, "client-id": C}`` or ``{"ip": A}`` (explain's JSON)."""
        return {IP: self.ip} if self.is_ip else {USER: self.user, CLIENT_ID: self.client_id}


@dataclass(frozen=True, slots=True)
class MetricTags:
    """The tags of the broker's quota sensor for one key: the quota group.

    ``""`` is an empty tag (left out of the MBean name); ``None`` a tag whose
    value is not known (the principal's name was not given). Names are real
    names, never ``<default>``.
    """

    user: str | None = ""
    client_id: str | None = ""
    ip: str | None = ""

    def as_dict(self) -> dict[str, str | None]:
        """``{"user": ..., "client-id": ...}`` or ``{"ip": ...}``."""
        if self.ip:
            return {IP: self.ip}
        return {USER: self.user, CLIENT_ID: self.client_id}


@dataclass(frozen=True, slots=True)
class Resolution:
    """What one principal gets for one quota key.

    Attributes:
        key: the quota key.
        value: the effective quota value in the key's unit (bytes/s, %,
            mutations/s, connections/s); ``None`` = unlimited.
        level: the level of the entity the value comes from, ``None`` when
            unlimited.
        entity: that entity, ``None`` when unlimited.
        tags: the metric tags of the quota group.
        recorded: whether the broker keeps a sensor for it at all: false when
            no entity of any shape sets the key (user/client-id), or when an ip
            is unlimited (``ConnectionQuotas``).
    """

    key: str
    value: float | None
    level: Level | None
    entity: Entity | None
    tags: MetricTags
    recorded: bool = True

    @property
    def unlimited(self) -> bool:
        """No entity sets the key for this principal."""
        return self.value is None

    @property
    def bound(self) -> float:
        """The number the broker enforces: the value, or ``Long.MAX_VALUE`` /
        ``Integer.MAX_VALUE`` when unlimited."""
        return self.value if self.value is not None else QUOTA_KEYS[self.key].unlimited


class QuotaIndex:
    """A quota configuration indexed for resolution: per key, entity -> value,
    and the shapes that set the key (the broker's ``quotaTypesEnabled`` mask).

    Resolving a principal costs a few dictionary look-ups per key, whatever
    the number of entries.

    Args:
        entries: ``{entity: {quota key: quota value}}``; keys that do not
            apply to an entity's types are ignored, as
            ``ClientQuotaMetadataManager`` ignores them.
    """

    def __init__(self, entries: Entries) -> None:
        by_key: dict[str, dict[Entity, float]] = {k: {} for k in QUOTA_KEYS}
        for entity, quotas in entries.items():
            for key, value in quotas.items():
                spec = QUOTA_KEYS.get(key)
                if spec is not None and spec.applies_to(entity.types):
                    by_key[key][entity] = float(value)
        self._by_key = by_key
        self._shapes = {k: frozenset(e.types for e in v) for k, v in by_key.items()}
        by_level: dict[str, dict[int, dict[Entity, float]]] = {}
        for key, entities in by_key.items():
            levels: dict[int, dict[Entity, float]] = {}
            for entity, value in entities.items():
                levels.setdefault(level_of(entity).number, {})[entity] = value
            by_level[key] = levels
        self._by_level = by_level

    def value(self, entity: Entity, key: str) -> float | None:
        """The value ``entity`` sets for ``key``, ``None`` when it sets none."""
        return self._by_key.get(key, {}).get(entity)

    def shapes(self, key: str) -> frozenset[Shape]:
        """The shapes of the entities that set ``key``."""
        return self._shapes.get(key, frozenset())

    def entities(self, key: str) -> Mapping[Entity, float]:
        """Every entity that sets ``key``, with its value."""
        return MappingProxyType(self._by_key.get(key, {}))

    def at_level(self, key: str, number: int) -> Mapping[Entity, float]:
        """The entities of level ``number`` (of the key's ladder) that set ``key``."""
        return MappingProxyType(self._by_level.get(key, {}).get(number, {}))


@dataclass(frozen=True, slots=True)
class Match:
    """An entity that matches a principal and sets a key: ``level``,
    ``entity`` and its ``value`` (the key's unit)."""

    level: Level
    entity: Entity
    value: float


def matches(index: QuotaIndex, principal: Principal, key: str) -> tuple[Match, ...]:
    """Every entity matching ``principal`` (at any level whose names are
    known) that sets ``key``, most specific first: the winner and the entries
    it overrides (the KIP-546 draft's ``--include-overrides``)."""
    found = []
    for level, entity in candidates(principal):
        value = index.value(entity, key)
        if value is not None:
            found.append(Match(level, entity, value))
    return tuple(found)


def variants(index: QuotaIndex, principal: Principal, key: str) -> tuple[Match, ...]:
    """Entities that set ``key`` and would match ``principal`` for some value
    of a name it leaves unknown (``None``), sorted most specific first.

    ``Principal(user="alice")`` (client id unknown): ``{user=alice,
    client-id=X}``, ``{user=<default>, client-id=X}`` and ``{client-id=X}``
    for every X that sets ``key``. With such an entity a client named X may
    get another quota than :func:`resolve` says for "a client id without
    entries of its own". Nothing for an ip principal or one with every name
    known.
    """
    if principal.is_ip:
        return ()
    names = principal.names()
    unknown = {t for t in (USER, CLIENT_ID) if getattr(principal, _ATTR[t]) is None}
    if not unknown:
        return ()
    found = []
    for level in CLIENT_LEVELS:
        named = {t for t, n in level.template if n}
        if not named & unknown:
            continue
        for entity, value in index.at_level(key, level.number).items():
            if all(names[t] is None or entity.name(t) == names[t] for t in named):
                found.append(Match(level, entity, value))
    return tuple(sorted(found, key=lambda m: (m.level.number, m.entity.sort_key())))


_ATTR = {USER: "user", CLIENT_ID: "client_id"}


class ShadowKind(enum.Enum):
    """Why a declared entity is never, or only narrowly, the effective source of a key."""

    NEVER = "never"
    """Never applies to anyone: ``{client-id=c}`` or ``{client-id=<default>}``
    while ``{user=<default>}`` or ``{user=<default>, client-id=<default>}``
    sets the key, or ``{client-id=c}`` while ``{user=<default>,
    client-id=c}`` does. Every connection has a user (``ANONYMOUS`` at
    least), so step 1 finds a user level first and tags the group with the
    user; a client-id level is then never looked up."""
    ONLY_WITHOUT_CLIENT_ID = "only-without-client-id"
    """Applies only to connections that send no client id: ``{user=u}``
    while ``{user=u, client-id=<default>}`` sets the key, or
    ``{user=<default>}`` while ``{user=<default>, client-id=<default>}`` does.
    Every connection with a client id stops at the ``<default>`` client-id level."""


@dataclass(frozen=True, slots=True)
class Shadow:
    """``entity`` sets ``key`` but ``by`` (which also sets it) takes its place
    (:class:`ShadowKind` says for whom)."""

    entity: Entity
    key: str
    by: Entity
    kind: ShadowKind


_USER_DEFAULT = Entity(((USER, None),))
_BOTH_DEFAULT = Entity(((USER, None), (CLIENT_ID, None)))


def shadows(index: QuotaIndex) -> tuple[Shadow, ...]:
    """Every entity of ``index`` that the configuration itself keeps from
    applying, per key, provable from the configuration alone (whatever the
    principals' names): see :class:`ShadowKind`. Sorted by entity, then key.

    The proof is the broker's two steps (:func:`resolve`): with
    ``{user=<default>}`` (level 6) setting a key, every principal matches a
    user level, so step 1 tags it with the user and step 2 never reaches
    levels 7-8; ``{user=<default>, client-id=<default>}`` (level 5) does the
    same for every principal with a client id, and one without cannot match
    levels 7-8 at all; ``{user=<default>, client-id=c}`` (level 4) does it for
    every principal with client id ``c``. A ``<default>`` client-id level (2 or 5) catches every
    connection with a client id before the user-only level below it (3 or 6).
    """
    found: list[Shadow] = []
    for key in QUOTA_KEYS:
        entities = index.entities(key)
        if not entities:
            continue
        user_default = _USER_DEFAULT in entities
        both_default = _BOTH_DEFAULT in entities
        if user_default or both_default:
            by = _USER_DEFAULT if user_default else _BOTH_DEFAULT
            for number in (7, 8):
                found += [Shadow(e, key, by, ShadowKind.NEVER) for e in index.at_level(key, number)]
        else:
            for entity in index.at_level(key, 7):
                same_client = Entity(((USER, None), (CLIENT_ID, entity.name(CLIENT_ID))))
                if same_client in entities:
                    found.append(Shadow(entity, key, same_client, ShadowKind.NEVER))
        if both_default and user_default:
            found.append(
                Shadow(_USER_DEFAULT, key, _BOTH_DEFAULT, ShadowKind.ONLY_WITHOUT_CLIENT_ID)
            )
        for entity in index.at_level(key, 3):
            user_client_default = Entity(((USER, entity.name(USER)), (CLIENT_ID, None)))
            if user_client_default in entities:
                found.append(
                    Shadow(entity, key, user_client_default, ShadowKind.ONLY_WITHOUT_CLIENT_ID)
                )
    return tuple(sorted(found, key=lambda s: (s.entity.sort_key(), s.key)))


def candidates(principal: Principal) -> tuple[tuple[Level, Entity], ...]:
    """The entities that could give ``principal`` its quota, most specific
    first: ``(level, entity)`` for each level whose names are known."""
    names = principal.names()
    ladder = IP_LEVELS if principal.is_ip else CLIENT_LEVELS
    found = []
    for level in ladder:
        entity = level.entity_for(names)
        if entity is not None:
            found.append((level, entity))
    return tuple(found)


class _Entities:
    """Each level's entity for one principal, by level number - 1 (``None``: a
    name the level needs is unknown), built when first asked for: a look-up
    skips the levels where no entity sets the key (the analytics resolve
    hundreds of thousands of observed groups; most levels are empty)."""

    __slots__ = ("_built", "_ladder", "_names")

    def __init__(self, principal: Principal) -> None:
        self._names = principal.names()
        self._ladder = ladder_for(principal)
        self._built: dict[int, Entity | None] = {}

    def __getitem__(self, position: int) -> Entity | None:
        try:
            return self._built[position]
        except KeyError:
            entity = self._built[position] = self._ladder[position].entity_for(self._names)
            return entity


def _entities(principal: Principal) -> _Entities:
    return _Entities(principal)


def ladder_for(principal: Principal) -> tuple[Level, ...]:
    """:data:`IP_LEVELS` for an ip principal, else :data:`CLIENT_LEVELS`."""
    return IP_LEVELS if principal.is_ip else CLIENT_LEVELS


def _lookup(
    index: QuotaIndex, levels: Iterable[Level], entities: _Entities, key: str
) -> tuple[Level, Entity, float] | None:
    by_level = index._by_level.get(key, {})
    for level in levels:
        if not by_level.get(level.number):
            continue
        entity = entities[level.number - 1]
        if entity is None:
            continue
        value = index.value(entity, key)
        if value is not None:
            return level, entity, value
    return None


def _client_tags(
    index: QuotaIndex, principal: Principal, key: str, entities: _Entities
) -> tuple[str | None, str | None]:
    """Step 1, ``DefaultQuotaCallback.quotaMetricTags``: ``(user tag, client-id tag)``."""
    types = TAGS_BY_MASK.get(index.shapes(key))
    if types is None:
        found = _lookup(index, TAG_LEVELS, entities, key)
        types = UNMATCHED_TAG_TYPES if found is None else found[0].tag_types
    return (
        principal.user if USER in types else "",
        principal.client_id if CLIENT_ID in types else "",
    )


def resolve(index: QuotaIndex, principal: Principal, key: str) -> Resolution:
    """What ``principal`` gets for ``key`` under the configuration ``index``.

    For user/client-id keys this is the broker's two steps (module docstring):
    the metric tags from the shapes that set the key, then the quota from the
    tags. An unknown name (``None``) is treated as a name no entity names; its
    tag is ``None``. For ip keys: ``{ip=a}``, else ``{ip=<default>}``, else
    unlimited. A few dictionary look-ups, whatever the size of ``index``.

    Raises:
        KeyError: ``key`` is not a quota key.
        ValueError: ``key`` does not apply to the principal (an ip key for a
            user/client-id principal, or the other way round).
    """
    spec = QUOTA_KEYS[key]
    if principal.is_ip != (IP in spec.entity_types):
        raise ValueError(
            f"{key} does not apply to {'ip' if principal.is_ip else 'client'} principals"
        )
    return _resolve(index, principal, key, _entities(principal))


def _resolve(index: QuotaIndex, principal: Principal, key: str, entities: _Entities) -> Resolution:
    if principal.is_ip:
        found = _lookup(index, IP_LEVELS, entities, key)
        tags = MetricTags(user="", client_id="", ip=principal.ip)
        if found is None:
            return Resolution(key, None, None, None, tags, recorded=False)
        level, entity, value = found
        return Resolution(key, value, level, entity, tags)
    user_tag, client_tag = _client_tags(index, principal, key, entities)
    tags = MetricTags(user=user_tag, client_id=client_tag)
    # Step 2, quotaLimit: the look-up order depends on which tags are non-empty
    # (an unknown name is non-empty: some real name stands there).
    order = _BY_TAGS[(user_tag != "", client_tag != "")]
    recorded = bool(index.shapes(key))
    found = _lookup(index, order, entities, key)
    if found is None:
        return Resolution(key, None, None, None, tags, recorded=recorded)
    level, entity, value = found
    return Resolution(key, value, level, entity, tags, recorded=recorded)


def quota_for_tags(index: QuotaIndex, tags: MetricTags, key: str) -> Resolution:
    """The quota of an observed quota group: the broker's second step alone,
    from the group's metric tags (as its metrics carry them, the user
    URL-decoded), the way ``quotaLimit`` looks it up. What an observed usage
    series is held to.

    Raises:
        KeyError: ``key`` is not a quota key.
    """
    if IP in QUOTA_KEYS[key].entity_types:
        principal = Principal(ip=tags.ip or None)
        return _resolve(index, principal, key, _entities(principal))
    user, client = tags.user or None, tags.client_id or None
    principal = Principal(user=user, client_id=client)
    entities = _entities(principal)
    order = LOOKUP_BY_TAGS[(user is not None, client is not None)]
    found = _lookup(index, order, entities, key)
    recorded = bool(index.shapes(key))
    if found is None:
        return Resolution(key, None, None, None, tags, recorded=recorded)
    level, entity, value = found
    return Resolution(key, value, level, entity, tags, recorded=recorded)


# ------------------------------------------------------------------ quota groups

GROUP_SAME = "none"
"""A group keeps its tags: one sensor before and after."""
GROUP_SPLITS = "splits"
"""A group divides by a name it spans: its usage cannot be split from broker metrics."""
GROUP_MERGES = "merges"
"""A group joins a broader one (a tag is dropped): their usage adds up in one sensor."""


def _change(is_ip: bool, split: bool, unknown_tag: bool, same_tags: bool) -> str:
    if split or (not is_ip and unknown_tag):
        return GROUP_SPLITS
    if same_tags:
        return GROUP_SAME
    return GROUP_MERGES


#: :func:`group_change` by its four facts ``(is_ip, split, unknown_tag,
#: same_tags)``, every combination: the table the Spark engine reads.
GROUP_CHANGES: Mapping[tuple[bool, bool, bool, bool], str] = MappingProxyType(
    {
        (is_ip, split, unknown, same): _change(is_ip, split, unknown, same)
        for is_ip, split, unknown, same in itertools.product((False, True), repeat=4)
    }
)


def group_change(before: MetricTags, after: MetricTags, *, split: bool) -> str:
    """What becomes of an observed quota group (its tags ``before``, the user
    decoded) once a change gives its connections the tags ``after``
    (:attr:`Resolution.tags` of its representative principal):

    * :data:`GROUP_SPLITS` when ``split`` (an entity names some of the
      group's connections: :func:`variants`) or an ``after`` tag is unknown
      (``None``: it follows each connection's own name);
    * :data:`GROUP_SAME` when the tags stay (equal tags share one sensor,
      ``ClientSensors``);
    * :data:`GROUP_MERGES` otherwise: with every name of the group known, a
      change of tags can only drop one, so the group joins a broader one.

    ip groups never split: their tag is the address.
    """
    return GROUP_CHANGES[
        (
            bool(before.ip),
            split,
            after.user is None or after.client_id is None,
            before == after,
        )
    ]


def own_entity(tags: MetricTags) -> Entity:
    """The entity that sets a quota for exactly the quota group ``tags``
    (user decoded) and keeps its tags: ``{ip=a}``, or the level of
    :data:`OWN_LEVELS` for the non-empty tags with the group's names
    (``MetricTags(user="alice", client_id="")`` -> ``{user=alice}``).

    Raises:
        ValueError: a tag is unknown (``None``).
    """
    if tags.ip:
        return Entity(((IP, tags.ip),))
    entity = OWN_LEVELS[(tags.user != "", tags.client_id != "")].entity_for(tags.as_dict())
    if entity is None:
        raise ValueError("a quota group with an unknown tag has no entity of its own")
    return entity


def resolve_all(index: QuotaIndex, principal: Principal) -> dict[str, Resolution]:
    """:func:`resolve` for every quota key that applies to ``principal``, in
    :data:`~quotaform.kafka.keys.QUOTA_KEYS` order (the principal's level
    entities are built once for all keys)."""
    wanted = IP if principal.is_ip else USER
    entities = _entities(principal)
    return {
        key: _resolve(index, principal, key, entities)
        for key, spec in QUOTA_KEYS.items()
        if wanted in spec.entity_types
    }
