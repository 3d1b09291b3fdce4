"""A small HTTP service on 127.0.0.1 for the HTTP recording tests, and a socket-level connect counter.

The service echoes what it was sent as JSON, counts every request it answered, and
can be stopped: a strict replay must then answer everything from the recording.
``Connects`` counts, through Python's audit hooks, the sockets that tried to connect
to a port: the proof that a replay sent nothing, below any client.
"""

from __future__ import annotations

import gzip
import itertools
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


STREAM_SAFETY_BYTES = 256 * 2**20


def stream_chunk(i: int) -> bytes:
    """The ``i``-th event of ``/stream``: its bytes tell where in the stream a reader is."""
    return b"data: {\"n\": %d, \"pad\": \"%s\"}\n\n" % (i, b"x" * (i % 37))


def stream_start(n: int) -> bytes:
    """The first ``n`` bytes of ``/stream``."""
    out = bytearray()
    for i in itertools.count():
        if len(out) >= n:
            return bytes(out[:n])
        out += stream_chunk(i)
    raise AssertionError  # unreachable


class EchoService:
    """``POST /charge`` and friends: answers ``{"path", "method", "body", "n"}``; ``/gzip/...`` compresses;
    ``/stream`` sends events without end."""

    def __init__(self) -> None:
        self.requests = 0
        self.seen: list[tuple[str, str, bytes, dict[str, str]]] = []
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> EchoService:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms delayed-ACK stall

            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                if self.path.startswith("/stream"):
                    self._stream()
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
                with owner._lock:
                    owner.requests += 1
                    n = owner.requests
                    owner.seen.append((self.command, self.path, body, dict(self.headers)))
                if self.path.startswith("/fail"):
                    data = json.dumps({"error": "payment declined"}).encode()
                    self.send_response(402)
                else:
                    text = body.decode("utf-8", "replace")
                    data = json.dumps({"path": self.path.split("?")[0], "method": self.command, "body": text, "n": n}).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if self.path.startswith("/gzip"):
                    data = gzip.compress(data)
                    self.send_header("Content-Encoding", "gzip")
                self.send_header("Set-Cookie", "session=s3cr3t-cookie-value; Path=/")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self) -> None:
                """Server-sent events without end (``stream_chunk(0)``, ``stream_chunk(1)``, ...) until
                the client goes away (or ``STREAM_SAFETY_BYTES``, so a client that reads for ever ends)."""
                with owner._lock:
                    owner.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                sent = 0
                try:
                    for i in itertools.count():
                        chunk = stream_chunk(i)
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                        sent += len(chunk)
                        if sent > STREAM_SAFETY_BYTES:
                            break
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:  # the client stopped reading and closed
                    pass
                self.close_connection = True

            do_GET = do_POST = do_PUT = _answer

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class Connects:
    """Counts the sockets that tried to connect to ``port`` while counting (an audit hook, installed once)."""

    _watching: list[Connects] = []
    _installed = False

    def __init__(self, port: int) -> None:
        self.port = port
        self.count = 0

    def __enter__(self) -> Connects:
        if not Connects._installed:
            sys.addaudithook(Connects._hook)
            Connects._installed = True
        Connects._watching.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        Connects._watching.remove(self)

    @staticmethod
    def _hook(event: str, args: tuple) -> None:
        if event != "socket.connect" or not Connects._watching:
            return
        address = args[1] if len(args) > 1 else None
        port = address[1] if isinstance(address, tuple) and len(address) >= 2 else None
        for watcher in list(Connects._watching):
            if port == watcher.port:
                watcher.count += 1
