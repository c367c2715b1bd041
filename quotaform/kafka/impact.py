"""What a client lives with after a quota change: its throughput, the share of
its demand cut, and the steady-state throttle time the broker's
``throttle-time`` metric reports (KIP-13, KIP-219, KIP-599, KIP-612).

A client wanting O (key unit/s) under a quota T gets about ``min(O, T)`` per
broker: the broker holds each request until the window's rate is back at T.
Once the client runs behind (any O > T builds a backlog: the producer's
records wait in its accumulator, a consumer lags its log), every request
carries a full request of S (key unit x s: bytes for the byte rates) and the
cycle between two requests is ``S / T`` seconds; the broker fills what the
client does not spend itself (a round trip, milliseconds) with throttle time.
So the throttle-time metric (the ``Avg`` of the throttled responses only,
notes 2.4) reads about

    X_ss = S / T x 1000 ms      (O > T; 0 when O <= T or unlimited)

bounded by :data:`~quotaform.kafka.throttle.THROTTLE_CAP_MS` for the capped
keys. Per key (:data:`STEADY_RULES`):

* ``producer_byte_rate``: every produce request is recorded and throttled:
  ``X = excess in the window / T``, which settles at ``S / T``.
* ``consumer_byte_rate``: a fetch that would exceed is answered EMPTY and
  un-recorded (``KafkaApis``); the response is capped by the broker at
  ``T x (quota.window.num - 1) x quota.window.size.seconds``
  (``ClientQuotaManager.maxValueInQuotaWindow``), so S is too. Only whole
  fetches fit in the window, each refused one held ``(k + 1) x S / T - W'``
  (:func:`refused_fetch_ms`), and the consumer asks again only then, so it
  gets less than T (:func:`whole_fetch_rate`).
* ``controller_mutation_rate``: KIP-599's token bucket (burst ``T x num x
  size``, notes 2.3): once the burst is drained (after ``burst / (O - T)``
  s), each accepted request of S mutations drives the bucket to ``-S`` and is
  held ``S / T``.
* ``request_percentage``, ``connection_creation_rate``: the same cycle, the
  time bounded at one window sample (1000 ms); a refused connection is
  un-recorded like an empty fetch.

The first throttle of a client still sending at its old rate, ``(O - T) / T
x W`` (:func:`~quotaform.kafka.throttle.throttle_time_ms`), is a transient of
the first seconds: :func:`first_throttle_ms`.

S is not in the quota metrics; the default of each key
(:data:`STEADY_RULES`) is the clients' configuration default, and users who
know better give their own. Standard library only: every engine (the Python
one calls these functions, the Spark one builds columns from
:data:`STEADY_RULES`) reads the same rules.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from quotaform.kafka.throttle import (
    DEFAULT_QUOTA_WINDOW_S,
    QUOTA_WINDOW_SIZE_S,
    java_round,
    throttle_cap_ms,
    throttle_time_ms,
)

__all__ = [
    "SOURCE_DEFAULT",
    "SOURCE_FETCH_CAP",
    "SOURCE_GIVEN",
    "STEADY_RULES",
    "SteadyRule",
    "demand_cut",
    "fetch_cap",
    "first_throttle_ms",
    "refused_fetch_ms",
    "request_size",
    "share_over",
    "steady_throttle_ms",
    "throughput_after",
    "whole_fetch_rate",
]

#: ``request_bytes_source`` when S is the key's default (:attr:`SteadyRule.default_size`).
SOURCE_DEFAULT = "default"
#: ``request_bytes_source`` when S was given (``analyze impact --request-bytes``).
SOURCE_GIVEN = "given"
#: ``request_bytes_source`` when the broker's fetch cap bounds S (consumer_byte_rate).
SOURCE_FETCH_CAP = "fetch cap"


@dataclass(frozen=True, slots=True)
class SteadyRule:
    """How one quota key's requests meet the quota in the steady state.

    Attributes:
        key: the quota key.
        default_size: S, one request's amount in the key's unit x seconds
            (bytes for byte rates, mutations, connections, % x s of thread time).
        default_from: where the default comes from.
        fetch_capped: the broker caps one response at ``T x (num - 1) x size``.
        token_bucket: KIP-599's bucket: a burst of ``T x W`` passes first.
        whole_requests: a request that would take the window's rate over the
            quota is answered empty and un-recorded (``KafkaApis``' fetch
            path), so only whole requests of S that fit pass:
            :func:`throughput_after` is below T.
    """

    key: str
    default_size: float
    default_from: str
    fetch_capped: bool = False
    token_bucket: bool = False
    whole_requests: bool = False


#: Every quota key's steady-state rule, in :data:`~quotaform.kafka.keys.QUOTA_KEYS` order.
STEADY_RULES: Mapping[str, SteadyRule] = MappingProxyType(
    {
        r.key: r
        for r in (
            SteadyRule(
                "producer_byte_rate",
                16384.0,
                "batch.size default of the Java and kafka-python producers: one "
                "partition's batch per produce request (several partitions on one "
                "broker share a request, up to max.request.size 1 MiB)",
            ),
            SteadyRule(
                "consumer_byte_rate",
                1048576.0,
                "max.partition.fetch.bytes default of the Java and kafka-python "
                "consumers, one partition (fetch.max.bytes 50 MiB bounds several), "
                "and at most the broker's fetch cap T x (quota.window.num - 1) x "
                "quota.window.size.seconds",
                fetch_capped=True,
                whole_requests=True,
            ),
            SteadyRule(
                "request_percentage",
                0.1,
                "estimate: 1 ms of I/O and network thread time per request "
                "(0.1 % x s); not in the client's configuration",
            ),
            SteadyRule(
                "controller_mutation_rate",
                1.0,
                "one partition mutation per request (CreateTopics of one topic of "
                "num.partitions 1, the broker default)",
                token_bucket=True,
            ),
            SteadyRule(
                "connection_creation_rate",
                1.0,
                "one connection per attempt",
            ),
        )
    }
)


def fetch_cap(quota: float, *, window_s: float = DEFAULT_QUOTA_WINDOW_S) -> float:
    """The most a fetch response carries under ``quota``:
    ``T x (quota.window.num - 1) x quota.window.size.seconds``
    (``ClientQuotaManager.maxValueInQuotaWindow``), W = ``window_s`` =
    num x size."""
    return quota * (window_s - QUOTA_WINDOW_SIZE_S)


def request_size(
    key: str,
    quota: float | None,
    *,
    given: float | None = None,
    window_s: float = DEFAULT_QUOTA_WINDOW_S,
) -> tuple[float, str]:
    """S, one request's amount (key unit x s), and where it came from
    (:data:`SOURCE_GIVEN`, :data:`SOURCE_DEFAULT` or
    :data:`SOURCE_FETCH_CAP`): ``given`` when set, else the key's default;
    for a fetch-capped key at most :func:`fetch_cap` of ``quota``.

    Raises:
        KeyError: ``key`` is not a quota key.
    """
    rule = STEADY_RULES[key]
    size, source = (
        (given, SOURCE_GIVEN) if given is not None else (rule.default_size, SOURCE_DEFAULT)
    )
    if rule.fetch_capped and quota is not None and quota > 0:
        cap = fetch_cap(quota, window_s=window_s)
        if cap < size:
            return cap, SOURCE_FETCH_CAP
    return size, source


def _limited(observed: float, quota: float | None) -> bool:
    return quota is not None and quota > 0 and observed > quota


def whole_fetch_rate(
    quota: float, size: float, *, window_s: float = DEFAULT_QUOTA_WINDOW_S
) -> float:
    """What a consumer held by ``quota`` (bytes/s) with fetches of ``size``
    bytes (S) gets, bytes/s, as it measures itself: whole fetches only, and
    after them fetches refused until the window frees.

    From the broker's code (``KafkaApis`` fetch path, ``ClientQuotaManager``,
    ``SampledStat``, ``Rate``) and the client's (KIP-219: a throttled
    response is answered at once; the Java ``NetworkClient`` and
    kafka-python's connection send nothing to that broker for its
    ``throttle_time_ms``):

    * a fetch is recorded in the 1 s sample holding its time; the sample, and
      so the fetch, leaves the window ``quota.window.num`` x
      ``quota.window.size.seconds`` after the sample began: L = 10 to 11 s
      after the fetch (W' = ``window_s - quota.window.size.seconds / 2`` =
      10.5 s on average);
    * a fetch that would take the window's rate over T is answered EMPTY
      and un-recorded, so at most ``k = max(1, floor(T x W' / S))`` whole
      fetches are in the window; the k pass together once it is free (each
      asked at once after the one before);
    * with the window full, each fetch asked is refused with
      ``X = (O - T) / T x W = (k + 1) x S / T - W'`` s
      (``QuotaUtils.throttleTime``, O the rate with the asked fetch), and the
      consumer asks again only X later: it asks at X, 2X, ... after the k
      fetches, and the first ask at or after L passes.

    So k fetches every ``P = X x E[ceil(L / X)]``, L uniform over the
    sample's second: ``k x S / P``, at most T. Under 512 KiB/s with 1 MiB
    fetches: k = 5, X = 1.5 s, asks 7 or 8 times: 5 MiB every 11.25 s =
    466,034 B/s (the broker's own ``byte-rate``, the bytes in the window
    over it, reads k x S / W' = 499,322 B/s); under 150 KiB/s: k = 1, X =
    3.15 s, 1 MiB every 4 x X = 12.6 s = 83,132 B/s.
    """
    held_s, fit = _whole_fetches(quota, size, window_s)
    refused_s = (fit + 1) * size / quota - held_s
    first_s, last_s = window_s - QUOTA_WINDOW_SIZE_S, window_s
    asks = (_ceil_integral(last_s, refused_s) - _ceil_integral(first_s, refused_s)) / (
        last_s - first_s
    )
    return min(quota, fit * size / (refused_s * asks))


def _ceil_integral(upto: float, step: float) -> float:
    """``integral of ceil(x / step) dx`` from 0 to ``upto`` (``n = floor(upto
    / step)`` whole steps, then the part step)."""
    n = math.floor(upto / step)
    return step * n * (n + 1) / 2 + (n + 1) * (upto - n * step)


def _whole_fetches(quota: float, size: float, window_s: float) -> tuple[float, int]:
    """W' (seconds a fetch stays in the window, on average) and k (the whole
    fetches of ``size`` that fit in it under ``quota``, at least 1)."""
    held_s = window_s - QUOTA_WINDOW_SIZE_S / 2
    return held_s, max(1, math.floor(quota * held_s / size))


def refused_fetch_ms(
    quota: float, size: float, *, window_s: float = DEFAULT_QUOTA_WINDOW_S
) -> float:
    """The throttle time (ms) of a fetch refused while the window holds its k
    whole fetches (:func:`whole_fetch_rate`): ``Math.round(((k + 1) x S / T -
    W') x 1000)``, the rate with the asked fetch over T times the window
    (``QuotaUtils.throttleTime``). Every response the consumer gets throttled
    is such an empty one, so this is what the broker's ``throttle-time``
    (the mean of the throttled responses) reads: 1,500 ms for 1 MiB fetches
    under 512 KiB/s (measured 1,297-1,718 ms, ``benchmarks/README.md``), where
    S / T says 2,000."""
    held_s, fit = _whole_fetches(quota, size, window_s)
    return java_round(((fit + 1) * size / quota - held_s) * 1000.0)


def throughput_after(
    key: str,
    observed: float,
    quota: float | None,
    size: float,
    *,
    window_s: float = DEFAULT_QUOTA_WINDOW_S,
    typical: float | None = None,
) -> float:
    """What a client of a group measures itself after the change, per broker
    (key unit/s). ``observed`` is the group's peak demand (its p99): it says
    whether the group is held; ``typical`` is its typical rate (its p50;
    ``observed`` when not given): what it keeps sending while not held.

    * Not held (unlimited: ``None``, a ``quota`` <= 0, not a value Kafka
      accepts, or ``observed`` <= T): ``typical``.
    * Held (``observed`` > T): the held rate, at most ``typical`` (a group
      held only at its peaks keeps its typical rate between them): T, the
      broker holding each request until the window's rate is back at T;
      for the keys whose over-quota request is refused whole
      (:attr:`SteadyRule.whole_requests`: ``consumer_byte_rate``)
      :func:`whole_fetch_rate`.

    Raises:
        KeyError: ``key`` is not a quota key.
    """
    rule = STEADY_RULES[key]
    rate = observed if typical is None else typical
    if quota is None or not _limited(observed, quota):
        return rate
    held = (
        whole_fetch_rate(quota, size, window_s=window_s)
        if rule.whole_requests and size > 0
        else quota
    )
    return min(rate, held)


def demand_cut(observed: float, quota: float | None) -> float:
    """The share of the demand the quota cuts, 0..1: ``1 - min(O, T) / O``
    (0.0 for an idle or unlimited group); the quota's own cut, before
    :func:`throughput_after`'s whole-request loss."""
    if observed <= 0 or quota is None or not _limited(observed, quota):
        return 0.0
    return 1.0 - quota / observed


def steady_throttle_ms(
    key: str,
    observed: float,
    quota: float | None,
    size: float,
    *,
    window_s: float = DEFAULT_QUOTA_WINDOW_S,
) -> float:
    """The steady-state mean ``throttle-time`` (ms) the broker reports for a
    group wanting ``observed`` under ``quota`` with requests of ``size`` (S):
    ``Math.round(S / T x 1000)`` when O > T, bounded for the capped keys
    (:func:`~quotaform.kafka.throttle.throttle_cap_ms`); for the keys whose
    over-quota request is refused whole (:attr:`SteadyRule.whole_requests`)
    the hold of a refused fetch, :func:`refused_fetch_ms`; 0.0 otherwise.

    Raises:
        KeyError: ``key`` is not a quota key.
    """
    cap = throttle_cap_ms(key)
    if quota is None or not _limited(observed, quota):
        return 0.0
    if STEADY_RULES[key].whole_requests and size > 0:
        held = refused_fetch_ms(quota, size, window_s=window_s)
    else:
        held = java_round(size / quota * 1000.0)
    return held if cap is None else min(held, cap)


def first_throttle_ms(
    key: str,
    observed: float,
    quota: float | None,
    size: float,
    *,
    window_s: float = DEFAULT_QUOTA_WINDOW_S,
) -> float:
    """The first throttle (ms) of a group that meets ``quota`` still sending
    at ``observed``: :func:`~quotaform.kafka.throttle.throttle_time_ms`
    (``(O - T) / T x W``, capped per key); for the token bucket
    (``controller_mutation_rate``), the first request past the burst, which
    drives the bucket at most ``S`` below zero: :func:`steady_throttle_ms`.

    Raises:
        KeyError: ``key`` is not a quota key.
    """
    if STEADY_RULES[key].token_bucket:
        return steady_throttle_ms(key, observed, quota, size, window_s=window_s)
    return throttle_time_ms(key, observed, quota, window_s=window_s)


def share_over(value: float, points: tuple[tuple[float, float | None], ...]) -> float | None:
    """The estimated share of samples above ``value``, from a distribution
    known at a few ``(cumulative share, quantile)`` points in increasing order
    (the utilisation table's p50, p95, p99 and max: ``((0.5, p50), (0.95,
    p95), (0.99, p99), (1.0, max))``): linear between two points, 0.0 at or
    above the last, and the first point's ``1 - share`` below it (a lower
    bound). ``None`` when a point is unknown."""
    if any(q is None or math.isnan(q) for _, q in points):
        return None
    known = [(s, float(q)) for s, q in points if q is not None]
    if value >= known[-1][1]:
        return 0.0
    if value < known[0][1]:
        return 1.0 - known[0][0]
    for (s0, q0), (s1, q1) in itertools.pairwise(known):
        if q0 <= value < q1:
            return 1.0 - (s0 + (s1 - s0) * (value - q0) / (q1 - q0))
    return 0.0
