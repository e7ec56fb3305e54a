"""Serve a page of :mod:`searchgym.view` over HTTP (``searchgym view --serve``).

The page is built once and served from memory: ``GET /`` answers it, any other path a 404
and any other method a 405, each error as a JSON object. It binds 127.0.0.1 unless told
otherwise, reads no request body, and a connection silent for :data:`TIMEOUT` seconds is
closed, so a stuck client holds nothing.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from searchgym.error import Interrupted

#: Seconds a connection may stay silent before it is closed.
TIMEOUT = 10.0


def make_server(page: str, host: str = "127.0.0.1", port: int = 8008) -> ThreadingHTTPServer:
    """A server of ``page`` on ``host:port`` (``port`` 0 picks a free one), not yet serving."""
    body = page.encode("utf-8")

    class Handler(BaseHTTPRequestHandler):
        timeout = TIMEOUT
        server_version = "searchgym-view"

        def _send(self, status: int, payload: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        def _error(self, status: int, message: str) -> None:
            self._send(status, json.dumps({"error": message}).encode(), "application/json")

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.split("?", 1)[0] in ("/", "/index.html"):
                self._send(200, body, "text/html; charset=utf-8")
            else:
                self._error(404, f"searchgym view serves one page at /, got {self.path[:200]!r}.")

        do_HEAD = do_GET  # noqa: N815

        def _refuse(self) -> None:
            self._error(405, f"searchgym view answers GET / only, got {self.command}.")

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
            pass  # one line per request would bury the address the command printed

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def serve_page(page: str, host: str = "127.0.0.1", port: int = 8008) -> None:
    """Serve ``page`` until Ctrl-C, printing its address first. Ctrl-C ends it with an
    :class:`~searchgym.error.Interrupted`: the command line exits 130, as ``searchgym serve``."""
    server = make_server(page, host, port)
    try:  # the address is printed inside: a Ctrl-C right after it is this one's, never a traceback
        print(f"searchgym view: serving http://{host}:{server.server_address[1]}/ (Ctrl-C stops)", flush=True)
        server.serve_forever()
    except KeyboardInterrupt:
        print("searchgym view: stopped", flush=True)  # as searchgym serve says it
        raise Interrupted("searchgym view: stopped") from None
    finally:
        server.server_close()
