"""A tiny threaded HTTP server on 127.0.0.1 for mock forges (stdlib only)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Request:
    method: str
    path: str  # raw (still percent-encoded), no query
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-cased names
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8")) if self.body else None


@dataclass
class Response:
    status: int
    body: Any = None  # JSON-able, or None for no body
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Response]


class MockHTTPServer:
    """Serves ``handler`` on a free port of 127.0.0.1 in a daemon thread."""

    def __init__(self, handler: Handler) -> None:
        outer = self
        self._handler = handler

        class _RequestHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                split = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                req = Request(
                    method=self.command,
                    path=split.path,
                    query=parse_qs(split.query, keep_blank_values=True),
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                )
                try:
                    resp = outer._handler(req)
                except Exception as exc:  # a bug in the mock: tell the test, don't hang
                    resp = Response(500, {"message": f"mock crashed: {type(exc).__name__}: {exc}"})
                payload = b"" if resp.body is None else json.dumps(resp.body).encode("utf-8")
                self.send_response(resp.status)
                headers = {"Content-Type": "application/json; charset=utf-8", **resp.headers}
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _serve

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _RequestHandler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="mock-forge", daemon=True
        )

    @property
    def base_url(self) -> str:
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}"

    def start(self) -> MockHTTPServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def refused_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (connection refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
