"""Declared quotas judged against the cluster's principals: user quotas that
name no SCRAM user, and default user quotas that would throttle a super user.

Pure functions over what the cluster layer read (SCRAM user names, super user
principals) and the plan's configuration; each finding is a warning in the
manifests' form (``path:line: field: message``), the one warning model of
:attr:`quotaform.plan.model.Plan.warnings`. Resolution is
:mod:`quotaform.kafka.resolution`'s, never a second copy.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from quotaform.errors import ManifestProblem
from quotaform.kafka.entity import CLIENT_ID, USER, Entity
from quotaform.kafka.keys import LONG_MAX, QUOTA_KEYS
from quotaform.kafka.names import USER_TYPE, parse_principal
from quotaform.kafka.resolution import Principal, QuotaIndex, level_of, resolve_all
from quotaform.kafka.units import render_raw
from quotaform.plan.facts import SUPER_USERS, PrincipalFacts
from quotaform.plan.source import SourceLocation
from quotaform.plan.state import DesiredEntity, DesiredState

__all__ = [
    "ANONYMOUS",
    "HINT_BUDGET",
    "SuperUser",
    "default_user_entities",
    "named_user_entities",
    "principal_findings",
    "super_user_warnings",
    "unknown_scram_users",
]

#: ``KafkaPrincipal.ANONYMOUS``'s name: unauthenticated clients, never a SCRAM user.
ANONYMOUS = "ANONYMOUS"
#: Name comparisons spent on "did you mean" hints (difflib: 30-200 us each):
#: hints stop once unknown names x SCRAM users would exceed it.
HINT_BUDGET = 2_000

Quotas = Mapping[str, float]


def unknown_scram_users(
    entities: Iterable[DesiredEntity], scram_users: Collection[str]
) -> tuple[str, ...]:
    """One warning per declared entity whose user name (not the default user)
    names no SCRAM user of ``scram_users``, at the entity's declaration
    (field ``entity.user``), with the closest SCRAM user name when one is
    close (while :data:`HINT_BUDGET` comparisons last: thousands of TLS
    principals against thousands of SCRAM users would take minutes).
    ``ANONYMOUS`` (unauthenticated clients) is never a SCRAM user and is left
    alone. Sorted by file and line.

    Args:
        entities: the declared entities.
        scram_users: every user with SCRAM credentials on the cluster
            (DescribeUserScramCredentials); the caller judges only when it
            lists at least one (a cluster without SCRAM authenticates its
            users otherwise).
    """
    known = set(scram_users)
    ordered = sorted(known)
    budget = HINT_BUDGET
    found = []
    for desired in sorted(entities, key=lambda d: (d.source.path, d.source.line)):
        if USER not in desired.entity.types:
            continue
        name = desired.entity.name(USER)
        if name is None or name in known or name == ANONYMOUS:
            continue
        budget -= len(ordered)
        close = difflib.get_close_matches(name, ordered, n=1) if budget >= 0 else []
        hint = f" (did you mean {render_raw(close[0])}?)" if close else ""
        where = desired.source
        found.append(
            ManifestProblem(
                where.path,
                where.line,
                "entity.user",
                f"no SCRAM user named {render_raw(name)} among the cluster's "
                f"{len(known)}{hint}; if {render_raw(name)} authenticates by TLS or OAuth, "
                "ignore this",
            )
        )
    return tuple(str(p) for p in sorted(found, key=ManifestProblem.sort_key))


@dataclass(frozen=True, slots=True)
class SuperUser:
    """A super user principal and where quotaform learned of it.

    Attributes:
        principal: ``Type:name`` as in ``super.users`` (``User:admin``).
        given_at: where it was given, for messages (``superUsers at
            quotaform.clusters.yaml:7``, ``--super-user``, ``super.users of
            broker 1``).
    """

    principal: str
    given_at: str

    @property
    def user_name(self) -> str | None:
        """The quota user name of a ``User`` principal (``admin``); ``None``
        for another principal type."""
        kind, name = parse_principal(self.principal)
        return name if kind == USER_TYPE else None


def default_user_entities(entries: Iterable[Entity]) -> tuple[Entity, ...]:
    """The entities among ``entries`` that apply to every user without a more
    specific entry: ``{user=<default>}`` and ``{user=<default>, client-id=...}``
    (levels 4, 5 and 6), sorted."""
    found = [e for e in entries if USER in e.types and e.name(USER) is None]
    return tuple(sorted(found, key=Entity.sort_key))


def _hits(index: QuotaIndex, user: str, client_ids: Sequence[str]) -> dict[Entity, set[str]]:
    """``{default user entity: quota keys}`` that resolve to a default user
    entity for ``user``: with a client id no entity names, with none, and
    with each client id a ``{user=<default>, client-id=c}`` entity names."""
    principals = [Principal(user=user), Principal(user=user, client_id="")]
    principals += [Principal(user=user, client_id=c) for c in client_ids]
    hits: dict[Entity, set[str]] = {}
    for principal in principals:
        for key, resolution in resolve_all(index, principal).items():
            entity = resolution.entity
            if entity is not None and USER in entity.types and entity.name(USER) is None:
                hits.setdefault(entity, set()).add(key)
    return hits


def _exempt_entry(user: str, keys: Iterable[str]) -> str:
    """The manifest entry (YAML flow) giving ``user`` its own quota of the
    unlimited bound for ``keys``: Long.MAX_VALUE, the bound of every
    user / client-id key without a quota (``ClientQuotaManager``)."""
    values = ", ".join(f"{k}: {LONG_MAX}" for k in keys)
    return f"- {{entity: {{user: {render_raw(user)}}}, values: {{{values}}}}}"


def super_user_warnings(
    entries: Mapping[Entity, Quotas],
    sources: Mapping[Entity, SourceLocation],
    super_users: Sequence[SuperUser],
    *,
    in_scope: Callable[[Entity], bool] | None = None,
) -> tuple[str, ...]:
    """One warning per (super user, default user entity) where that default
    would give a super user its quota: a default applies to every principal
    without a more specific entry, the operators' own super users included.
    Each names the default's declaration (``path:line: entity: ...``; a live
    entity no manifest declares is named as such, without a location) and
    the exempt entry to add: the super user's own ``{user: NAME}`` with the
    unlimited bound (Long.MAX_VALUE, what a client no entity sets a key for
    gets) for every key a default gives it.

    Resolution is :func:`~quotaform.kafka.resolution.resolve_all` for the
    super user's name with a client id no entity names, with none, and with
    each client id a ``{user=<default>, client-id=c}`` entity names; a super
    user with an entry of its own for a key is not warned for that key.

    Args:
        entries: the whole configuration once the plan is applied
            (:meth:`~quotaform.plan.model.Plan.after_entries`: declared and
            live outside the scope).
        sources: declarations by entity.
        super_users: the super users; only ``User`` principals are judged
            (the only type Kafka's default principal builder makes).
        in_scope: whether the manifests' scope owns an entity; the exempt
            entry it does not own is said to need a scope rule. ``None``:
            every entity is owned.

    Returns:
        The warnings, by super user then entity.
    """
    defaults = default_user_entities(entries)
    if not defaults:
        return ()
    index = QuotaIndex(entries)
    client_ids = sorted(
        name
        for e in defaults
        if level_of(e).number == 4 and (name := e.name(CLIENT_ID)) is not None
    )
    found: list[str] = []
    for superuser in sorted(super_users, key=lambda s: s.principal):
        user = superuser.user_name
        if user is None:
            continue
        hits = _hits(index, user, client_ids)
        if not hits:
            continue
        every_key = [k for k in QUOTA_KEYS if any(k in keys for keys in hits.values())]
        exempt = _exempt_entry(user, every_key)
        if in_scope is not None and not in_scope(Entity.of(user=user)):
            exempt += f" and a spec.scope rule that owns user {render_raw(user)}"
        for entity in sorted(hits, key=Entity.sort_key):
            keys = ", ".join(k for k in QUOTA_KEYS if k in hits[entity])
            source = sources.get(entity)
            subject = (
                entity.label()
                if source is not None
                else (f"the live {entity.label()} (no manifest declares it)")
            )
            message = (
                f"{subject} would throttle super user {superuser.principal} "
                f"({superuser.given_at}) for {keys}: a default applies to every principal "
                "without a more specific entry, the operators' own included; exempt it with "
                f"an entry of its own in spec.quotas: {exempt} (Long.MAX_VALUE, what a "
                "client without any quota gets)"
            )
            if source is None:
                found.append(message)
            else:
                found.append(str(ManifestProblem(source.path, source.line, "entity", message)))
    return tuple(found)


_GIVE_THEM = (
    "name them with superUsers in the cluster profile (quotaform.clusters.yaml) or "
    "--super-user User:NAME"
)


def named_user_entities(desired: DesiredState) -> list[DesiredEntity]:
    """The declared entities that name a user (not the default user): the
    ones checked against the cluster's SCRAM users."""
    return [
        d
        for d in desired.entities.values()
        if USER in d.entity.types and d.entity.name(USER) is not None
    ]


def _scram_findings(
    desired: DesiredState, facts: PrincipalFacts, notes: list[str]
) -> tuple[str, ...]:
    named = named_user_entities(desired)
    scram = facts.scram
    if not named or scram is None:
        return ()
    if scram.names is None:
        notes.append(f"user quotas not checked against the cluster's SCRAM users: {scram.problem}")
        return ()
    if not scram.names:
        return ()  # no SCRAM at all: the users authenticate otherwise
    return unknown_scram_users(named, scram.names)


def _super_users(
    facts: PrincipalFacts, given: Sequence[SuperUser], notes: list[str]
) -> list[SuperUser]:
    """``given``, then those the brokers reveal; notes for what stays unknown."""
    found = {s.principal: s for s in given}
    brokers = facts.super_users
    if brokers is None:
        if not given:
            problem = facts.super_users_problem or "the brokers were not asked"
            notes.append(
                f"default user quotas not checked against super users: {problem}; {_GIVE_THEM}"
            )
        return list(found.values())
    for principal, ids in brokers.principals.items():
        where = f"{SUPER_USERS} of broker{'s' if len(ids) > 1 else ''} {', '.join(ids)}"
        found.setdefault(principal, SuperUser(principal, where))
    if not found and brokers.hidden:
        which = ("brokers {} report" if len(brokers.hidden) > 1 else "broker {} reports").format(
            ", ".join(brokers.hidden)
        )
        notes.append(
            f"the brokers do not reveal {SUPER_USERS} ({which} it as sensitive, as brokers do "
            "for the authorizer's settings): default user quotas not checked against super "
            f"users; {_GIVE_THEM}"
        )
    elif not found and brokers.errors:
        reasons = "; ".join(f"broker {b}: {r}" for b, r in sorted(brokers.errors.items()))
        notes.append(
            f"default user quotas not checked against super users: {SUPER_USERS} could "
            f"not be read ({reasons}); {_GIVE_THEM}"
        )
    for superuser in found.values():
        if superuser.user_name is None:
            notes.append(
                f"super user {superuser.principal} ({superuser.given_at}) is not a User "
                "principal, the only type Kafka's default principal builder makes: not checked"
            )
    return list(found.values())


def principal_findings(
    desired: DesiredState,
    after: Mapping[Entity, Quotas],
    facts: PrincipalFacts,
    *,
    super_users: Sequence[SuperUser] = (),
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A plan's warnings about principals, and the notes on what could not
    be checked: a function of the manifests and the facts read.

    * Declared user quotas for named users against the cluster's SCRAM users
      (when it lists any): :func:`unknown_scram_users`.
    * When the configuration after the plan (``after``:
      :meth:`~quotaform.plan.model.Plan.after_entries`) has a default user
      quota: the super users (``super_users`` given by the profile and
      ``--super-user``, then those the brokers reveal), then
      :func:`super_user_warnings`.

    Returns:
        ``(warnings, notes)``: warnings (``path:line: field: message``), SCRAM
        ones first; notes for the SCRAM users not listed, the super users
        hidden by the brokers (none given), a super user that is not a
        ``User`` principal.
    """
    notes: list[str] = []
    warnings = _scram_findings(desired, facts, notes)
    if default_user_entities(after):
        found = _super_users(facts, super_users, notes)
        sources = {e: d.source for e, d in desired.entities.items()}
        warnings += super_user_warnings(after, sources, found, in_scope=desired.scope.contains)
    return warnings, tuple(notes)
