"""Open a :class:`QuotaAdminClient` from :class:`ConnectionSettings`, failing
fast and by name: an unresolvable host, a refused or silent port, a port that
is not Kafka, a TLS failure or refused credentials each get their own message
at once, never a bare timeout and never a secret."""

from __future__ import annotations

import ssl

import kafka.errors as kerrors

from quotaform.cluster.wire.client import MAX_RECORDS_PER_REQUEST, QuotaAdminClient, RetryPolicy
from quotaform.cluster.wire.codes import error_text
from quotaform.cluster.wire.connection import ConnectionSettings, redact_secrets_in_logs
from quotaform.cluster.wire.probe import check_bootstrap
from quotaform.errors import ConnectionSettingsError

__all__ = ["open_admin", "probe_tls_context"]


def probe_tls_context(settings: ConnectionSettings) -> ssl.SSLContext | None:
    """The TLS context the probe uses for SSL / SASL_SSL listeners, else ``None``.

    Raises:
        ConnectionSettingsError: a certificate or key file cannot be loaded.
    """
    if not settings.security_protocol.endswith("SSL"):
        return None
    try:
        context = ssl.create_default_context(cafile=settings.ssl_cafile)
        context.check_hostname = settings.ssl_check_hostname
        if settings.ssl_certfile:
            context.load_cert_chain(
                settings.ssl_certfile, settings.ssl_keyfile, password=settings.ssl_password
            )
    except (OSError, ssl.SSLError) as exc:
        raise ConnectionSettingsError(f"cannot load the TLS settings: {exc}") from None
    return context


def open_admin(
    settings: ConnectionSettings,
    *,
    read_only: bool,
    retry: RetryPolicy | None = None,
    max_records: int = MAX_RECORDS_PER_REQUEST,
    bootstrap_timeout_ms: int | None = None,
) -> QuotaAdminClient:
    """Connect and return a client; close it with ``.close()`` or ``with``.

    Each bootstrap server is probed first (:func:`check_bootstrap`), so the
    common mistakes are named within milliseconds.

    Args:
        read_only: forbid AlterClientQuotas on this client (plan, drift).
        bootstrap_timeout_ms: how long to try to reach a bootstrap server;
            default ``settings.connect_timeout_ms``.

    Raises:
        ConnectionSettingsError: no bootstrap server is Kafka (each cause
            named), authentication failed (mechanism and user named, never
            the password), or kafka-python refused a setting.
    """
    redact_secrets_in_logs(settings)
    timeout_ms = bootstrap_timeout_ms or settings.connect_timeout_ms
    check_bootstrap(
        settings.bootstrap_servers,
        timeout_s=timeout_ms / 1000,
        tls=probe_tls_context(settings),
    )
    try:
        return QuotaAdminClient(
            read_only=read_only,
            request_timeout_ms=settings.request_timeout_ms,
            retry=retry,
            max_records=max_records,
            bootstrap_timeout_ms=timeout_ms,
            **settings.kafka_configs(),
        )
    except (
        kerrors.SaslAuthenticationFailedError,
        kerrors.UnsupportedSaslMechanismError,
        kerrors.IllegalSaslStateError,
    ) as exc:
        who = f" user {settings.sasl_username!r}" if settings.sasl_username else ""
        raise ConnectionSettingsError(
            f"authentication failed for {settings.sasl_mechanism}{who} at "
            f"{settings.bootstrap_servers}: the broker refused the credentials ({error_text(exc)})"
        ) from None
    except (kerrors.KafkaTimeoutError, kerrors.KafkaConnectionError) as exc:
        raise ConnectionSettingsError(
            f"cannot reach Kafka at {settings.bootstrap_servers} "
            f"({settings.security_protocol}) within {timeout_ms} ms: {type(exc).__name__}"
        ) from exc
    except kerrors.KafkaConfigurationError as exc:
        raise ConnectionSettingsError(f"invalid Kafka client settings: {exc}") from exc
