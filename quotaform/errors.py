"""One error hierarchy for quotaform.

Library code raises these and never prints or exits; the CLI catches
:class:`QuotaformError` once, prints ``str(error)`` to standard error and exits
with ``error.exit_code``.
"""

from __future__ import annotations

__all__ = [
    "AuthorizationError",
    "BrokerError",
    "ConnectionSettingsError",
    "QuotaformError",
    "ReadOnlyError",
    "SandboxError",
]


class QuotaformError(Exception):
    """Base class of every error quotaform raises on purpose.

    ``exit_code`` is the process exit code the CLI uses for it (1 unless a
    subclass documents another).
    """

    exit_code: int = 1


class ConnectionSettingsError(QuotaformError):
    """A bootstrap server, ``--command-config`` file or environment variable is
    missing, unreadable or names a setting kafka-python cannot honour."""


class ReadOnlyError(QuotaformError):
    """An alter was attempted through a client opened read-only (plan, drift)."""


class SandboxError(QuotaformError):
    """The local sandbox broker could not be fetched, started, found or stopped.

    The message says what to do about it (install Java 17+, install Maven, ...).
    """


class BrokerError(QuotaformError):
    """A Kafka error code returned by the broker (or raised by the client for a
    whole request).

    Attributes:
        code: Kafka error code (``kafka.errors`` numbering: 7 REQUEST_TIMED_OUT,
            31 CLUSTER_AUTHORIZATION_FAILED, 41 NOT_CONTROLLER,
            42 INVALID_REQUEST, 44 POLICY_VIOLATION, -1 UNKNOWN_SERVER_ERROR,
            ...), or ``None`` for client-side failures without a code.
        name: the error's Kafka name, e.g. ``INVALID_REQUEST``.
        broker_message: the broker's own message, verbatim (may be ``None``).
        api: the RPC that failed, e.g. ``DescribeClientQuotas``.
    """

    def __init__(
        self,
        code: int | None,
        name: str,
        broker_message: str | None,
        *,
        api: str,
    ) -> None:
        self.code = code
        self.name = name
        self.broker_message = broker_message
        self.api = api
        code_txt = f" ({code})" if code is not None else ""
        detail = f": {broker_message}" if broker_message else ""
        super().__init__(f"{api} failed with {name}{code_txt}{detail}")


class AuthorizationError(BrokerError):
    """CLUSTER_AUTHORIZATION_FAILED (31): the principal lacks the ACL.

    DescribeClientQuotas needs DESCRIBE_CONFIGS on CLUSTER, AlterClientQuotas
    needs ALTER_CONFIGS on CLUSTER (KIP-546).
    """

    def __init__(self, broker_message: str | None, *, api: str) -> None:
        super().__init__(31, "CLUSTER_AUTHORIZATION_FAILED", broker_message, api=api)
        needed = "ALTER_CONFIGS" if api.startswith("Alter") else "DESCRIBE_CONFIGS"
        self.args = (
            f"{api} was refused: not authorized (CLUSTER_AUTHORIZATION_FAILED, 31). "
            f"The principal needs the {needed} operation on the CLUSTER resource.",
        )
