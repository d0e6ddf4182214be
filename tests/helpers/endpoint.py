"""The fake OpenAI-compatible endpoint on a loopback thread, a recorder of its requests, and a
server that drips its reply."""

from __future__ import annotations

import io
import json
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from memprobe.testing.background import Background
from memprobe.testing.fake_endpoint import make_server


class Endpoint(Background):
    """The fake endpoint on a background thread (``script``: its pinned replies)."""

    def __init__(self, script: str | None = None) -> None:
        super().__init__(make_server("127.0.0.1", 0, script))


def record_requests(ep: Endpoint) -> dict[str, list[dict]]:
    """Record every chat request the endpoint receives, per json_schema name (= role)."""
    seen: dict[str, list[dict]] = defaultdict(list)
    base = ep.server.RequestHandlerClass

    class Recording(base):  # type: ignore[misc, valid-type]
        def do_POST(self) -> None:
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(data or b"{}")
            name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "")
            seen[name].append(body)
            self.rfile = io.BytesIO(data)  # let the real handler read the same body
            super().do_POST()

    ep.server.RequestHandlerClass = Recording
    return seen


class Drip(Background):
    """A loopback server that answers every request one byte every 0.1 s: each read is quick,
    the whole slow. ``part``: what drips, the ``headers`` or (after whole headers) the
    ``body``."""

    def __init__(self, part: str) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                self.do_GET()

            def do_GET(self) -> None:
                head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                drip = b" " * 200
                if part == "headers":
                    head, drip = b"", head + b"X-Pad: " + b"a" * 200
                else:
                    head += b"Content-Length: 100000\r\n\r\n"
                try:
                    self.wfile.write(head)
                    for byte in drip:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(0.1)
                except OSError:
                    pass

        super().__init__(ThreadingHTTPServer(("127.0.0.1", 0), Handler))
