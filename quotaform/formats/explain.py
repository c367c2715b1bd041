"""The JSON explanation (``explain -o json``); ``schemas/explain.schema.json``
is generated from :class:`ExplainDocument`.

The contract other tools read (fields are only ever added)::

    {"format_version": 1,
     "principal": {"user": U, "client-id": C} | {"ip": A},
     "quotas": {"<quota key>": {"value": number | null,      # null = unlimited
                                "level": 1-8 | 1-2 (ip) | null,
                                "entity": {type: name | null} | null,
                                "metric_tags": {"user": ..., "client-id": ...} | {"ip": ...}}},
     "unnamed": [{"entity_type", "name", "named_count", "closest", "hint"}],
     "brokers": N | null,                     # live brokers; null offline
     "quota_callback": "<class>" | null,      # client.quota.callback.class
     "resolution_enforced": true | false | null,
     "enforcement": {...} | null}             # EnforcementDoc

with every quota key that can apply to the principal present. Values are in
the key's unit (bytes/s, %, mutations/s, connections/s). For ``explain
--plan`` ``quotas`` is the state after the plan, ``before`` the state before
it and ``changes`` what moved per key. The same per-key model describes the
probes of a plan (:mod:`quotaform.formats.plan`).

Against the live cluster (and a saved plan that recorded it) the document
also says how the quotas are enforced (:class:`EnforcementDoc`): per broker,
on ``brokers`` brokers, and whether the brokers resolve them Kafka's default
way; with a custom quota callback (``quota_callback``) ``resolution_enforced``
is false and every key's ``enforced`` too: the values are what the default
resolution would give, not what the brokers enforce.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, Field

from quotaform.formats.base import FROZEN
from quotaform.kafka.entity import IP, Entity
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.metrics import mbean_name
from quotaform.kafka.resolution import (
    CLIENT_LEVELS,
    IP_LEVELS,
    Level,
    Match,
    MetricTags,
    Principal,
    Resolution,
)
from quotaform.kafka.units import format_quota_value
from quotaform.plan.enforcement import QuotaEnforcement
from quotaform.plan.explain import ChangedKey, Explanation, KeyExplanation
from quotaform.words import enforcement_warning, group_text, per_broker_sentence, unnamed_text

__all__ = [
    "EnforcementDoc",
    "ExplainDocument",
    "KeyDoc",
    "KeyMovesDoc",
    "UnnamedDoc",
    "enforcement_doc",
    "enforcement_from_doc",
    "explain_document",
    "key_doc",
    "key_explanation_from_doc",
    "moves_doc",
    "principal_doc",
    "principal_from_doc",
    "render_explain_json",
]


class MatchDoc(BaseModel):
    """An entry that matches (or would match) the principal and sets the key."""

    model_config = FROZEN
    entity: dict[str, str | None] = Field(description="Entity type -> name; null = default.")
    level: int
    level_pattern: str = Field(description="The level, e.g. {user=U, client-id=<default>}.")
    value: float
    display: str = Field(description="The value in readable units.")


class KeyDoc(BaseModel):
    """What the principal gets for one quota key."""

    model_config = FROZEN
    value: float | None = Field(description="The effective quota value; null = unlimited.")
    display: str = Field(description='The value in the manifest\'s units, or "unlimited".')
    unit: str = Field(description="bytes/s, %, mutations/s or connections/s.")
    level: int | None = Field(
        description="1-8 (user/client-id) or 1-2 (ip: {ip=A}, {ip=<default>}); null when unlimited."
    )
    level_pattern: str | None = Field(description="The level, e.g. {user=U}; null when unlimited.")
    entity: dict[str, str | None] | None = Field(
        description="The entry the value comes from (entity type -> name, null = default); "
        "null when unlimited."
    )
    metric_tags: dict[str, str | None] = Field(
        description='The quota group\'s metric tags: real names, never <default>; "" is an '
        "empty tag (left out of the metric), null a tag whose name was not given."
    )
    mbean: str | None = Field(
        description="The broker's JMX ObjectName of the quota group; null when a tag is "
        "unknown or nothing is recorded."
    )
    quota_group: str = Field(description="Who shares this quota bucket, in words.")
    recorded: bool = Field(description="Whether the broker keeps a sensor for it at all.")
    overridden: list[MatchDoc] = Field(
        default_factory=list,
        description="Less specific entries that also match and set the key (--include-overrides).",
    )
    variants: list[MatchDoc] = Field(
        default_factory=list,
        description="Entries that would apply instead for some value of a name the principal "
        "leaves unknown.",
    )
    enforced: bool | None = Field(
        default=None,
        description="Whether the brokers enforce this answer: false when a custom quota "
        "callback decides the key instead of Kafka's default resolution (the value is what "
        "the default resolution would give); null when not known (offline, or a broker "
        "whose configuration could not be read).",
    )


class KeyMovesDoc(BaseModel):
    """What moved for one key between two states."""

    model_config = FROZEN
    value_changed: bool
    source_changed: bool
    group_changed: bool = Field(description="The quota group (metric tags) changes.")


class UnnamedDoc(BaseModel):
    """A name of the principal no entry gives while entries give others of
    its type: the answer comes from defaults (a typo?)."""

    model_config = FROZEN
    entity_type: str = Field(description="user or client-id.")
    name: str = Field(description="The name given.")
    named_count: int = Field(description="How many names of the type entries give.")
    closest: list[str] = Field(description="The named ones closest to the name, best first.")
    hint: str = Field(description="The hint in words, as the text view prints it.")


class EnforcementDoc(BaseModel):
    """How the brokers enforce client quotas: per broker (DescribeCluster),
    and by Kafka's default resolution or a custom quota callback
    (``client.quota.callback.class``, KIP-257; DescribeConfigs of every
    live broker)."""

    model_config = FROZEN
    brokers: int = Field(
        description="Live (unfenced) brokers: every quota is a limit on each of them."
    )
    broker_ids: list[str] = Field(description="Their ids, sorted as numbers.")
    quota_callback: str | None = Field(
        description="The client.quota.callback.class the brokers set (several, "
        "comma-separated, when they set different ones); null when no broker read sets one."
    )
    quota_callbacks: dict[str, str | None] = Field(
        description="Broker id -> its client.quota.callback.class (null: not set, Kafka's "
        "default resolution), for every broker whose configuration was read."
    )
    unreadable: dict[str, str] = Field(
        description="Broker id -> why its configuration could not be read (e.g. no "
        "DESCRIBE_CONFIGS): unknown, never taken for 'no callback'."
    )
    brokers_agree: bool = Field(description="Every broker read sets the same callback (or none).")
    resolution_enforced: bool | None = Field(
        description="true: every broker uses Kafka's default resolution; false: some broker "
        "uses a custom quota callback, so resolved user/client-id quotas are what the default "
        "resolution would give, not what it enforces; null: unknown (a broker unreadable)."
    )
    statement: str = Field(description="The same in words, as the text views print it.")


def enforcement_doc(enforcement: QuotaEnforcement) -> EnforcementDoc:
    """The JSON model of how the brokers enforce quotas."""
    warning = enforcement_warning(enforcement, QUOTA_KEYS)
    statement = per_broker_sentence(enforcement.count)
    return EnforcementDoc(
        brokers=enforcement.count,
        broker_ids=list(enforcement.brokers),
        quota_callback=enforcement.quota_callback,
        quota_callbacks=dict(enforcement.callbacks),
        unreadable=dict(enforcement.unreadable),
        brokers_agree=enforcement.agree,
        resolution_enforced=enforcement.resolution_enforced,
        statement=statement if warning is None else f"{statement} {warning}",
    )


def enforcement_from_doc(doc: EnforcementDoc) -> QuotaEnforcement:
    """The inverse of :func:`enforcement_doc` (saved plans decode it)."""
    return QuotaEnforcement(tuple(doc.broker_ids), dict(doc.quota_callbacks), dict(doc.unreadable))


class ExplainDocument(BaseModel):
    """A quotaform explanation (JSON)."""

    model_config = FROZEN
    format_version: Literal[1] = Field(description="Version of this format.")
    principal: dict[str, str | None] = Field(
        description='{"user": U, "client-id": C} (null: unknown; "" client-id: none sent) '
        'or {"ip": A}.'
    )
    source: str = Field(description="manifests, cluster or plan: what was explained.")
    cluster: str | None = Field(default=None, description="The cluster's name, when known.")
    unlimited: bool = Field(description="No entry applies for any key.")
    quotas: dict[str, KeyDoc] = Field(
        description="Every quota key that can apply to the principal (after the plan with --plan)."
    )
    before: dict[str, KeyDoc] | None = Field(
        default=None, description="--plan: every key before the plan."
    )
    changes: dict[str, KeyMovesDoc] | None = Field(
        default=None, description="--plan: what moved per key."
    )
    unnamed: list[UnnamedDoc] = Field(
        default_factory=list,
        description="The principal's names no entry gives while entries give others "
        "(the answer comes from defaults: a typo?), with the closest names given.",
    )
    brokers: int | None = Field(
        default=None,
        description="Live brokers: every value is a limit on each of them (a client that "
        "reaches all can use that many times it); null when not known (offline).",
    )
    quota_callback: str | None = Field(
        default=None,
        description="The brokers' custom quota callback class (client.quota.callback.class, "
        "KIP-257); null when none is set or not known (see enforcement).",
    )
    resolution_enforced: bool | None = Field(
        default=None,
        description="Whether the brokers enforce the answer shown: false when a custom quota "
        "callback decides the principal's keys (the values are what Kafka's default "
        "resolution would give); null when not known (offline, or a broker unreadable).",
    )
    enforcement: EnforcementDoc | None = Field(
        default=None,
        description="How the brokers enforce quotas, per broker; null when not known (offline).",
    )


def principal_doc(principal: Principal) -> dict[str, str | None]:
    """The JSON form of a principal (:meth:`Principal.as_dict`)."""
    return principal.as_dict()


def principal_from_doc(doc: Mapping[str, str | None]) -> Principal:
    """The inverse of :func:`principal_doc`."""
    if IP in doc:
        return Principal(ip=doc[IP])
    return Principal(user=doc.get("user"), client_id=doc.get("client-id"))


def key_doc(explained: KeyExplanation, enforcement: QuotaEnforcement | None = None) -> KeyDoc:
    """The JSON model of one key's explanation (``enforced`` from
    ``enforcement``: ``None`` when not known)."""
    res = explained.resolution
    key = res.key

    def match_doc(match: Match) -> MatchDoc:
        return MatchDoc(
            entity=match.entity.as_dict(),
            level=match.level.number,
            level_pattern=match.level.pattern(),
            value=match.value,
            display=format_quota_value(key, match.value),
        )

    return KeyDoc(
        value=res.value,
        display="unlimited" if res.value is None else format_quota_value(key, res.value),
        unit=QUOTA_KEYS[key].unit,
        level=res.level.number if res.level is not None else None,
        level_pattern=res.level.pattern() if res.level is not None else None,
        entity=res.entity.as_dict() if res.entity is not None else None,
        metric_tags=res.tags.as_dict(),
        mbean=mbean_name(key, res.tags) if res.recorded else None,
        quota_group=group_text(res),
        recorded=res.recorded,
        overridden=[match_doc(m) for m in explained.overridden],
        variants=[match_doc(m) for m in explained.variants],
        enforced=None if enforcement is None else enforcement.enforced_for([key]),
    )


def _level(number: int, ip: bool) -> Level:
    return (IP_LEVELS if ip else CLIENT_LEVELS)[number - 1]


def key_explanation_from_doc(key: str, doc: KeyDoc) -> KeyExplanation:
    """The inverse of :func:`key_doc` (saved plans decode their probes with it)."""
    ip = IP in QUOTA_KEYS[key].entity_types
    tags = doc.metric_tags
    metric_tags = (
        MetricTags(user="", client_id="", ip=tags.get(IP))
        if ip
        else MetricTags(user=tags.get("user"), client_id=tags.get("client-id"))
    )

    def match(m: MatchDoc) -> Match:
        return Match(_level(m.level, ip), Entity.from_mapping(m.entity), m.value)

    resolution = Resolution(
        key,
        doc.value,
        _level(doc.level, ip) if doc.level is not None else None,
        Entity.from_mapping(doc.entity) if doc.entity is not None else None,
        metric_tags,
        recorded=doc.recorded,
    )
    return KeyExplanation(
        resolution,
        tuple(match(m) for m in doc.overridden),
        tuple(match(m) for m in doc.variants),
    )


def moves_doc(changed: ChangedKey) -> KeyMovesDoc:
    """What moved for one key."""
    return KeyMovesDoc(
        value_changed=changed.value_changed,
        source_changed=changed.source_changed,
        group_changed=changed.group_changed,
    )


def explain_document(
    explanation: Explanation,
    *,
    source: str,
    cluster: str | None = None,
    before: Explanation | None = None,
    changed: tuple[ChangedKey, ...] = (),
    enforcement: QuotaEnforcement | None = None,
) -> ExplainDocument:
    """The JSON model of an explanation (with ``before`` and ``changed`` for
    ``--plan``; ``enforcement``: how the brokers enforce it, when known)."""

    def docs(explained: Explanation) -> dict[str, KeyDoc]:
        return {k: key_doc(v, enforcement) for k, v in explained.keys.items()}

    return ExplainDocument(
        format_version=1,
        principal=principal_doc(explanation.principal),
        source=source,
        cluster=cluster,
        unlimited=explanation.unlimited,
        quotas=docs(explanation),
        before=None if before is None else docs(before),
        changes=None if before is None else {c.key: moves_doc(c) for c in changed},
        unnamed=[
            UnnamedDoc(
                entity_type=u.entity_type,
                name=u.name,
                named_count=len(u.named),
                closest=list(u.closest),
                hint=unnamed_text(u.entity_type, u.name, u.named, u.closest),
            )
            for u in explanation.unnamed
        ],
        brokers=None if enforcement is None else enforcement.count,
        quota_callback=None if enforcement is None else enforcement.quota_callback,
        resolution_enforced=(
            None if enforcement is None else enforcement.enforced_for(explanation.keys)
        ),
        enforcement=None if enforcement is None else enforcement_doc(enforcement),
    )


def render_explain_json(document: ExplainDocument) -> str:
    """``document`` as deterministic JSON (2-space indent, trailing newline)."""
    return json.dumps(document.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
