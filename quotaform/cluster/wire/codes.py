"""Map kafka-python's errors to quotaform's :class:`~quotaform.errors.BrokerError`."""

from __future__ import annotations

import re

import kafka.errors as kerrors

from quotaform.errors import AuthorizationError, BrokerError

__all__ = [
    "RETRIABLE_CODES",
    "broker_error",
    "error_text",
    "from_exception",
    "is_retriable",
]

#: Broker codes worth another try: REQUEST_TIMED_OUT (7), NOT_CONTROLLER (41).
RETRIABLE_CODES = frozenset({7, 41})

#: Client-side failures where the request never got an answer.
_TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    kerrors.KafkaConnectionError,
    kerrors.KafkaTimeoutError,
    kerrors.RequestTimedOutError,
    kerrors.NodeNotReadyError,
)


_REPEATED_NAME = re.compile(r"((?:\[Error -?\d+\] )?[A-Z]\w*(?:Error|Exception): )(?:\1)+")


def error_text(exc: BaseException) -> str:
    """``str(exc)`` of a kafka-python error with its class name said once:
    kafka-python wraps one SASL error in another of the same class, whose text
    then reads ``SaslAuthenticationFailedError: SaslAuthenticationFailedError:
    ...``."""
    return _REPEATED_NAME.sub(r"\1", str(exc))


def broker_error(code: int, message: str | None, *, api: str) -> BrokerError:
    """A typed error for a Kafka error ``code`` with the broker's ``message``.

    Code 31 gives an :class:`AuthorizationError` naming the ACL needed.
    """
    if code == 31:
        return AuthorizationError(message, api=api)
    cls = kerrors.for_code(code)
    name = getattr(cls, "message", None) or f"ERROR_{code}"
    return BrokerError(code, name, message, api=api)


def from_exception(exc: BaseException, *, api: str) -> BrokerError:
    """A :class:`BrokerError` for an exception raised by kafka-python."""
    if isinstance(exc, BrokerError):
        return exc
    code = getattr(exc, "errno", None)
    name = getattr(exc, "message", None) or type(exc).__name__
    if code == 31:
        return AuthorizationError(str(exc) or None, api=api)
    detail = str(exc) or None
    return BrokerError(code if isinstance(code, int) else None, name, detail, api=api)


def is_retriable(exc: BaseException) -> bool:
    """True for transport failures (sent or not), retriable broker codes
    (7, 41); never for authentication or authorization failures."""
    if isinstance(exc, BrokerError):
        return exc.code in RETRIABLE_CODES
    cause = getattr(exc, "cause", None)  # a request that was never sent
    if isinstance(cause, BaseException) and cause is not exc:
        return is_retriable(cause)
    if isinstance(exc, kerrors.SaslAuthenticationFailedError | kerrors.AuthorizationError):
        return False
    if isinstance(exc, _TRANSPORT_ERRORS):
        return True
    return isinstance(exc, kerrors.NotControllerError)


def is_transport_failure(exc: BaseException) -> bool:
    """True when no response arrived (so an alter's outcome is unknown)."""
    if isinstance(exc, BrokerError):
        return exc.code == 7
    return isinstance(exc, _TRANSPORT_ERRORS)
