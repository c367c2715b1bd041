"""How the broker turns a quota violation into a throttle time (KIP-13, KIP-124,
KIP-219, KIP-599, KIP-612).

A quota sensor measures a rate over the quota window: ``quota.window.num``
samples (default 11) of ``quota.window.size.seconds`` (default 1; ``QuotaConfig``).
When a request takes the measured rate O above the quota T, the broker answers
at once and mutes the client for ``X = Math.round((O - T) / T * W)`` ms, W the
window in ms (``QuotaUtils.throttleTime``). Some managers bound X by one window
sample (``QuotaUtils.boundedThrottleTime``):

==========================  ==========================================  =====================
quota key                   computed by                                 bound
==========================  ==========================================  =====================
producer_byte_rate          ``ClientQuotaManager.throttleTime``         none
consumer_byte_rate          ``ClientQuotaManager.throttleTime``         none
request_percentage          ``ClientRequestQuotaManager.throttleTime``  window size (1000 ms)
controller_mutation_rate    ``ControllerMutationQuotaManager``          none (token bucket)
connection_creation_rate    ``ConnectionQuotas.recordAndGetThrottleTimeMs``  window size (1000 ms)
==========================  ==========================================  =====================

Every engine reads :data:`THROTTLE_RULES` (the Python one calls
:func:`throttle_time_ms`; the Spark transforms build their column from the
same table). Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "DEFAULT_QUOTA_WINDOW_S",
    "QUOTA_WINDOW_NUM",
    "QUOTA_WINDOW_SIZE_S",
    "THROTTLE_CAP_MS",
    "THROTTLE_RULES",
    "ThrottleRule",
    "java_round",
    "throttle_cap_ms",
    "throttle_time_ms",
]

#: ``quota.window.num``'s default: samples a quota sensor keeps (``QuotaConfig``).
QUOTA_WINDOW_NUM = 11
#: ``quota.window.size.seconds``'s default: the length of one sample (``QuotaConfig``).
QUOTA_WINDOW_SIZE_S = 1
#: The quota window W of the throttle formula in seconds, with the brokers'
#: defaults: ``quota.window.num`` x ``quota.window.size.seconds`` = 11.0. (The
#: broker uses the retained span, 10 s <= W < ~12 s: see the notes, 2.1.)
DEFAULT_QUOTA_WINDOW_S = float(QUOTA_WINDOW_NUM * QUOTA_WINDOW_SIZE_S)
#: The bound of a capped key's throttle time in ms: ``quota.window.size.seconds``
#: x 1000 (``TimeUnit.SECONDS.toMillis`` in ``ClientRequestQuotaManager`` and
#: ``ConnectionQuotas``).
THROTTLE_CAP_MS = float(QUOTA_WINDOW_SIZE_S * 1000)


@dataclass(frozen=True, slots=True)
class ThrottleRule:
    """How the broker computes one quota key's throttle time.

    Attributes:
        key: the quota key.
        computed_by: the Kafka method that computes it.
        capped: whether the time is bounded by :data:`THROTTLE_CAP_MS`
            (``QuotaUtils.boundedThrottleTime``).
    """

    key: str
    computed_by: str
    capped: bool


#: Every quota key's throttle rule, in :data:`~quotaform.kafka.keys.QUOTA_KEYS` order.
THROTTLE_RULES: Mapping[str, ThrottleRule] = MappingProxyType(
    {
        r.key: r
        for r in (
            ThrottleRule("producer_byte_rate", "ClientQuotaManager.throttleTime", False),
            ThrottleRule("consumer_byte_rate", "ClientQuotaManager.throttleTime", False),
            ThrottleRule("request_percentage", "ClientRequestQuotaManager.throttleTime", True),
            # A token bucket (KIP-599): see throttle_time_ms.
            ThrottleRule(
                "controller_mutation_rate", "ControllerMutationQuotaManager.throttleTimeMs", False
            ),
            ThrottleRule(
                "connection_creation_rate", "ConnectionQuotas.recordAndGetThrottleTimeMs", True
            ),
        )
    }
)


def throttle_cap_ms(key: str) -> float | None:
    """The bound of ``key``'s throttle time in ms (:data:`THROTTLE_CAP_MS`),
    ``None`` when the broker does not bound it.

    Raises:
        KeyError: ``key`` is not a quota key.
    """
    return THROTTLE_CAP_MS if THROTTLE_RULES[key].capped else None


def java_round(value: float) -> float:
    """Java's ``Math.round`` of a double, as a float: the closest whole
    number, halves up (``2.5`` -> 3, ``-2.5`` -> -2), where Python's ``round``
    rounds halves to even. Exact, as Java's is since Java 7:
    ``0.49999999999999994`` -> 0, where ``floor(x + 0.5)`` gives 1 (the sum
    rounds up)."""
    whole = math.floor(value)
    return float(whole + 1 if value - whole >= 0.5 else whole)


def throttle_time_ms(
    key: str,
    observed: float,
    quota: float | None,
    *,
    window_s: float = DEFAULT_QUOTA_WINDOW_S,
) -> float:
    """The throttle time in ms the broker gives a quota group measured at
    ``observed`` under ``quota`` (both in the key's unit per second: bytes/s,
    % of a thread, mutations/s, connections/s).

    ``Math.round((O - T) / T * W_ms)`` when O > T (``QuotaUtils.throttleTime``,
    the operations in Kafka's order, W_ms = ``window_s`` x 1000), bounded by
    :data:`THROTTLE_CAP_MS` for ``request_percentage`` and
    ``connection_creation_rate`` (:data:`THROTTLE_RULES`); 0.0 when O <= T,
    when the group is unlimited (``quota`` None) or ``quota`` <= 0 (not a
    value Kafka accepts: no division by zero).

    ``controller_mutation_rate`` is a token bucket (KIP-599,
    ``ControllerMutationQuotaManager.throttleTimeMs``: ``round(-tokens / T x
    1000)``): a sustained excess drains the burst of ``T x W`` in
    ``T x W / (O - T)`` seconds; this formula is kept for it as for the other
    keys (the steady state after a change, per request, is
    :func:`quotaform.kafka.impact.steady_throttle_ms`).

    Raises:
        KeyError: ``key`` is not a quota key.
    """
    cap = throttle_cap_ms(key)
    if quota is None or quota <= 0 or observed <= quota:
        return 0.0
    throttle = java_round((observed - quota) / quota * (window_s * 1000.0))
    return throttle if cap is None else min(throttle, cap)
