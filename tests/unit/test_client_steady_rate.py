"""The sandbox clients' own steady rate (``quotaform.sandbox.load``): whole
cycles only, so a consumer admitted k whole fetches per window is measured
at k fetches per period wherever its measurement starts."""

from __future__ import annotations

import pytest

from quotaform.sandbox.load import _steady_rate

MiB = 1 << 20


def bursts(
    k: int, period_s: float, cycles: int, *, first_s: float = 3.0
) -> list[tuple[float, int]]:
    """k fetches of 1 MiB 0.1 s apart every ``period_s``: (time, bytes before it)."""
    arrivals, received = [], 0
    for cycle in range(cycles):
        for fetch in range(k):
            arrivals.append((first_s + cycle * period_s + 0.1 * fetch, received))
            received += MiB
    return arrivals


@pytest.mark.parametrize("k", [1, 2, 5])
@pytest.mark.parametrize("from_s", [12.0, 13.05, 13.25, 22.9])
def test_bursts_are_measured_over_whole_cycles(k: int, from_s: float) -> None:
    rate = _steady_rate(bursts(k, 10.0, 6), from_s, bursts=True)
    assert rate == pytest.approx(k * MiB / 10.0)


def test_a_measurement_starting_mid_burst_is_not_biased() -> None:
    """The arrival-to-arrival count this replaced: from a burst's 3rd fetch
    to the last burst's 5th, 5 fetches a 10 s period read as 5.7."""
    arrivals = [a for a in bursts(5, 10.0, 4) if a[0] >= 13.2]
    naive = (arrivals[-1][1] - arrivals[0][1]) / (arrivals[-1][0] - arrivals[0][0])
    assert naive > 1.1 * 5 * MiB / 10.0
    assert _steady_rate(arrivals, 13.2, bursts=True) == pytest.approx(5 * MiB / 10.0)


def test_evenly_spaced_batches_are_each_a_cycle() -> None:
    arrivals = [(0.1 * i, 6_553 * i) for i in range(400)]
    assert _steady_rate(arrivals, 12.0) == pytest.approx(65_530)
    assert _steady_rate(arrivals, 12.0, bursts=True) == pytest.approx(65_530)


def test_a_held_producers_acknowledgements_are_each_a_cycle() -> None:
    """Batches acknowledged in twos, then muted 0.55-0.75 s (its throttle):
    every acknowledgement counts, as the bytes sent over the time."""
    arrivals, t = [], 0.0
    for i in range(60):
        arrivals.append((t, 65_536 * i))
        t += 0.01 if i % 2 == 0 else 0.55 + 0.2 * ((i * 7) % 5) / 4
    rate = _steady_rate(arrivals, 0.0)
    assert rate == pytest.approx(65_536 * 59 / arrivals[-1][0])


def test_fewer_than_two_cycle_starts_is_none() -> None:
    # two bursts after from_s: one cycle start (the first burst's gap is unknown)
    assert _steady_rate(bursts(5, 10.0, 3), 12.0, bursts=True) is None
    assert _steady_rate([(13.0, 0)], 12.0) is None
