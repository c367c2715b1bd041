"""Before connecting: is a bootstrap server resolvable, reachable, and Kafka?

kafka-python reports every bootstrap failure the same way, as a bare
``KafkaTimeoutError`` once its whole bootstrap budget has passed, with the
cause only in its log. This probe names the cause in milliseconds: a DNS
look-up, a TCP connect, then (through TLS for SSL listeners) one ApiVersions
v0 request, which every Kafka broker answers before authentication.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from dataclasses import dataclass

from quotaform.errors import ConnectionSettingsError
from quotaform.inputs.excerpt import excerpt

__all__ = ["ProbeFailure", "check_bootstrap", "probe_server", "split_server"]

_API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 0x51F0, 9) + b"quotaform"
_MAX_FRAME = 1 << 20


@dataclass(frozen=True, slots=True)
class ProbeFailure:
    """Why one bootstrap server cannot be used.

    Attributes:
        server: ``host:port`` as given.
        kind: ``resolve``, ``refused``, ``timeout``, ``unreachable``, ``tls``
            or ``not-kafka``.
        message: one sentence for the operator.
    """

    server: str
    kind: str
    message: str


def split_server(server: str) -> tuple[str, int]:
    """``"host:port"`` / ``"[::1]:9092"`` -> ``(host, port)``.

    Raises:
        ConnectionSettingsError: no port, or not a number.
    """
    host, sep, port = server.strip().rpartition(":")
    if not sep or not port.isdigit():
        raise ConnectionSettingsError(f"bootstrap server {excerpt(server)} is not HOST:PORT")
    return host.strip("[]"), int(port)


def _read_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError(f"the connection was closed after {len(data)} bytes")
        data += chunk
    return data


def probe_server(
    server: str, *, timeout_s: float, tls: ssl.SSLContext | None = None
) -> ProbeFailure | None:
    """Probe one ``host:port``: ``None`` when it answers as Kafka, else why not.

    Sends nothing but one ApiVersions v0 request (allowed before SASL
    authentication), through ``tls`` for SSL / SASL_SSL listeners.
    """
    host, port = split_server(server)
    deadline = time.monotonic() + timeout_s
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return ProbeFailure(server, "resolve", f"cannot resolve host {host!r} ({exc.strerror})")
    failure: ProbeFailure | None = None
    for family, kind, proto, _, address in addresses:
        sock = socket.socket(family, kind, proto)
        sock.settimeout(max(deadline - time.monotonic(), 0.05))
        try:
            sock.connect(address)
        except ConnectionRefusedError:
            failure = ProbeFailure(server, "refused", f"{server}: connection refused")
            sock.close()
            continue
        except TimeoutError:
            failure = ProbeFailure(
                server, "timeout", f"{server}: no TCP connection within {timeout_s:g} s"
            )
            sock.close()
            continue
        except OSError as exc:
            failure = ProbeFailure(server, "unreachable", f"{server}: {exc.strerror or exc}")
            sock.close()
            continue
        try:
            return _speaks_kafka(server, host, sock, tls, timeout_s)
        finally:
            sock.close()
    return failure


def _speaks_kafka(
    server: str, host: str, sock: socket.socket, tls: ssl.SSLContext | None, timeout_s: float
) -> ProbeFailure | None:
    channel: socket.socket = sock
    try:
        if tls is not None:
            channel = tls.wrap_socket(sock, server_hostname=host)
    except (ssl.SSLError, OSError) as exc:
        return ProbeFailure(server, "tls", f"{server}: TLS handshake failed ({exc})")
    try:
        channel.sendall(struct.pack(">i", len(_API_VERSIONS_V0)) + _API_VERSIONS_V0)
        (size,) = struct.unpack(">i", _read_exact(channel, 4))
        if not 6 <= size <= _MAX_FRAME:
            raise ValueError(f"a frame of {size} bytes")
        (correlation,) = struct.unpack(">i", _read_exact(channel, size)[:4])
        if correlation != 0x51F0:
            raise ValueError("a reply to another request")
    except TimeoutError:
        return ProbeFailure(
            server,
            "timeout",
            f"{server} accepts connections but sent no Kafka answer within {timeout_s:g} s",
        )
    except (ValueError, EOFError, ssl.SSLError, OSError) as exc:
        hint = " (a TLS listener? set security.protocol)" if tls is None else ""
        return ProbeFailure(server, "not-kafka", f"{server} answers, but not as Kafka: {exc}{hint}")
    return None


def check_bootstrap(
    servers: str, *, timeout_s: float, tls: ssl.SSLContext | None = None
) -> list[str]:
    """The bootstrap servers of ``servers`` (comma-separated) that answer as Kafka.

    Raises:
        ConnectionSettingsError: none does; the message names each server's
            cause (cannot resolve, connection refused, no answer, TLS, not Kafka).
    """
    good, failures = [], []
    for server in (s.strip() for s in servers.split(",") if s.strip()):
        failure = probe_server(server, timeout_s=timeout_s, tls=tls)
        if failure is None:
            good.append(server)
        else:
            failures.append(failure)
    if not good:
        reasons = "; ".join(f.message for f in failures)
        raise ConnectionSettingsError(f"cannot reach Kafka: {reasons}")
    return good
