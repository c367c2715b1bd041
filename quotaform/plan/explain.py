"""What a client really gets, per quota key, and what a change does to it.

The answers of ``quotaform explain`` and of the probe view of plans and drift
reports, as plain data over :mod:`quotaform.kafka.resolution` (the broker's
two-step resolution, index-based: a few dictionary look-ups per key,
whatever the number of entries):

* :func:`explain`: per quota key the effective value, the entity and level it
  comes from, the quota group (metric tags), optionally the less specific
  entries it overrides, and, when a name of the principal is unknown, the
  entries that would apply instead for some names (:func:`~quotaform.kafka.resolution.variants`).
* :func:`explain_change`: the same before and after a change, with what moved
  (value, source, quota group).
* :func:`probe_impacts`: :func:`explain_change` for every declared probe.
* :func:`unnamed_names`: the names of a principal no entry names while
  entries name others (a typo answered from the defaults), with the closest
  names entries do give.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from quotaform.kafka.entity import CLIENT_ID, USER, Entity
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.resolution import (
    Match,
    Principal,
    QuotaIndex,
    Resolution,
    matches,
    resolve_all,
    variants,
)
from quotaform.plan.state import Probe

__all__ = [
    "ChangedKey",
    "Explanation",
    "KeyExplanation",
    "ProbeImpact",
    "Unnamed",
    "explain",
    "explain_change",
    "probe_impacts",
    "unnamed_names",
]

Entries = Mapping[Entity, Mapping[str, float]]


@dataclass(frozen=True, slots=True)
class KeyExplanation:
    """One quota key for one principal.

    Attributes:
        resolution: value (``None`` = unlimited), level, source entity and
            the quota group's metric tags.
        overridden: the less specific entries that also match and set the
            key (only when asked for): they would apply without the winner.
        variants: entries that would apply instead for some value of a name
            the principal leaves unknown.
    """

    resolution: Resolution
    overridden: tuple[Match, ...] = ()
    variants: tuple[Match, ...] = ()


@dataclass(frozen=True, slots=True)
class Unnamed:
    """A name of the principal that no entry names, while entries name others
    of its type: the answer comes from defaults alone, which for a typo
    (``svc-paymnts-api``) is a confident answer to the wrong question.

    Attributes:
        entity_type: ``user`` or ``client-id``.
        name: the name given.
        named: every name entries give for the type, sorted.
        closest: the named ones closest to ``name`` (difflib), best first.
    """

    entity_type: str
    name: str
    named: tuple[str, ...]
    closest: tuple[str, ...]


#: Close matches offered for a name no entry gives.
CLOSEST_SHOWN = 3


def unnamed_names(index: QuotaIndex, principal: Principal) -> tuple[Unnamed, ...]:
    """The user and client id of ``principal`` that no entry of ``index``
    names while entries name other users / client ids (one scan of the
    entries: for one explanation, not per principal of a benchmark)."""
    if principal.is_ip:
        return ()
    parts = {USER: principal.user, CLIENT_ID: principal.client_id}
    given = {t: n for t, n in parts.items() if n}  # unknown or no client id: nothing to check
    if not given:
        return ()
    named: dict[str, set[str]] = {t: set() for t in given}
    for key in QUOTA_KEYS:
        for entity in index.entities(key):
            for etype, name in entity.as_dict().items():
                if name is not None and etype in named:
                    named[etype].add(name)
    found = []
    for etype, name in given.items():
        names = named[etype]
        if names and name not in names:
            ordered = tuple(sorted(names))
            closest = difflib.get_close_matches(name, ordered, n=CLOSEST_SHOWN)
            found.append(Unnamed(etype, name, ordered, tuple(closest)))
    return tuple(found)


@dataclass(frozen=True, slots=True)
class Explanation:
    """Every quota key that can apply to ``principal``, in QUOTA_KEYS order;
    ``unnamed``: its names no entry gives (:func:`unnamed_names`, filled in
    by ``quotaform explain``)."""

    principal: Principal
    keys: Mapping[str, KeyExplanation]
    unnamed: tuple[Unnamed, ...] = ()

    @property
    def unlimited(self) -> bool:
        """No entry applies for any key (and none could, for unknown names)."""
        return all(k.resolution.unlimited and not k.variants for k in self.keys.values())


def explain(
    index: QuotaIndex, principal: Principal, *, include_overrides: bool = False
) -> Explanation:
    """What ``principal`` gets under the configuration ``index``.

    Raises:
        ValueError: an invalid principal (from :class:`Principal`).
    """
    keys = {}
    for key, resolution in resolve_all(index, principal).items():
        overridden: tuple[Match, ...] = ()
        if include_overrides:
            overridden = tuple(
                m for m in matches(index, principal, key) if m.entity != resolution.entity
            )
        keys[key] = KeyExplanation(resolution, overridden, variants(index, principal, key))
    return Explanation(principal, keys)


@dataclass(frozen=True, slots=True)
class ChangedKey:
    """One key before and after a change, and what moved."""

    key: str
    before: KeyExplanation
    after: KeyExplanation

    @property
    def value_changed(self) -> bool:
        """The effective value (or unlimited) differs."""
        return self.before.resolution.value != self.after.resolution.value

    @property
    def source_changed(self) -> bool:
        """Another entity (or none) gives the value."""
        return self.before.resolution.entity != self.after.resolution.entity

    @property
    def group_changed(self) -> bool:
        """The quota group moves (other metric tags: the bucket splits or
        merges), or the broker starts or stops recording the key at all."""
        was, now = self.before.resolution, self.after.resolution
        return (was.recorded, was.tags) != (now.recorded, now.tags)

    @property
    def changed(self) -> bool:
        """Anything the client or its metrics would notice."""
        return self.value_changed or self.source_changed or self.group_changed


def explain_change(
    before: QuotaIndex, after: QuotaIndex, principal: Principal, *, include_overrides: bool = False
) -> tuple[Explanation, Explanation, tuple[ChangedKey, ...]]:
    """``(before, after, every key)``: :func:`explain` under both configurations."""
    was = explain(before, principal, include_overrides=include_overrides)
    now = explain(after, principal, include_overrides=include_overrides)
    changed = tuple(ChangedKey(k, was.keys[k], now.keys[k]) for k in was.keys)
    return was, now, changed


@dataclass(frozen=True, slots=True)
class ProbeImpact:
    """What a change does to one probe: every key that moves (empty: unaffected)."""

    probe: Probe
    keys: tuple[ChangedKey, ...]

    @property
    def affected(self) -> bool:
        """Some key's value, source or quota group changes."""
        return bool(self.keys)


def probe_impacts(
    probes: Iterable[Probe], before: Entries, after: Entries
) -> tuple[ProbeImpact, ...]:
    """The effect of going from ``before`` to ``after`` (whole configurations:
    in-scope and outside) on each probe, in the probes' order."""
    probes = tuple(probes)
    if not probes:  # no index to build (a second of work at 100,000 entities)
        return ()
    was, now = QuotaIndex(before), QuotaIndex(after)
    impacts = []
    for probe in probes:
        _, _, keys = explain_change(was, now, probe.principal)
        impacts.append(ProbeImpact(probe, tuple(k for k in keys if k.changed)))
    return tuple(impacts)
