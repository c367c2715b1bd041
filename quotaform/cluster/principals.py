"""The cluster's principals as far as the cluster tells them: its SCRAM users
(DescribeUserScramCredentials, KIP-554) and its super users (the brokers'
``super.users``, DescribeConfigs).

Both are advisory reads for ``plan``'s warnings: a refusal or a failure is
returned as a reason (for a ``Note:``), never raised.
"""

from __future__ import annotations

import logging

from quotaform.cluster.brokers import BrokerConfigs, read_broker_configs
from quotaform.cluster.wire.client import QuotaAdminClient
from quotaform.errors import BrokerError
from quotaform.plan.facts import SUPER_USERS, BrokerSuperUsers, ScramUsers

__all__ = [
    "SCRAM_TIMEOUT_S",
    "SUPER_USERS",
    "BrokerSuperUsers",
    "ScramUsers",
    "read_scram_users",
    "read_super_users",
]

log = logging.getLogger(__name__)

#: Seconds DescribeUserScramCredentials may take at most (the connection's
#: request timeout when shorter): the answer only adds warnings.
SCRAM_TIMEOUT_S = 5.0


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
    return BrokerSuperUsers.from_configs(configs.values, configs.hidden, configs.errors)
