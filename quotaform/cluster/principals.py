"""The cluster's principals as far as the cluster tells them: its SCRAM users
(DescribeUserScramCredentials, KIP-554) and its super users (the brokers'
``super.users``, DescribeConfigs).

Both are advisory reads for ``plan``'s warnings: a refusal or a failure is
returned as a reason (for a ``Note:``), never raised.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from quotaform.cluster.brokers import BrokerConfigs, read_broker_configs
from quotaform.cluster.wire.client import QuotaAdminClient
from quotaform.errors import BrokerError
from quotaform.kafka.names import parse_super_users

__all__ = [
    "SCRAM_TIMEOUT_S",
    "SUPER_USERS",
    "BrokerSuperUsers",
    "ScramUsers",
    "read_scram_users",
    "read_super_users",
]

log = logging.getLogger(__name__)

#: The broker setting naming the principals the authorizer allows everything
#: (``StandardAuthorizer``, ``AclAuthorizer``).
SUPER_USERS = "super.users"
#: Seconds DescribeUserScramCredentials may take at most (the connection's
#: request timeout when shorter): the answer only adds warnings.
SCRAM_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class ScramUsers:
    """The cluster's SCRAM users, or why they are not known.

    Attributes:
        names: every user with SCRAM credentials, sorted; ``None`` when not known.
        problem: why not (the refusal naming the ACL needed, or the failure).
    """

    names: tuple[str, ...] | None
    problem: str | None = None


def read_scram_users(client: QuotaAdminClient, *, timeout_s: float = SCRAM_TIMEOUT_S) -> ScramUsers:
    """The cluster's SCRAM users: one DescribeUserScramCredentials request for
    every user, waiting at most ``timeout_s`` seconds (or the client's request
    timeout when shorter). It needs DESCRIBE on the CLUSTER resource.

    Returns:
        :class:`ScramUsers`; a refusal (``AuthorizationError``), a broker too
        old for the API, or no answer in time is its ``problem``.
    """
    try:
        names = client.describe_scram_users(timeout_ms=max(1, int(timeout_s * 1000)))
    except BrokerError as exc:
        log.info("DescribeUserScramCredentials: %s", exc)
        return ScramUsers(None, str(exc))
    return ScramUsers(names)


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


def read_super_users(
    client: QuotaAdminClient, configs: BrokerConfigs | None = None
) -> BrokerSuperUsers:
    """``super.users`` of every live broker (DescribeConfigs, as
    :func:`~quotaform.cluster.brokers.read_broker_configs`; it needs
    DESCRIBE_CONFIGS on CLUSTER, as ``plan`` does). A broker that does not
    list the setting has none. ``configs``: an answer already read with
    ``super.users`` among its names; else it is read here.

    Raises:
        BrokerError: DescribeCluster failed (no broker list).
    """
    if configs is None:
        configs = read_broker_configs(client, [SUPER_USERS])
    listed: dict[str, list[str]] = {}
    errors = dict(configs.errors)
    for broker, values in configs.values.items():
        value = values.get(SUPER_USERS)
        if not value:
            continue
        try:
            principals = parse_super_users(value)
        except ValueError as exc:
            errors[broker] = f"{SUPER_USERS} does not parse: {exc}"
            continue
        for principal in principals:
            listed.setdefault(principal, []).append(broker)
    hidden = tuple(b for b, names in configs.hidden.items() if SUPER_USERS in names)
    return BrokerSuperUsers(
        principals={p: tuple(listed[p]) for p in sorted(listed)},
        hidden=hidden,
        errors=errors,
    )
