"""The one quota-key table: every client-quota key Kafka knows, with its rules.

Source: ``QuotaConfig`` (server-common) for the keys, their ConfigDef types and
entity types; ``ClientQuotaControlManager.validateQuotaKeyValue`` for the value
rules; the quota managers (``ClientQuotaManager``, ``ClientRequestQuotaManager``,
``ControllerMutationQuotaManager``, ``ConnectionQuotas``) for what "unlimited"
means. The manifest's pydantic fields, the JSON Schema, the docs and the Spark
transforms all derive from :data:`QUOTA_KEYS`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from quotaform.kafka.entity import CLIENT_ID, IP, USER

__all__ = [
    "AT_ONCE",
    "INT_MAX",
    "LONG_MAX",
    "METRICS",
    "QUOTA_KEYS",
    "KeySpec",
    "ValueType",
    "enforcing_nodes",
    "key_spec",
    "keys_for",
]

INT_MAX = 2**31 - 1
"""Integer.MAX_VALUE: the largest INT quota value, and the ip quota an address
without any ``{ip}`` entity gets (unlimited, ``ConnectionQuotas``)."""
LONG_MAX = 2**63 - 1
"""Long.MAX_VALUE: the largest LONG quota value, and the bound a client without
any matching entity gets (unlimited, ``ClientQuotaManager``)."""


class ValueType(enum.Enum):
    """How the controller checks a quota value (``QuotaConfig`` ConfigDef type)."""

    LONG = "LONG"
    INT = "INT"
    DOUBLE = "DOUBLE"


@dataclass(frozen=True, slots=True)
class KeySpec:
    """One quota key.

    Attributes:
        key: the quota key, e.g. ``producer_byte_rate``.
        value_type: LONG / INT values must be whole numbers (tolerance 1e-6 on the
            controller); DOUBLE values may be fractional.
        entity_types: entity types the key is valid for.
        unit: unit of the value: ``bytes/s``, ``%`` (of one I/O + network
            thread), ``mutations/s`` (partition mutations), ``connections/s``.
        description: one sentence for the manifest schema and the docs.
        sensor: the ``type`` of the broker's quota MBean in ``kafka.server``
            (``Produce``, ``Fetch``, ``Request``, ``ControllerMutation``;
            ``socket-server-metrics`` for ip), from the quota managers'
            ``QuotaType`` / ``ConnectionQuotas``.
        metric: the MBean attribute holding the measured usage (``byte-rate``,
            ``request-time``, ``mutation-rate``, ``connection-accept-rate``).
        usage_metric: the name of that usage in quotaform's usage table
            (``produce-byte-rate``, ...; ``schemas/usage.schema.json``).
        throttle_metric: the usage table's name of the group's ``throttle-time``
            (``produce-throttle-time``, ...); ``None`` for ip keys, whose
            throttling is recorded per listener, not per address.
        enforced_on: where the quota is enforced. ``broker``: every broker
            applies it to the requests and connections it serves, with its own
            sensors (``ClientQuotaManager``, ``ClientRequestQuotaManager``,
            ``ConnectionQuotas``; KIP-13: quotas are per broker), so a client
            reaching N brokers may use N times the quota. ``controller``: the
            active controller, which handles the mutations brokers forward
            (KRaft ``ControllerApis`` with ``ControllerMutationQuotaManager``
            for CreateTopics, CreatePartitions, DeleteTopics; KIP-599): one
            node at a time, whatever the number of brokers.
        callback_type: the ``ClientQuotaType`` a custom quota callback
            (``client.quota.callback.class``, KIP-257) is asked about for
            this key (``PRODUCE``, ``FETCH``, ``REQUEST``,
            ``CONTROLLER_MUTATION``: ``QuotaFactory`` hands the callback to
            all four client quota managers); ``None`` for ip keys, which
            ``ConnectionQuotas`` resolves itself whatever the callback.
    """

    key: str
    value_type: ValueType
    entity_types: frozenset[str]
    unit: str
    description: str
    sensor: str = ""
    metric: str = ""
    usage_metric: str = ""
    throttle_metric: str | None = None
    enforced_on: str = "broker"
    callback_type: str | None = None

    @property
    def max_value(self) -> int | None:
        """Largest accepted value (Long.MAX / Integer.MAX), ``None`` for DOUBLE."""
        if self.value_type is ValueType.LONG:
            return LONG_MAX
        if self.value_type is ValueType.INT:
            return INT_MAX
        return None

    @property
    def unlimited(self) -> float:
        """The bound a client gets when no entity sets the key, as the float the
        broker uses: ``Integer.MAX_VALUE`` for ip keys (``ConnectionQuotas``),
        ``Long.MAX_VALUE`` otherwise (``ClientQuotaManager``)."""
        return float(INT_MAX if IP in self.entity_types else LONG_MAX)

    def applies_to(self, entity_types: Iterable[str]) -> bool:
        """Whether the key is valid for an entity of these types."""
        return set(entity_types) <= self.entity_types


_CLIENT = frozenset({USER, CLIENT_ID})
_BYTE_FORMS = (
    "A whole number of bytes/s, or a string with a unit: 512KiB, 10MiB, 1.5MB, 100kB, "
    "optional spaces and '/s' (kB/MB/GB/TB/PB are powers of 1000, KiB/MiB/GiB/TiB/PiB "
    "powers of 1024; units in any case, always bytes)."
)

#: Every quota key quotaform manages, by name, in display order.
QUOTA_KEYS: Mapping[str, KeySpec] = MappingProxyType(
    {
        s.key: s
        for s in (
            KeySpec(
                "producer_byte_rate",
                ValueType.LONG,
                _CLIENT,
                "bytes/s",
                f"Produce bandwidth, bytes/s per broker (LONG). {_BYTE_FORMS}",
                sensor="Produce",
                metric="byte-rate",
                usage_metric="produce-byte-rate",
                throttle_metric="produce-throttle-time",
                callback_type="PRODUCE",
            ),
            KeySpec(
                "consumer_byte_rate",
                ValueType.LONG,
                _CLIENT,
                "bytes/s",
                "Fetch bandwidth, bytes/s per broker (LONG). Same forms as producer_byte_rate.",
                sensor="Fetch",
                metric="byte-rate",
                usage_metric="fetch-byte-rate",
                throttle_metric="fetch-throttle-time",
                callback_type="FETCH",
            ),
            KeySpec(
                "request_percentage",
                ValueType.DOUBLE,
                _CLIENT,
                "%",
                "Share of request-handler and network thread time, in % of one thread per "
                'broker (DOUBLE): 150 or "150%" is 1.5 threads.',
                sensor="Request",
                metric="request-time",
                usage_metric="request-time",
                throttle_metric="request-throttle-time",
                callback_type="REQUEST",
            ),
            KeySpec(
                "controller_mutation_rate",
                ValueType.DOUBLE,
                _CLIENT,
                "mutations/s",
                "Partition mutations (create/delete topic partitions) per second (DOUBLE, "
                "fractions allowed), KIP-599.",
                sensor="ControllerMutation",
                metric="mutation-rate",
                usage_metric="controller-mutation-rate",
                throttle_metric="controller-mutation-throttle-time",
                enforced_on="controller",
                callback_type="CONTROLLER_MUTATION",
            ),
            KeySpec(
                "connection_creation_rate",
                ValueType.INT,
                frozenset({IP}),
                "connections/s",
                "New connections per second from one IP, per broker (INT, whole numbers), "
                "KIP-612. Valid for ip entities only.",
                sensor="socket-server-metrics",
                metric="connection-accept-rate",
                usage_metric="connection-accept-rate",
            ),
        )
    }
)


def _metrics() -> dict[str, tuple[str, str]]:
    found: dict[str, tuple[str, str]] = {}
    for ip in (False, True):
        specs = [s for s in QUOTA_KEYS.values() if (IP in s.entity_types) == ip]
        found.update({s.usage_metric: (s.key, "usage") for s in specs})
        found.update(
            {s.throttle_metric: (s.key, "throttle") for s in specs if s.throttle_metric is not None}
        )
    return found


#: Usage-table metric name -> ``(quota key, "usage" | "throttle")``, in the
#: order ``schemas/usage.schema.json`` lists them: the user/client-id groups'
#: usage metrics, their throttle-time metrics, then the ip groups' metrics.
METRICS: Mapping[str, tuple[str, str]] = MappingProxyType(_metrics())


#: How many nodes enforce a key's quota at the same time, by
#: :attr:`KeySpec.enforced_on`: every broker a client reaches (``None``: all
#: observed), or the one active controller.
AT_ONCE: Mapping[str, int | None] = MappingProxyType({"broker": None, "controller": 1})


def enforcing_nodes(key: str, observed: int) -> int:
    """How many of the ``observed`` nodes (brokers, or controllers) reporting a
    group's usage of ``key`` enforce its quota at the same time: all of them
    for a key enforced on every broker, at most one (the active controller)
    for ``controller_mutation_rate`` (:attr:`KeySpec.enforced_on`). The
    group may use this many times the quota across the cluster.

    Raises:
        KeyError: not a quota key.
    """
    cap = AT_ONCE[QUOTA_KEYS[key].enforced_on]
    return observed if cap is None else min(observed, cap)


def key_spec(key: str) -> KeySpec | None:
    """The :class:`KeySpec` of ``key``, or ``None`` when Kafka has no such quota key."""
    return QUOTA_KEYS.get(key)


def keys_for(entity_types: Iterable[str]) -> tuple[str, ...]:
    """The quota keys valid for an entity of these types, in table order."""
    types = set(entity_types)
    return tuple(k for k, s in QUOTA_KEYS.items() if types <= s.entity_types)
