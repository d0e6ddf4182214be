"""The request handler our loopback JSON servers share (embedding server, Mem-T stand-in)."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any


class QuietJSONHandler(BaseHTTPRequestHandler):
    """No access log on stderr (it would land in job logs); JSON replies with a length."""

    def log_message(self, fmt: str, *args: Any) -> None:
        pass

    def _send(self, code: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
