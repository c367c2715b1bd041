"""A misbehaving Prometheus on loopback: every ``/api/v1/query_range``
request (any path, any method) gets the same answer, chosen when the server
starts, for the hostile-input corpus (``scripts/hostile_inputs.py``) and for
tests of ``analyze --prometheus``.

Answers (:data:`ANSWERS`):

* ``good``: ``body`` as given, status 200 (a well-formed answer);
* ``deep``: a ``query_range`` answer whose ``data.result`` is nested
  ``depth`` arrays deep (100,000 by default);
* ``huge``: a valid ``query_range`` answer of ``size`` bytes (300 MB by
  default), streamed (chunked), one series with ever more samples;
* ``html200``: an HTML error page with status 200 (a proxy's page);
* ``short``: a ``Content-Length`` of 1 MB, 100 bytes of an answer, then
  the connection closed;
* ``slow``: a valid start, then one byte per second, forever.

Loopback only: the server listens on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWERS = ("good", "deep", "huge", "html200", "short", "slow")

_HEAD = b'{"status":"success","data":{"resultType":"matrix","result":'
_SERIES = (
    b'[{"metric":{"__name__":"kafka_server_produce_byte_rate","user":"alice",'
    b'"client_id":"ingest","instance":"1","cluster":"prod-eu"},"values":['
)
_HTML = (
    b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head>"
    b"<body><h1>Bad Gateway</h1><p>The upstream server is unavailable.</p></body></html>"
)


class HostilePrometheus:
    """A loopback HTTP server giving ``answer`` to every request.

    Attributes:
        url: ``http://127.0.0.1:PORT``.
        requests: requests answered (or begun) so far.
    """

    def __init__(
        self,
        answer: str,
        *,
        body: bytes = b"",
        depth: int = 100_000,
        size: int = 300_000_000,
    ) -> None:
        if answer not in ANSWERS:
            raise ValueError(f"answer {answer!r}: one of {', '.join(ANSWERS)}")
        self.answer, self.body, self.depth, self.size = answer, body, depth, size
        self.requests = 0
        self._stop = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                owner._serve(self)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                owner._serve(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        """Stop serving (a ``slow`` answer in progress stops within a second)."""
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> HostilePrometheus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- answers

    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        self.requests += 1
        with contextlib.suppress(OSError):
            getattr(self, f"_{self.answer}")(h)

    @staticmethod
    def _head(
        h: BaseHTTPRequestHandler, length: int | None, kind: str = "application/json"
    ) -> None:
        h.send_response(200)
        h.send_header("Content-Type", kind)
        if length is None:
            h.send_header("Transfer-Encoding", "chunked")
        else:
            h.send_header("Content-Length", str(length))
        h.send_header("Connection", "close")
        h.end_headers()

    def _good(self, h: BaseHTTPRequestHandler) -> None:
        self._head(h, len(self.body))
        h.wfile.write(self.body)

    def _deep(self, h: BaseHTTPRequestHandler) -> None:
        body = _HEAD + b"[" * self.depth + b"]" * self.depth + b"}}"
        self._head(h, len(body))
        h.wfile.write(body)

    def _huge(self, h: BaseHTTPRequestHandler) -> None:
        self._head(h, None)

        def chunk(data: bytes) -> None:
            h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        chunk(_HEAD + _SERIES)
        sent, t = 0, 1795428000
        while sent < self.size and not self._stop.is_set():
            block = b"".join(b'[%d,"1"],' % (t + i) for i in range(20_000))
            t += 20_000
            chunk(block)
            sent += len(block)
        chunk(b'[%d,"1"]]}]}}' % t)
        h.wfile.write(b"0\r\n\r\n")

    def _html200(self, h: BaseHTTPRequestHandler) -> None:
        self._head(h, len(_HTML), "text/html")
        h.wfile.write(_HTML)

    def _short(self, h: BaseHTTPRequestHandler) -> None:
        self._head(h, 1_000_000)
        h.wfile.write((_HEAD + _SERIES)[:100])
        h.wfile.flush()
        h.close_connection = True

    def _slow(self, h: BaseHTTPRequestHandler) -> None:
        self._head(h, None)
        for byte in _forever(_HEAD + _SERIES):
            if self._stop.wait(1.0):
                return
            h.wfile.write(b"1\r\n%s\r\n" % byte)
            h.wfile.flush()


def _forever(start: bytes) -> Iterator[bytes]:
    for i in range(len(start)):
        yield start[i : i + 1]
    t = 1795428000
    while True:
        for i in range(len(piece := b'[%d,"1"],' % t)):
            yield piece[i : i + 1]
        t += 1
        time.sleep(0)
