"""A deterministic stand-in for the MiniLM encoder (fast-tier tests of the offline judge), and
the embedding server's protocol answering with it (fast-tier tests of the embedding client)."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import numpy as np

from memprobe.serving.embed_client import TOKEN_HEADER
from memprobe.serving.json_http import QuietJSONHandler
from memprobe.serving.served_process import UnixHTTPServer
from memprobe.testing.background import Background


def bag_of_words(texts: list[str], dim: int = 4096) -> np.ndarray:
    """A deterministic stand-in for MiniLM: hashed word counts, L2-normalised."""
    out = np.zeros((len(texts), dim))
    for i, t in enumerate(texts):
        for w in re.findall(r"[a-z]+", t.lower()):
            out[i, int(hashlib.sha256(w.encode()).hexdigest(), 16) % dim] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1, norms)


class EncodeServer(Background):
    """The /encode protocol of the run's embedding server (memprobe/serving/embed_service.py)
    on a Unix socket, answering :func:`bag_of_words` vectors: the client's side with no model.

    ``requests``: (path, token header, body) of each request; ``payload``: sent instead of
    the vectors (a malformed reply); ``dim``: the vectors' size."""

    def __init__(
        self, socket_path: str, token: str, payload: dict | None = None, dim: int = 4096
    ) -> None:
        self.requests: list[tuple[str, str | None, dict]] = []
        outer = self

        class Handler(QuietJSONHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, self.headers.get(TOKEN_HEADER), body))
                if self.headers.get(TOKEN_HEADER) != token:
                    return self._send(403, {"error": "bad token"})
                if payload is not None:
                    return self._send(200, payload)
                vecs = bag_of_words(body["texts"], dim).astype(np.float32)
                data = base64.b64encode(vecs.tobytes()).decode("ascii")
                self._send(200, {"rows": vecs.shape[0], "dim": vecs.shape[1], "data": data})

        super().__init__(UnixHTTPServer(socket_path, Handler))  # type: ignore[arg-type]
