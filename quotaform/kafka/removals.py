"""Removals: where the clients of an entity fall for a quota key once the
entity no longer sets it (the next level of :mod:`quotaform.kafka.resolution`'s
ladder that does), for the plan's review and guard rails."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from quotaform.kafka.entity import Entity
from quotaform.kafka.resolution import Entries, ladder_of, level_of

__all__ = ["Fallback", "fallback"]


@dataclass(frozen=True, slots=True)
class Fallback:
    """What clients get for a quota key once an entity's value for it is removed.

    Attributes:
        key: the quota key.
        entity: the entity whose value applies instead; ``None`` when no level
            sets the key: the clients are unlimited.
        value: that entity's value (units of ``key``); ``None`` when unlimited,
            or when ``entity`` is outside the scope that ``after`` covers, so
            its value is not known (see :attr:`known`).
        varies_by: an entity type (``client-id``) when a level between the
            removed one and ``entity`` depends on that part of the connection:
            the answer then holds for connections whose name of that type has
            no quota of its own there; ``None`` when it holds for every
            affected connection.
    """

    key: str
    entity: Entity | None
    value: float | None
    varies_by: str | None = None

    @property
    def unlimited(self) -> bool:
        """No level sets the key: the clients are not throttled for it."""
        return self.entity is None

    @property
    def known(self) -> bool:
        """Whether the value is known (false: the fallback entity is outside the scope)."""
        return self.entity is None or self.value is not None


def fallback(
    entity: Entity,
    key: str,
    after: Entries,
    *,
    in_scope: Callable[[Entity], bool] | None = None,
) -> Fallback:
    """Where the clients of ``entity`` fall for ``key`` once ``entity`` no
    longer sets it, given ``after``, the quotas once the change is made.

    The clients affected are those for whom ``entity`` was the most specific
    level setting ``key``. Walking down the ladder from ``entity``'s level,
    the first level entity that sets ``key`` in ``after`` is the fallback.
    Levels that name a part the removed entity does not fix (removing
    ``{user=u}``: ``{user=<default>, client-id=c}`` depends on ``c``) are
    skipped, as if ``c`` had no quota of its own there, and the answer says so
    (:attr:`Fallback.varies_by`). Walking down, only the client id is ever
    unfixed: every level that depends on the user lies above those that do not.

    Args:
        entity: the entity losing ``key``.
        key: the quota key.
        after: every known entity's quotas after the change.
        in_scope: whether ``after`` is complete for an entity (the manifests'
            scope); the walk stops with an unknown value at the first level
            entity outside it. ``None``: ``after`` is complete.

    Raises:
        ValueError: ``entity`` is not of a shape Kafka resolves.
    """
    ladder = ladder_of(entity)
    start = level_of(entity)
    names = {t: n for t, n in entity.parts if n is not None}
    varies_by: str | None = None
    for level in ladder[ladder.index(start) + 1 :]:
        target = level.entity_for(names)
        if target is None:
            unfixed = next(t for t, named in level.template if named and t not in names)
            varies_by = varies_by or unfixed
            continue
        quotas = after.get(target)
        if quotas is not None and key in quotas:
            return Fallback(key, target, float(quotas[key]), varies_by)
        if in_scope is not None and not in_scope(target):
            return Fallback(key, target, None, varies_by)
    return Fallback(key, None, None, varies_by)
