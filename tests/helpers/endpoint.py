"""The fake OpenAI-compatible endpoint on a loopback thread, and a recorder of its requests."""

from __future__ import annotations

import io
import json
from collections import defaultdict

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
