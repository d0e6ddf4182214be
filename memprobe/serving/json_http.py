"""The request handler our loopback JSON servers share (embedding server, Mem-T stand-in)."""

from __future__ import annotations

import json
import socket
from http.server import BaseHTTPRequestHandler
from typing import Any


class QuietJSONHandler(BaseHTTPRequestHandler):
    """No access log on stderr (it would land in job logs); JSON replies with a length.

    TCP_NODELAY: a reply goes out as two writes (headers, then body); with Nagle's algorithm
    the body waits for the client to ACK the headers, which a client holding back its ACK
    (delayed ACK) does for up to 40 ms. Measured: ~37 ms added to every call of the fake
    endpoint and every embedding request, on loopback.
    """

    disable_nagle_algorithm = True

    def setup(self) -> None:
        if self.request.family == socket.AF_UNIX:  # no Nagle there, and no option to set
            setattr(self, "disable_nagle_algorithm", False)  # noqa: B010  this request only
        super().setup()

    def log_message(self, fmt: str, *args: Any) -> None:
        pass

    def _send(self, code: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
