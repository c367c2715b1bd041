"""A TCP proxy between Kafka clients and one broker, for fault-injection tests.

It reads Kafka's framing (a 4-byte size, then the request header: api key,
api version, correlation id) in both directions, so a test can cut the
connection at a chosen request or response and take the "network" down (stop
accepting, close every connection) and up again on the same port. Traffic only
ever goes between loopback sockets: the proxy listens on 127.0.0.1 and
connects to a broker on 127.0.0.1.

Start the broker with ``BrokerOptions(port=P, advertised_port=proxy.port)`` so
that, after bootstrap, clients connect through the proxy.
"""

from __future__ import annotations

import contextlib
import random
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass

ALTER_CLIENT_QUOTAS = 49
DESCRIBE_CLIENT_QUOTAS = 48
API_VERSIONS = 18


@dataclass(frozen=True)
class Request:
    """One request frame seen from a client."""

    api_key: int
    api_version: int
    correlation_id: int
    payload: bytes

    @property
    def validate_only(self) -> bool | None:
        """AlterClientQuotas' validate_only flag (its last field; v1+ is
        followed by an empty tagged-field buffer), ``None`` for other requests."""
        if self.api_key != ALTER_CLIENT_QUOTAS:
            return None
        return bool(self.payload[-1] if self.api_version == 0 else self.payload[-2])


FORWARD = "forward"
CUT = "cut"  # do not forward; close every connection and go down


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _read_exact(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    body = _read_exact(sock, size)
    return None if body is None else head + body


class FaultProxy:
    """The proxy. ``on_request(request)`` and ``on_response(request)`` (the
    request a response answers) return :data:`FORWARD` or :data:`CUT`."""

    def __init__(self, broker_port: int) -> None:
        self.broker_port = broker_port
        self.on_request: Callable[[Request], str] = lambda r: FORWARD
        self.on_response: Callable[[Request], str] = lambda r: FORWARD
        self.forwarded: list[Request] = []
        self.cuts = 0
        self._lock = threading.Lock()
        self._socks: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self.port = _port_outside_ephemeral_range()

    # -- the network, up and down -----------------------------------------------

    def up(self) -> None:
        """Accept connections on :attr:`port` (again)."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        """Refuse new connections and close every open one (a dead broker or
        network, as far as clients can tell)."""
        with self._lock:
            listener, self._listener = self._listener, None
            socks, self._socks = self._socks, set()
        if listener is not None:
            # close() alone leaves the port LISTENing while the accept thread
            # is blocked in accept(); shutdown() wakes it (Linux: EINVAL).
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    @property
    def is_up(self) -> bool:
        return self._listener is not None

    def reset(self) -> None:
        """Forward everything again."""
        self.on_request = lambda r: FORWARD
        self.on_response = lambda r: FORWARD

    # -- plumbing ----------------------------------------------------------------

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                broker = socket.create_connection(("127.0.0.1", self.broker_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    broker.close()
                    return
                self._socks |= {client, broker}
            pending: dict[int, Request] = {}
            threading.Thread(
                target=self._requests, args=(client, broker, pending), daemon=True
            ).start()
            threading.Thread(
                target=self._responses, args=(broker, client, pending), daemon=True
            ).start()

    def _cut(self) -> None:
        self.cuts += 1
        self.down()

    def _requests(
        self, client: socket.socket, broker: socket.socket, pending: dict[int, Request]
    ) -> None:
        try:
            while (frame := _read_frame(client)) is not None:
                api_key, api_version, correlation_id = struct.unpack(">hhi", frame[4:12])
                request = Request(api_key, api_version, correlation_id, frame[4:])
                if self.on_request(request) == CUT:
                    self._cut()
                    return
                pending[correlation_id] = request
                self.forwarded.append(request)
                broker.sendall(frame)
        except OSError:
            pass
        finally:
            for sock in (client, broker):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def _responses(
        self, broker: socket.socket, client: socket.socket, pending: dict[int, Request]
    ) -> None:
        try:
            while (frame := _read_frame(broker)) is not None:
                (correlation_id,) = struct.unpack(">i", frame[4:8])
                request = pending.pop(correlation_id, None)
                if request is not None and self.on_response(request) == CUT:
                    self._cut()
                    return
                client.sendall(frame)
        except OSError:
            pass


def _port_outside_ephemeral_range() -> int:
    """A free loopback port below the kernel's ephemeral range: the proxy
    goes down and comes up again on the same port, and a port from the
    ephemeral range may meanwhile be taken as the source port of any
    outgoing connection on the machine (``EADDRINUSE`` on the way back up)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as fh:
            low = int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(200):
        port = random.randint(max(1025, low // 2), low - 1)
        probe = socket.socket()
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            probe.close()
        return port
    raise RuntimeError(f"no free loopback port below {low}")
