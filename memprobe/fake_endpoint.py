"""``memprobe fake-endpoint``: a deterministic OpenAI-compatible server on loopback.

Answers ``POST /v1/chat/completions`` with schema-valid replies (``memprobe.fake_responder``)
and ``GET /v1/models``. A script file can pin replies per schema name, in order, e.g.
``{"critic": [{"verdict": "fishing", ...}, ...]}``, for tests of control flow.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from memprobe.fake_responder import completion_body, fake_content


class Script:
    """Replies pinned per json_schema name, consumed in order; then the generated ones."""

    def __init__(self, path: str | None) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str, list[Any]] = {}
        if path:
            self._queues = {k: list(v) for k, v in json.loads(Path(path).read_text()).items()}

    def next(self, name: str) -> Any | None:
        with self._lock:
            queue = self._queues.get(name)
            return queue.pop(0) if queue else None


def make_server(
    host: str = "127.0.0.1", port: int = 0, script: str | None = None, latency: float = 0.0
):
    pinned = Script(script)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args: Any) -> None:  # quiet by default
            pass

        def _send(self, code: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
            elif self.path.rstrip("/").endswith("/health"):
                self._send(200, {"status": "ok"})
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                self._send(400, {"error": {"message": "invalid JSON body"}})
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": "not found"}})
                return
            fmt = body.get("response_format") or {}
            name = (fmt.get("json_schema") or {}).get("name", "")
            # A fixed per-call latency, like a hosted model (benchmarks/): each request sleeps
            # in its own handler thread, so concurrency stays unlimited.
            if latency > 0:
                time.sleep(latency)
            reply = pinned.next(name) if name else None
            content = json.dumps(reply) if reply is not None else fake_content(body)
            self._send(200, completion_body(body, content))

    return ThreadingHTTPServer((host, port), Handler)


def serve(host: str, port: int, script: str | None = None, *, latency: float = 0.0) -> None:
    server = make_server(host, port, script, latency)
    print(f"fake endpoint on http://{host}:{server.server_address[1]}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
