"""A live Prometheus (or Thanos, Mimir, VictoriaMetrics): ``--prometheus
URL``. quotaform sends the ``query_range`` requests itself
(:mod:`quotaform.analytics.prometheus_api`) and saves each answer as it
streams in; the answers are then read by the ``prometheus`` source like any
saved answer, so a run can be repeated offline (``--usage DIR/prometheus``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from quotaform.analytics.prometheus_api import (
    DEFAULT_RANGE,
    PrometheusQuery,
    default_step,
    fetch_usage,
    load_auth,
    selector,
)

__all__ = ["Fetched", "LiveOptions", "fetch_answers", "time_range"]


@dataclass(frozen=True, slots=True)
class LiveOptions:
    """How to read a Prometheus server.

    Attributes:
        url: the server's base URL.
        step_s: the resolution, seconds (``None``:
            :func:`~quotaform.analytics.prometheus_api.default_step`).
        config: a Prometheus HTTP client configuration file (authorization,
            basic_auth, tls_config); without it the ``QUOTAFORM_PROMETHEUS_*``
            environment variables.
        ca_file: the CA of the server's TLS certificate.
        match: PromQL label matchers narrowing the series (``job="kafka"``).
        timeout_s: each request's deadline, its answer included, seconds
            (``None``: 120).
        max_bytes: the largest answer read (``None``: the default limit).
    """

    url: str
    step_s: float | None = None
    config: Path | None = None
    ca_file: Path | None = None
    match: tuple[str, ...] = ()
    timeout_s: float | None = None
    max_bytes: int | None = None


def _utc(when: datetime | None) -> datetime | None:
    return None if when is None else (when if when.tzinfo else when.replace(tzinfo=UTC))


def time_range(since: datetime | None, until: datetime | None) -> tuple[datetime, datetime]:
    """The range a live read covers: ``--since`` / ``--until``, by default
    the last hour (:data:`~quotaform.analytics.prometheus_api.DEFAULT_RANGE`)."""
    end = _utc(until) or datetime.now(UTC)
    return _utc(since) or end - DEFAULT_RANGE, end


@dataclass(frozen=True, slots=True)
class Fetched:
    """What a live read fetched: the answer files, and the range and step
    read (the analysis keeps ``since <= t < until``, ``until`` just after
    the last step)."""

    files: tuple[Path, ...]
    since: datetime
    until: datetime
    step_s: float


def fetch_answers(
    live: LiveOptions,
    since: datetime | None,
    until: datetime | None,
    into: Path,
    *,
    progress: Callable[[str], None] | None = None,
    environ: Mapping[str, str] = os.environ,
) -> Fetched:
    """Fetch the quota metrics of every exporter convention over the range
    into ``into`` (``query-NNNN.json``).

    Raises:
        AnalyticsError: a bad matcher or credentials file; the server cannot
            be read (as :func:`~quotaform.analytics.prometheus_api.fetch_usage`
            says).
    """
    start, end = time_range(since, until)
    step = live.step_s or default_step(start, end)
    query = PrometheusQuery(
        url=live.url,
        start=start,
        end=end,
        step_s=step,
        selector=selector(live.match),
        auth=load_auth(environ, config=live.config, ca_file=live.ca_file),
        max_bytes=live.max_bytes,
        **({"timeout_s": live.timeout_s} if live.timeout_s else {}),
    )
    fetched = fetch_usage(query, into, progress=progress)
    return Fetched(tuple(fetched.files), start, end + timedelta(microseconds=1), step)
