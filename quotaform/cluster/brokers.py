"""The brokers' own configuration, read with DescribeConfigs (BROKER resources).

Quota enforcement depends on settings that live in each broker's
``server.properties`` and never in the quota store: a custom quota callback
(``client.quota.callback.class``, KIP-257) replaces the default resolution, and
``super.users`` names principals an operator does not want throttled by a
default. DescribeConfigs needs DESCRIBE_CONFIGS on the CLUSTER resource, the
permission ``plan`` already needs for DescribeClientQuotas.

kafka-python's ``describe_configs`` drops each resource's error code (an
unauthorized broker answers with empty configs), so the request is sent here
and every error is kept.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import kafka.errors as kerrors

from quotaform.cluster.storage import live_brokers
from quotaform.cluster.wire.client import QuotaAdminClient
from quotaform.plan.enforcement import QUOTA_CALLBACK_CONFIG, QuotaEnforcement

__all__ = ["BrokerConfigs", "read_broker_configs", "read_quota_enforcement"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BrokerConfigs:
    """Some of each live broker's configuration, as DescribeConfigs gave it.

    Attributes:
        values: ``{broker id: {config name: value}}`` for every broker that
            answered, e.g. ``{"1": {"client.quota.callback.class": None}}``;
            ``None`` is a config that is not set (Kafka's default, or a
            sensitive value the broker does not reveal). A name the broker
            does not know as a config at all is absent from its dict.
        errors: ``{broker id: reason}`` for brokers that could not be asked
            or refused (``"ClusterAuthorizationFailedError: ..."``).
        brokers: the ids DescribeCluster listed (unfenced), sorted as numbers.
        hidden: ``{broker id: config names}`` the broker reported as sensitive,
            its value withheld (``None`` in ``values``), e.g.
            ``{"1": ("super.users",)}``: brokers report every config their
            ``KafkaConfig`` does not define (the authorizer's ``super.users``)
            as sensitive (``ConfigHelper``), so its value cannot be read.
    """

    values: dict[str, dict[str, str | None]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    brokers: tuple[str, ...] = ()
    hidden: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def distinct(self, name: str) -> dict[str | None, tuple[str, ...]]:
        """``{value: broker ids}`` of config ``name`` across the brokers that
        answered and know it (several keys: the brokers disagree)."""
        seen: dict[str | None, list[str]] = {}
        for broker, configs in self.values.items():
            if name in configs:
                seen.setdefault(configs[name], []).append(broker)
        return {value: tuple(ids) for value, ids in seen.items()}


async def _describe(client: QuotaAdminClient, node_id: int, names: Sequence[str]) -> Any:
    from kafka.admin import ConfigResource, ConfigResourceType

    resource = ConfigResource(ConfigResourceType.BROKER, str(node_id), configs=dict.fromkeys(names))
    request = client._describe_configs_request([resource], False)
    return await client._manager.send(request, node_id=node_id)


def read_broker_configs(client: QuotaAdminClient, names: Sequence[str]) -> BrokerConfigs:
    """Configs ``names`` of every live broker (DescribeConfigs, one request to
    each broker for its own BROKER resource).

    Args:
        client: an open admin client (read-only is fine).
        names: broker config names, e.g. ``("client.quota.callback.class",)``.

    Returns:
        :class:`BrokerConfigs`; a broker that fails or refuses is in
        ``errors`` (never silently taken for "not set").

    Raises:
        BrokerError: DescribeCluster failed (no broker list).
    """
    brokers = live_brokers(client)
    values: dict[str, dict[str, str | None]] = {}
    errors: dict[str, str] = {}
    hidden: dict[str, tuple[str, ...]] = {}
    for broker in brokers:
        try:
            response = client._manager.run(_describe, client, int(broker), list(names))
        except (kerrors.KafkaError, OSError) as exc:
            errors[broker] = f"{type(exc).__name__}: {exc}"
            continue
        for result in response.results:
            if result.error_code:
                error = kerrors.for_code(result.error_code).__name__
                errors[broker] = f"{error}: {result.error_message or 'no message'}"
                continue
            values[broker] = {entry.name: entry.value for entry in result.configs}
            withheld = tuple(e.name for e in result.configs if e.is_sensitive and e.value is None)
            if withheld:
                hidden[broker] = withheld
    log.info("DescribeConfigs: %d broker(s) answered, %d not", len(values), len(errors))
    return BrokerConfigs(values=values, errors=errors, brokers=tuple(brokers), hidden=hidden)


def read_quota_enforcement(
    client: QuotaAdminClient, configs: BrokerConfigs | None = None
) -> QuotaEnforcement:
    """The live brokers and each one's ``client.quota.callback.class``
    (:func:`read_broker_configs`): what ``explain``, the probe view and
    ``analyze`` say about how the quotas they resolve are enforced.
    ``configs``: an answer already read with that name among others (``plan``
    reads it and ``super.users`` in one round); else it is read here.

    Raises:
        BrokerError: DescribeCluster failed (no broker list).
    """
    if configs is None:
        configs = read_broker_configs(client, [QUOTA_CALLBACK_CONFIG])
    return QuotaEnforcement.from_configs(configs.brokers, configs.values, configs.errors)
