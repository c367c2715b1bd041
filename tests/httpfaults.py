"""A TCP proxy in front of a real HTTP server (Prometheus), failing the first
connections on purpose: the transient faults a client must retry.

Each of the first ``failures`` connections gets one fault, in turn from
``faults``: ``"503"`` (an HTTP 503 answer, as a busy Prometheus, Thanos or a
load balancer gives), ``"reset"`` (the connection closed without an answer).
Later connections are forwarded byte for byte to the server. Loopback only:
the proxy listens on 127.0.0.1 and connects to 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Sequence

_BODY = b'{"status":"error","errorType":"unavailable","error":"busy"}'
_UNAVAILABLE = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    + f"Content-Length: {len(_BODY)}\r\nConnection: close\r\n\r\n".encode()
    + _BODY
)


class FlakyProxy:
    """Forward to ``127.0.0.1:target_port`` after failing ``failures`` connections.

    Attributes:
        port: the proxy's port.
        connections: connections accepted so far.
    """

    def __init__(self, target_port: int, *, failures: int, faults: Sequence[str] = ("503",)):
        self.target_port = target_port
        self.failures = failures
        self.faults = tuple(faults)
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        """Stop accepting."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            number = self.connections
            self.connections += 1
            if number < self.failures:
                threading.Thread(
                    target=self._fail,
                    args=(client, self.faults[number % len(self.faults)]),
                    daemon=True,
                ).start()
            else:
                threading.Thread(target=self._forward, args=(client,), daemon=True).start()

    @staticmethod
    def _fail(client: socket.socket, fault: str) -> None:
        with client:
            client.settimeout(5)
            with contextlib.suppress(OSError):
                client.recv(65536)  # the request's head
                if fault == "503":
                    client.sendall(_UNAVAILABLE)

    def _forward(self, client: socket.socket) -> None:
        try:
            server = socket.create_connection(("127.0.0.1", self.target_port), timeout=30)
        except OSError:
            client.close()
            return

        def pump(src: socket.socket, dst: socket.socket) -> None:
            with contextlib.suppress(OSError):
                while chunk := src.recv(65536):
                    dst.sendall(chunk)
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

        back = threading.Thread(target=pump, args=(server, client), daemon=True)
        back.start()
        pump(client, server)
        back.join(timeout=60)
        client.close()
        server.close()
