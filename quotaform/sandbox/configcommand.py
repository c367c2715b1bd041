"""Run Kafka's own ``kafka-configs`` (``kafka.admin.ConfigCommand``) and read its output.

Used by the tests as an independent oracle: what quotaform writes must be what
Kafka's tool reads back, and the other way round.

``--describe`` prints one line per entity that has quotas::

    Quota configs for user-principal 'alice' are consumer_byte_rate=1.0E7, producer_byte_rate=1024.0
    Quota configs for the default user-principal, client-id 'app' are request_percentage=75.0
    Quota configs for ip '192.0.2.7' are connection_creation_rate=10.0

Values are Java ``Double.toString`` renderings (``1024.0``, ``1.0E7``).
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Sequence

from quotaform.errors import SandboxError
from quotaform.sandbox.jars import DEFAULT_KAFKA_VERSION, run_kafka_tool

__all__ = ["QUOTA_LINE_PREFIX", "parse_quota_describe", "run_config_command"]

log = logging.getLogger(__name__)

#: Start of every quota line ConfigCommand ``--describe`` prints.
QUOTA_LINE_PREFIX = "Quota configs for "
_ENTRIES_SEPARATOR = " are "


def run_config_command(
    args: Sequence[str],
    *,
    bootstrap: str,
    version: str = DEFAULT_KAFKA_VERSION,
    timeout_s: float = 120.0,
) -> subprocess.CompletedProcess[str]:
    """Run ``kafka-configs --bootstrap-server <bootstrap> <args...>`` and return its result.

    Each call starts a JVM (about 1-2 s).

    Args:
        args: ConfigCommand arguments after ``--bootstrap-server``, e.g.
            ``["--describe", "--entity-type", "users"]``.
        bootstrap: ``"host:port"`` of the broker.
        version: Kafka release whose tool runs (jars fetched if needed).
        timeout_s: seconds before the tool is killed.

    Returns:
        The completed process (``stdout``/``stderr`` as text; ``returncode`` 0).

    Raises:
        SandboxError: Java/jars unavailable, timeout, or non-zero exit (the
            message carries the command line and the tool's stderr).
    """
    shown = "kafka-configs --bootstrap-server " + " ".join([bootstrap, *args])
    log.info("running %s", shown)
    proc = run_kafka_tool(
        "kafka.admin.ConfigCommand",
        ["--bootstrap-server", bootstrap, *args],
        version=version,
        timeout_s=timeout_s,
    )
    if proc.returncode != 0:
        detail = (proc.stderr.strip() or proc.stdout.strip() or "(no output)")[-4000:]
        raise SandboxError(f"{shown} failed (exit {proc.returncode}):\n{detail}")
    return proc


def parse_quota_describe(stdout: str) -> dict[str, dict[str, float]]:
    """Parse ConfigCommand ``--describe`` output into quotas per entity.

    Args:
        stdout: the tool's standard output; lines other than quota lines (for
            example SCRAM credential lines) are ignored.

    Returns:
        ``{entity description as printed: {quota_key: value}}``, e.g.
        ``{"user-principal 'alice'": {"producer_byte_rate": 1024.0}}`` or
        ``{"the default user-principal, client-id 'app'": {...}}``.

    Raises:
        ValueError: a quota line does not have the ``... are k=v, k=v`` form.
    """
    quotas: dict[str, dict[str, float]] = {}
    for line in stdout.splitlines():
        if not line.startswith(QUOTA_LINE_PREFIX):
            continue
        # Entity names may contain " are "; quota keys and numbers never do.
        entity, sep, entries = line[len(QUOTA_LINE_PREFIX) :].rpartition(_ENTRIES_SEPARATOR)
        if not sep:
            raise ValueError(f"unexpected ConfigCommand quota line: {line!r}")
        values: dict[str, float] = {}
        for entry in entries.split(", "):
            key, eq, value = entry.partition("=")
            if not eq:
                raise ValueError(f"unexpected quota entry {entry!r} in line: {line!r}")
            values[key.strip()] = float(value)
        quotas[entity] = values
    return quotas
