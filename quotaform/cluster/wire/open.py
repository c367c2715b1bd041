"""Open a :class:`QuotaAdminClient` from :class:`ConnectionSettings`."""

from __future__ import annotations

import kafka.errors as kerrors

from quotaform.cluster.wire.client import MAX_RECORDS_PER_REQUEST, QuotaAdminClient, RetryPolicy
from quotaform.cluster.wire.connection import ConnectionSettings, redact_secrets_in_logs
from quotaform.errors import ConnectionSettingsError

__all__ = ["open_admin"]


def open_admin(
    settings: ConnectionSettings,
    *,
    read_only: bool,
    retry: RetryPolicy | None = None,
    max_records: int = MAX_RECORDS_PER_REQUEST,
    bootstrap_timeout_ms: int = 15_000,
) -> QuotaAdminClient:
    """Connect and return a client; close it with ``.close()`` or ``with``.

    Args:
        read_only: forbid AlterClientQuotas on this client (plan, drift).
        bootstrap_timeout_ms: how long to try to reach a bootstrap server.

    Raises:
        ConnectionSettingsError: no bootstrap server answered within
            ``bootstrap_timeout_ms``, or kafka-python refused a setting. The
            message names the servers, never a secret.
    """
    redact_secrets_in_logs(settings)
    try:
        return QuotaAdminClient(
            read_only=read_only,
            request_timeout_ms=settings.request_timeout_ms,
            retry=retry,
            max_records=max_records,
            bootstrap_timeout_ms=bootstrap_timeout_ms,
            **settings.kafka_configs(),
        )
    except (kerrors.KafkaTimeoutError, kerrors.KafkaConnectionError) as exc:
        raise ConnectionSettingsError(
            f"cannot reach Kafka at {settings.bootstrap_servers} "
            f"({settings.security_protocol}) within {bootstrap_timeout_ms} ms: {type(exc).__name__}"
        ) from exc
    except kerrors.KafkaConfigurationError as exc:
        raise ConnectionSettingsError(f"invalid Kafka client settings: {exc}") from exc
