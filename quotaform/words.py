"""How verdicts read: the one place guard-rail violations, fallbacks,
blocked deletes and the drift summary become sentences, and where the
command-line flag that allows each kind of violation is spelled.

Below both the renderers (``quotaform.render``: text, markdown) and the
formats (``quotaform.formats``: JSON messages), which are siblings and never
import each other; every refusal error is worded here too, so the same
verdict always reads the same.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from quotaform.kafka.entity import CLIENT_ID, IP, USER, Entity, escape_unprintable
from quotaform.kafka.removals import Fallback
from quotaform.kafka.resolution import Level, MetricTags, Principal, Resolution
from quotaform.kafka.units import format_quota_value
from quotaform.plan.enforcement import QUOTA_CALLBACK_CONFIG, QuotaEnforcement
from quotaform.plan.guards import GuardKind, Violation
from quotaform.plan.storage_types import (
    StorageScaling,
    StorageState,
    applied_factor_text,
    volumes_factor_text,
)

if TYPE_CHECKING:  # drift's sentences only: a plan does not import drift
    from quotaform.plan.drift import DriftReport

__all__ = [
    "ALLOW_FLAGS",
    "NO_SENSOR",
    "allow_flag",
    "change_text",
    "drift_summary_line",
    "effective_text",
    "enforcement_mark",
    "enforcement_warning",
    "entities_text",
    "fallback_text",
    "group_text",
    "level_text",
    "missing_permissions",
    "monitor_enforcement_text",
    "offline_note",
    "per_broker_sentence",
    "per_broker_text",
    "principal_text",
    "probe_enforcement_line",
    "scaling_factor_text",
    "storage_factor_text",
    "tags_text",
    "unnamed_text",
    "value_text",
    "violation_line",
    "violation_message",
]

#: The command-line flag that allows each kind of violation (``None``: nothing does).
ALLOW_FLAGS: Mapping[GuardKind, str | None] = {
    GuardKind.DELETE: "--allow-deletes",
    GuardKind.PROTECTED: None,
    GuardKind.PREVENT_DESTROY: None,
    GuardKind.MASS_DELETE: "--allow-mass-delete",
    GuardKind.DEFAULT_REMOVAL: "--allow-default-removal",
    GuardKind.RELAX: "--allow-relax",
}
_PLURAL = {USER: "users", CLIENT_ID: "client ids", IP: "addresses"}


def allow_flag(kind: GuardKind) -> str | None:
    """The flag that allows ``kind`` (``--allow-relax``), ``None`` for protection."""
    return ALLOW_FLAGS[kind]


def fallback_text(fallback: Fallback) -> str:
    """``falls back to user=<default> (1MiB)``, ``unlimited``, ``falls back to
    ... if that sets it (outside the manifests' scope: not known here)``, with
    ``for client ids without their own quota`` when it depends on the client id."""
    if fallback.entity is None:
        text = "unlimited"
    elif fallback.value is None:
        text = (
            f"falls back to {fallback.entity.label()} if that sets it (outside the "
            "manifests' scope: not known here)"
        )
    else:
        value = format_quota_value(fallback.key, fallback.value)
        text = f"falls back to {fallback.entity.label()} ({value})"
    if fallback.varies_by is not None:
        text += f" for {_PLURAL[fallback.varies_by]} without their own quota"
    return text


def _factor(ratio: float) -> str:
    return f"{ratio:,.0f}x" if ratio >= 1000 else f"{ratio:.3g}x"


def _label(entity: Entity | None) -> str:
    return entity.label() if entity is not None else "(the plan)"


def _relax(v: Violation) -> str:
    assert v.key is not None and v.before is not None and v.limit is not None
    label = _label(v.entity)
    old = format_quota_value(v.key, v.before)
    budget = f"more than the budget's {_factor(v.limit)} (maxRelaxFactor)"
    if v.fallback is None:
        assert v.after is not None
        new = format_quota_value(v.key, v.after)
        return (
            f"{v.key} of {label} rises from {old} to {new}: {_factor(v.after / v.before)}, {budget}"
        )
    to = fallback_text(v.fallback)
    ratio = v.ratio
    if ratio is not None:
        what = f"{to}: {_factor(ratio)}, {budget}"
    elif v.fallback.unlimited:
        what = f"its clients become {to}"
    else:
        what = f"{to}, so the rise cannot be checked"
    return f"removing {v.key} ({old}) from {label}: {what}"


def violation_message(v: Violation) -> str:
    """One sentence naming the entity, key and numbers of a violation."""
    label = _label(v.entity)
    if v.kind is GuardKind.DELETE:
        return (
            f"{label} is not declared by any manifest and would be deleted, but deletes "
            "are not allowed (spec.allowDeletes)"
        )
    if v.kind is GuardKind.MASS_DELETE:
        if v.limit_name == "maxDeleteFraction":
            assert v.deletes is not None and v.live and v.limit is not None
            return (
                f"the plan deletes {v.deletes} of {v.live} live in-scope entities "
                f"({v.deletes / v.live:.0%}), more than the budget of {v.limit:.0%} "
                "(maxDeleteFraction)"
            )
        return (
            f"the plan deletes {v.deletes} entities, more than the budget of "
            f"{v.limit:g} (maxDeletes)"
        )
    if v.kind is GuardKind.PROTECTED:
        return (
            f"{label} is protected ({v.declared_at}) and would be deleted: declare its quotas "
            "again, or remove the protection in a reviewed change first"
        )
    if v.kind is GuardKind.PREVENT_DESTROY:
        return (
            f"{label} has preventDestroy ({v.declared_at}) and would lose {v.key}: "
            "keep the key in the manifest, or drop preventDestroy in a reviewed change first"
        )
    if v.kind is GuardKind.DEFAULT_REMOVAL:
        if v.key is None:
            return (
                f"deleting the default entity {label} ({', '.join(v.removed_keys)}): every "
                "client that relies on it falls back to a less specific level or is unlimited"
            )
        return f"removing {v.key} from the default entity {label}"
    return _relax(v)


def violation_line(v: Violation) -> str:
    """The message with what allows it: ``... (pass --allow-relax to allow)`` or
    ``... (no flag overrides this)``."""
    flag = allow_flag(v.kind)
    if flag is None:
        return f"{violation_message(v)} (no flag overrides this)"
    return f"{violation_message(v)} (pass {flag} to allow)"


def missing_permissions(violations: Sequence[Violation]) -> list[str]:
    """The flags that would allow every overridable violation, once each, in
    :data:`ALLOW_FLAGS` order (protection has none: it must be lifted in the
    manifests)."""
    kinds = {v.kind for v in violations}
    return [flag for kind, flag in ALLOW_FLAGS.items() if kind in kinds and flag is not None]


# ------------------------------------------------------------------ explain


def principal_text(principal: Principal) -> str:
    """``user="alice", client-id="app"``, ``user="alice", client-id unknown``,
    ``client-id=""`` (a client that sends none), ``ip="192.0.2.10"``."""
    if principal.is_ip:
        return f"ip={json.dumps(principal.ip)}"
    parts = []
    for etype, name in ((USER, principal.user), (CLIENT_ID, principal.client_id)):
        parts.append(f"{etype} unknown" if name is None else f"{etype}={json.dumps(name)}")
    return ", ".join(parts)


def level_text(level: Level) -> str:
    """``level 2 {user=U, client-id=<default>}``; ip: ``{ip=A}``."""
    if IP in level.types:
        return level.pattern()
    return f"level {level.number} {level.pattern()}"


def effective_text(resolution: Resolution) -> str:
    """``10MiB from user="alice" (level 3 {user=U})`` or ``unlimited``."""
    if resolution.value is None or resolution.entity is None or resolution.level is None:
        return "unlimited"
    value = format_quota_value(resolution.key, resolution.value)
    return f"{value} from {resolution.entity.label()} ({level_text(resolution.level)})"


def tags_text(tags: MetricTags) -> str:
    """The quota group's metric tags as the broker sets them: ``user=alice,
    client-id=app``; empty tags left out, unknown ones as ``?``."""
    if tags.ip:
        return f"ip={tags.ip}"
    shown = [
        f"{etype}={'?' if value is None else value}"
        for etype, value in ((USER, tags.user), (CLIENT_ID, tags.client_id))
        if value != ""
    ]
    return ", ".join(shown) or "(no tags)"


#: Why a key has no quota group.
NO_SENSOR = "no entity sets this key for anyone, so the broker keeps no sensor for it"


def value_text(resolution: Resolution) -> str:
    """The effective value alone: ``10MiB`` or ``unlimited``."""
    if resolution.value is None:
        return "unlimited"
    return format_quota_value(resolution.key, resolution.value)


def change_text(was: Resolution, now: Resolution) -> str:
    """One key before -> after: the source once when only the value moves
    (``1MiB -> 2MiB from user=<default> (level 6 {user=<default>}), source
    unchanged``), both sides in full otherwise."""
    if was.entity == now.entity and now.entity is not None:
        return f"{value_text(was)} -> {effective_text(now)}, source unchanged"
    return f"{effective_text(was)} -> {effective_text(now)}"


def group_text(resolution: Resolution) -> str:
    """Who shares the quota bucket of ``resolution`` on each broker (the
    quota group its metric tags name)."""
    if not resolution.recorded:
        return f"no quota group: {NO_SENSOR}"
    tags = resolution.tags
    if tags.ip:
        return f"one bucket for address {tags.ip} on each broker"
    user = "the user" if tags.user is None else f"user {json.dumps(tags.user)}"
    client = (
        "the client id" if tags.client_id is None else f"client-id {json.dumps(tags.client_id)}"
    )
    has_user, has_client = tags.user != "", tags.client_id != ""  # None: set, name unknown
    if has_user and has_client:
        where = f"one bucket for {user} with {client} on each broker"
    elif has_user:
        where = f"shared by every client id of {user} that resolves here, on each broker"
    elif has_client:
        where = f"shared by every user connecting with {client} that resolves here, on each broker"
    else:
        where = "shared by every connection without a client id that resolves here"
    if resolution.unlimited:
        where += " (unlimited, but recorded)"
    return where


#: Names listed in a hint before "and N more".
NAMES_SHOWN = 5


def unnamed_text(entity_type: str, name: str, named: Sequence[str], closest: Sequence[str]) -> str:
    """``no entry names user "svc-paymnts-api"; the answer comes from defaults
    (entries name users "svc-payments-api", ...; closest match "svc-payments-api")``."""
    shown = ", ".join(json.dumps(n) for n in named[:NAMES_SHOWN])
    more = len(named) - NAMES_SHOWN
    if more > 0:
        shown += f" and {more} more"
    text = (
        f"no entry names {entity_type} {json.dumps(name)}; the answer comes from defaults "
        f"(entries name {_PLURAL[entity_type]} {shown}"
    )
    if closest:
        text += f"; closest match {', '.join(json.dumps(c) for c in closest)}"
    return text + ")"


#: What an offline source is called, and what to drop to reach the live cluster.
_OFFLINE_SOURCES = {
    "manifests": ("the manifests", "the manifests"),
    "--plan": ("the saved plan", "--plan"),
    "--snapshot": ("the snapshot", "--snapshot"),
}


def offline_note(source: str, unused: Sequence[str], *, doing: str = "explaining") -> str:
    """The note that an offline run (explaining, building the rules) from
    ``source`` (``manifests``, ``--plan``, ``--snapshot``) leaves the
    connection options ``unused`` unused."""
    flags = ", ".join(unused)
    verb = "is" if len(unused) == 1 else "are"
    what, drop = _OFFLINE_SOURCES.get(source, _OFFLINE_SOURCES["--plan"])
    return f"{doing} {what} offline; {flags} {verb} not used (drop {drop} to ask the live cluster)"


def monitor_enforcement_text(
    enforcement: QuotaEnforcement, *, limit: str, alert: str
) -> str | None:
    """What the brokers' quota enforcement means for ``monitor rules``: a
    custom quota callback (KIP-257) decides the user and client-id quotas, so
    the rules record no ``limit`` for them and ``alert`` says why; brokers
    whose configuration could not be read leave it unknown. ``None``: every
    broker resolves quotas Kafka's default way."""
    enforced = enforcement.resolution_enforced
    if enforced is True:
        return None
    if enforced is None:
        return (
            f"{_unreadable_text(enforcement)}. The rules give Kafka's default resolution, which "
            f"{_brokers(tuple(enforcement.unreadable))} may not enforce."
        )
    classes = ", ".join(map(escape_unprintable, enforcement.classes))
    default = enforcement.brokers_using(None)
    also = (
        f" ({_use(default)} the default resolution, but the rules cannot tell the brokers' "
        "series apart)"
        if default
        else ""
    )
    return (
        f"The brokers use a custom quota callback, {QUOTA_CALLBACK_CONFIG}={classes} "
        f"(KIP-257){also}: it decides the limits and quota groups of user and client-id "
        f"quotas, so the rules record no {limit} for them (ip quotas only) and the alert "
        f"{alert} says why."
    )


def entities_text(n: int) -> str:
    """``1 entity``, ``3 entities``."""
    return f"{n} entit{'y' if n == 1 else 'ies'}"


def drift_summary_line(report: DriftReport) -> str:
    """``Drift: 1 changed, 2 missing, 0 unexpected (3 unmanaged entities outside
    the scope left alone).`` or ``No drift: the cluster matches the manifests
    (18 entities in scope).``"""
    if report.in_sync:
        in_scope = entities_text(report.in_scope)
        return f"No drift: the cluster matches the manifests ({in_scope} in scope)."
    unmanaged = report.unmanaged
    return (
        f"Drift: {len(report.changed)} changed, {len(report.missing)} missing, "
        f"{len(report.unexpected)} unexpected ({unmanaged} unmanaged "
        f"{'entity' if unmanaged == 1 else 'entities'} outside the scope left alone)."
    )


def storage_factor_text(
    state: StorageState, applied: float, computed: float, *, judged: bool = True
) -> str:
    """``THROTTLE, factor 0.50 (volumes give 0.505)``: the factor written into
    quotas first, the one the volumes give beside it (``no volume judged``
    when every broker was unknown)."""
    return (
        f"{state.value}, factor {applied_factor_text(applied)} "
        f"({volumes_factor_text(computed, judged=judged)})"
    )


def scaling_factor_text(scaling: StorageScaling) -> str:
    """:func:`storage_factor_text` of a plan's storage scaling."""
    return storage_factor_text(
        scaling.state, scaling.factor, scaling.computed, judged=scaling.judged
    )


# ------------------------------------------------------------------ enforcement


def per_broker_text(brokers: int) -> str:
    """Where a quota applies: ``on each of 3 brokers``, ``on the cluster's 1
    broker`` (``brokers``: the live brokers DescribeCluster lists)."""
    if brokers == 1:
        return "on the cluster's 1 broker"
    if brokers == 0:
        return "on each broker (DescribeCluster listed none)"
    return f"on each of {brokers} brokers"


def per_broker_sentence(brokers: int) -> str:
    """``Quotas are limits per broker, enforced on each of 3 brokers: a
    client that reaches all of them can use up to 3 times each value.``
    (each broker keeps its own sensor per quota group, ``ClientQuotaManager``)."""
    text = f"Quotas are limits per broker, enforced {per_broker_text(brokers)}"
    if brokers > 1:
        return (
            f"{text}: a client that reaches all of them can use up to {brokers} times each value."
        )
    return text + "."


def _brokers(ids: Sequence[str]) -> str:
    return f"broker{'s' if len(ids) != 1 else ''} {escape_unprintable(', '.join(ids))}"


def _use(ids: Sequence[str]) -> str:
    return f"{_brokers(ids)} use{'s' if len(ids) == 1 else ''}"


def _unreadable_text(enforcement: QuotaEnforcement) -> str:
    """``Could not read client.quota.callback.class of broker 2 (reason):
    whether it uses ... is unknown``."""
    unreadable = enforcement.unreadable
    ids = tuple(unreadable)
    reasons = set(unreadable.values())
    why = escape_unprintable(  # the broker's own words
        next(iter(reasons))
        if len(reasons) == 1
        else "; ".join(f"broker {b}: {reason}" for b, reason in unreadable.items())
    )
    return (
        f"Could not read {QUOTA_CALLBACK_CONFIG} of {_brokers(ids)} ({why}): whether "
        f"{'it uses' if len(ids) == 1 else 'they use'} Kafka's default resolution or a custom "
        "quota callback is unknown"
    )


def enforcement_warning(enforcement: QuotaEnforcement, keys: Iterable[str]) -> str | None:
    """Why an answer about ``keys`` resolved Kafka's default way may not be
    what the brokers enforce: a custom quota callback (named), brokers that
    disagree, brokers that could not be read; ``None`` when every broker
    enforces it (no callback, or only ip keys, which no callback decides)."""
    enforced = enforcement.enforced_for(keys)
    if enforced is True:
        return None
    shown = "The values shown are what Kafka's default resolution gives from the stored quotas"
    default = enforcement.brokers_using(None)
    if enforced is None:
        also = f"; {_use(default)} the default resolution" if default else ""
        return (
            f"{_unreadable_text(enforcement)}{also}. {shown}, which "
            f"{_brokers(tuple(enforcement.unreadable))} may not enforce."
        )
    if enforcement.agree:
        (name,) = map(escape_unprintable, enforcement.classes)
        text = (
            f"The brokers use a custom quota callback, {QUOTA_CALLBACK_CONFIG}={name} "
            "(KIP-257): it decides the limits and quota groups of user and client-id quotas, "
            f"not Kafka's default resolution. {shown}, NOT what the brokers enforce."
        )
    else:
        used = [
            f"{_use(enforcement.brokers_using(name))} {escape_unprintable(name)}"
            for name in enforcement.classes
        ]
        if default:
            used.append(f"{_use(default)} Kafka's default resolution")
            where = f"enforced on {_brokers(default)} only"
        else:
            where = "NOT what any broker enforces"
        text = (
            f"The brokers disagree on {QUOTA_CALLBACK_CONFIG} (custom quota callbacks, "
            f"KIP-257): {'; '.join(used)}. {shown}: {where}."
        )
    if enforcement.unreadable:
        text += f" {_unreadable_text(enforcement)}."
    return text


#: How a resolved value is marked when the brokers do not (or may not) enforce it.
_MARKS = {False: "[not enforced]", None: "[enforcement unknown]"}


def enforcement_mark(enforced: bool | None) -> str:
    """``[not enforced]``, ``[enforcement unknown]``, or ``""`` (enforced)."""
    return "" if enforced is True else _MARKS[enforced]


def probe_enforcement_line(enforcement: QuotaEnforcement) -> str:
    """The probe view's line on how the quotas it shows are enforced: per
    broker, and the callback that decides instead of the default resolution
    (``[not enforced]`` marks its probes)."""
    text = per_broker_sentence(enforcement.count)
    name = enforcement.quota_callback
    if name is not None:
        text += (
            f" {_MARKS[False]}: user and client-id quotas are decided by the brokers' quota "
            f"callback {escape_unprintable(name)} ({QUOTA_CALLBACK_CONFIG}), not by Kafka's "
            "default resolution shown here."
        )
    elif enforcement.unreadable:
        unknown = _unreadable_text(enforcement)
        text += f" {_MARKS[None]}: {unknown[0].lower()}{unknown[1:]}."
    return text
