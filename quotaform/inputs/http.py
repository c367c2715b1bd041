"""HTTP answers in, within bounds: a total deadline for the whole body (not
only a timeout per read, which a server sending one byte a second never
trips), a size cap, and the media type the caller expects.
"""

from __future__ import annotations

import http.client
import time
from typing import IO, Any

from quotaform.errors import InputError
from quotaform.inputs.depth import DepthScanner
from quotaform.inputs.limits import Limits

__all__ = ["CHUNK_BYTES", "check_media_type", "receive_body"]

#: Bytes asked of the socket per read.
CHUNK_BYTES = 1 << 16


def _socket_of(response: Any) -> Any:
    """The socket under an ``http.client.HTTPResponse`` (``None`` if the
    response is not read from one)."""
    raw = getattr(getattr(response, "fp", None), "raw", None)
    return getattr(raw, "_sock", None)


def receive_body(
    response: Any,
    out: IO[bytes],
    *,
    source: str,
    limits: Limits,
    deadline: float,
    scanner: DepthScanner | None = None,
) -> int:
    """Copy an HTTP response's body into ``out``, returning the bytes copied.

    Args:
        response: an open ``http.client.HTTPResponse`` (what ``urlopen``
            returns).
        source: how the answer is named in refusals (a URL without
            credentials).
        deadline: ``time.monotonic()`` by which the whole body must have
            arrived; each read waits at most until then.
        scanner: measures the nesting of a JSON body as it arrives
            (:class:`~quotaform.inputs.depth.DepthScanner`).

    Raises:
        InputError: the body is larger than ``limits.max_bytes``, is not
            complete by the deadline, or nests deeper than the scanner's limit.
        http.client.IncompleteRead, OSError: the connection broke (the
            caller decides whether to ask again).
    """
    sock = _socket_of(response)
    copied = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _late(source, copied, limits)
        if sock is not None:
            sock.settimeout(left)
        try:
            chunk = response.read1(CHUNK_BYTES)
        except TimeoutError:
            raise _late(source, copied, limits) from None
        if not chunk:
            missing = getattr(response, "length", None)
            if missing:  # the connection closed before Content-Length was sent
                raise http.client.IncompleteRead(b"", missing)
            return copied
        copied += len(chunk)
        if copied > limits.max_bytes:
            raise_with = (
                f" (raise it with {limits.overridden_by})" if limits.overridden_by else ""
            )
            raise InputError(
                source,
                f"the answer is larger than {limits.size_text()}, the limit for a "
                f"{limits.kind}{raise_with}: stopped reading it",
            )
        if scanner is not None:
            try:
                scanner.feed(chunk)
            except InputError as exc:  # an answer has no lines worth naming
                raise InputError(exc.source, exc.reason) from None
        out.write(chunk)


def _late(source: str, copied: int, limits: Limits) -> InputError:
    return InputError(
        source,
        f"the {limits.kind} was not complete by its deadline ({copied} bytes received): "
        "the server is too slow or stalled",
    )


def check_media_type(response: Any, *, source: str, expected: str, what: str) -> None:
    """Refuse an answer whose ``Content-Type`` is not ``expected`` (e.g.
    ``application/json``), naming what was received instead: an HTML error
    page or an exporter's text format answered with status 200 is not the
    API that was asked.

    Raises:
        InputError: another media type was sent (none at all is accepted).
    """
    header = response.headers.get("Content-Type")
    if header is None:
        return
    media = header.split(";", 1)[0].strip().lower()
    if media != expected:
        raise InputError(
            source,
            f"answered with {media or 'no media type'}, not {expected}: {what}",
        )
