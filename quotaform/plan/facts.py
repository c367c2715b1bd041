"""What a command knows of one cluster, read in one step: the facts.

``plan``, ``drift``, ``apply``'s plan, ``storage watch``, ``explain`` and
``analyze`` first read every fact of the cluster they need into one
:class:`ClusterFacts` (:func:`quotaform.app.facts.gather_facts`, the only
step that talks to the cluster), then think: the diff, the guard rails, the
principal warnings and the storage scaling are functions of the manifests
and these facts (:mod:`quotaform.plan.decide`), tested without a broker, as
Terraform plans from one refreshed state.

Plain data: nothing here reads or writes anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from quotaform.kafka.names import parse_super_users
from quotaform.plan.enforcement import QuotaEnforcement
from quotaform.plan.state import LiveState
from quotaform.plan.storage_types import BrokerSnapshot

__all__ = [
    "SUPER_USERS",
    "BrokerSuperUsers",
    "ClusterFacts",
    "PrincipalFacts",
    "ScramUsers",
    "VolumeReading",
    "VolumeSource",
]

#: The broker setting naming the principals the authorizer allows everything
#: (``StandardAuthorizer``, ``AclAuthorizer``).
SUPER_USERS = "super.users"


@dataclass(frozen=True, slots=True)
class ScramUsers:
    """The cluster's SCRAM users, or why they are not known.

    Attributes:
        names: every user with SCRAM credentials, sorted; ``None`` when not known.
        problem: why not (the refusal naming the ACL needed, or the failure).
    """

    names: tuple[str, ...] | None
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class BrokerSuperUsers:
    """The brokers' ``super.users``, as far as DescribeConfigs tells it.

    Attributes:
        principals: ``{principal: broker ids that list it}``, principals as
            written (``User:admin``), sorted by principal.
        hidden: the brokers that withheld the value: brokers report a config
            their ``KafkaConfig`` does not define (the authorizer's
            ``super.users``) as sensitive, with no value (Kafka 4.3.1 does).
        errors: ``{broker id: reason}`` for brokers that could not be asked,
            refused, or gave a value that does not parse.
    """

    principals: dict[str, tuple[str, ...]] = field(default_factory=dict)
    hidden: tuple[str, ...] = ()
    errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_configs(
        cls,
        values: Mapping[str, Mapping[str, str | None]],
        hidden: Mapping[str, Sequence[str]],
        errors: Mapping[str, str],
    ) -> BrokerSuperUsers:
        """From the brokers' DescribeConfigs answer (``{broker id: {config
        name: value}}``, the names each broker withheld, the brokers that
        failed): a broker that does not list the setting has none."""
        listed: dict[str, list[str]] = {}
        failed = dict(errors)
        for broker, configs in values.items():
            value = configs.get(SUPER_USERS)
            if not value:
                continue
            try:
                principals = parse_super_users(value)
            except ValueError as exc:
                failed[broker] = f"{SUPER_USERS} does not parse: {exc}"
                continue
            for principal in principals:
                listed.setdefault(principal, []).append(broker)
        return cls(
            principals={p: tuple(listed[p]) for p in sorted(listed)},
            hidden=tuple(b for b, names in hidden.items() if SUPER_USERS in names),
            errors=failed,
        )


@dataclass(frozen=True, slots=True)
class PrincipalFacts:
    """The cluster's principals, as far as it tells them (advisory: what
    could not be read is a reason, for a ``Note:``, never an error).

    Attributes:
        scram: the SCRAM users; ``None`` when not asked (no declared quota
            names a user).
        super_users: the brokers' ``super.users``; ``None`` when not read.
        super_users_problem: why the brokers could not be asked at all
            (DescribeCluster failed), when so.
    """

    scram: ScramUsers | None = None
    super_users: BrokerSuperUsers | None = None
    super_users_problem: str | None = None


@dataclass(frozen=True, slots=True)
class VolumeSource:
    """Where volume usage comes from: snapshot files (JSON / JSON Lines),
    the compacted ``topic``, or (neither) the live cluster (DescribeLogDirs).

    The brokers that should report come from the cluster (DescribeCluster)
    whenever a client is connected."""

    snapshots: tuple[Path, ...] = ()
    topic: str | None = None
    read: tuple[BrokerSnapshot, ...] = ()
    """Live usage this run has already read (``storage watch --publish``):
    used instead of asking DescribeLogDirs again."""

    @property
    def live(self) -> bool:
        """True when usage is read from the cluster itself."""
        return not self.snapshots and self.topic is None and not self.read

    def describe(self) -> str:
        """How the source reads in messages."""
        if self.snapshots:
            return "snapshots " + ", ".join(str(p) for p in self.snapshots)
        if self.topic:
            return f"topic {self.topic}"
        return "DescribeLogDirs"


@dataclass(frozen=True, slots=True)
class VolumeReading:
    """Volume usage as read for a storage policy.

    Attributes:
        snapshots: one snapshot per broker (live, from files or the topic).
        expected: the brokers that should report (DescribeCluster); ``None``
            without a connection (only the brokers in the snapshots are judged).
        read_at: when it was read (the snapshots' ages are counted from it).
        source: where the usage came from, for messages (``DescribeLogDirs``).
    """

    snapshots: tuple[BrokerSnapshot, ...]
    expected: tuple[str, ...] | None
    read_at: datetime
    source: str


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """Every fact of one cluster a command thinks with, read in one step.

    Attributes:
        live: the live quotas (per shape, split by the manifests' scope).
        enforcement: the live brokers and their quota callback; ``None`` when
            not read.
        principals: SCRAM users and super users; ``None`` when not read.
        volumes: volume usage; ``None`` when no storage policy is declared.
    """

    live: LiveState
    enforcement: QuotaEnforcement | None = None
    principals: PrincipalFacts | None = None
    volumes: VolumeReading | None = None

    @property
    def cluster_id(self) -> str:
        """The id of the cluster read (every gathering reads it first)."""
        return self.live.cluster_id or ""
