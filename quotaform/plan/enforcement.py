"""How the brokers enforce client quotas: per broker, and by Kafka's default
resolution or by a custom quota callback.

Every client quota is a limit per broker: each broker keeps its own sensor
per quota group (``ClientQuotaManager``'s ``ClientSensors``), so a client
that reaches N brokers can use N times its quota. And a broker configured
with ``client.quota.callback.class`` (KIP-257's ``ClientQuotaCallback``,
e.g. Strimzi's kafka-quotas-plugin) asks that class for the metric tags and
the limit of every user / client-id quota instead of resolving the stored
entities itself: ``QuotaFactory`` hands it to the produce, fetch, request
and controller-mutation quota managers; ip quotas stay with
``ConnectionQuotas``, which never asks it. quotaform resolves quotas the
default way (:mod:`quotaform.kafka.resolution`), so where a callback is set
its answer is what the default resolution *would* give, not what the
broker enforces.

:class:`QuotaEnforcement` is the one value ``explain``, the probe view of
plans and drift reports, and ``analyze`` read for both facts: the brokers
(DescribeCluster) and each one's callback (DescribeConfigs), a broker that
could not be read kept as unknown, never taken for "no callback".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from quotaform.kafka.entity import CLIENT_ID, IP, USER
from quotaform.kafka.keys import QUOTA_KEYS, keys_for
from quotaform.kafka.resolution import Principal

__all__ = ["QUOTA_CALLBACK_CONFIG", "QuotaEnforcement"]

#: The broker config naming a custom quota callback class (KIP-257).
QUOTA_CALLBACK_CONFIG = "client.quota.callback.class"


@dataclass(frozen=True, slots=True)
class QuotaEnforcement:
    """The live brokers and the quota callback each one uses.

    Attributes:
        brokers: the live (unfenced) broker ids DescribeCluster listed,
            sorted as numbers.
        callbacks: ``{broker id: class}`` for every broker whose
            configuration was read; ``None`` is "not set" (Kafka's default
            resolution).
        unreadable: ``{broker id: reason}`` for the brokers whose
            configuration could not be read (e.g. no DESCRIBE_CONFIGS:
            ``"ClusterAuthorizationFailedError: ..."``).
    """

    brokers: tuple[str, ...]
    callbacks: Mapping[str, str | None] = field(default_factory=dict)
    unreadable: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_configs(
        cls,
        brokers: Sequence[str],
        values: Mapping[str, Mapping[str, str | None]],
        errors: Mapping[str, str],
    ) -> QuotaEnforcement:
        """From DescribeConfigs of the brokers' ``client.quota.callback.class``.

        Args:
            brokers: the live broker ids (DescribeCluster).
            values: ``{broker id: {config name: value}}`` of the brokers that
                answered (an empty or absent value: not set).
            errors: ``{broker id: reason}`` of those that did not; a listed
                broker in neither is unreadable too ("no answer").
        """
        callbacks = {
            b: values[b].get(QUOTA_CALLBACK_CONFIG) or None for b in brokers if b in values
        }
        unreadable = {b: errors.get(b, "no answer") for b in brokers if b not in values}
        return cls(tuple(brokers), callbacks, unreadable)

    @property
    def count(self) -> int:
        """How many live brokers each quota applies on."""
        return len(self.brokers)

    @property
    def classes(self) -> tuple[str, ...]:
        """The distinct callback classes the brokers set, sorted (empty: none)."""
        return tuple(sorted({c for c in self.callbacks.values() if c is not None}))

    @property
    def quota_callback(self) -> str | None:
        """The callback class (several comma-separated when the brokers set
        different ones); ``None`` when no broker that answered sets one."""
        return ", ".join(self.classes) or None

    def brokers_using(self, callback: str | None) -> tuple[str, ...]:
        """The brokers read that use ``callback`` (``None``: the default
        resolution), in :attr:`brokers` order."""
        return tuple(
            b for b in self.brokers if b in self.callbacks and self.callbacks[b] == callback
        )

    @property
    def agree(self) -> bool:
        """Every broker read uses the same callback (or none)."""
        return len(set(self.callbacks.values())) <= 1

    @property
    def resolution_enforced(self) -> bool | None:
        """Whether the brokers enforce Kafka's default resolution of user and
        client-id quotas: ``True`` when every live broker was read and none
        sets a callback, ``False`` when some broker sets one, ``None``
        (unknown) when some broker could not be read (or none is listed)."""
        if self.classes:
            return False
        if self.unreadable or not self.brokers:
            return None
        return True

    def enforced_for(self, keys: Iterable[str]) -> bool | None:
        """:attr:`resolution_enforced` for an answer about ``keys``: always
        ``True`` when they are all ip keys (``ConnectionQuotas`` never asks
        the callback; :attr:`~quotaform.kafka.keys.KeySpec.callback_type`)."""
        if all(QUOTA_KEYS[k].callback_type is None for k in keys):
            return True
        return self.resolution_enforced

    def enforced_for_principal(self, principal: Principal) -> bool | None:
        """:meth:`enforced_for` every quota key ``principal`` can have (an
        address: the ip keys; a user / client id: the others)."""
        return self.enforced_for(keys_for([IP] if principal.is_ip else [USER, CLIENT_ID]))
