"""The client half of the run's embedding server (memprobe/serving/embed_service.py).

:func:`memprobe.serving.embeddings.encode` calls :func:`encode_remote` first; the server
itself imports embeddings, so the client lives here and the two never import each other.
"""

from __future__ import annotations

import base64
import json
import os
import urllib.request

from memprobe.serving import served_process

URL_ENV = "MEMPROBE_EMBED_URL"
TOKEN_ENV = "MEMPROBE_EMBED_TOKEN"
TOKEN_HEADER = "X-Memprobe-Token"


class Unreachable(RuntimeError):
    """No usable embedding server: the caller encodes in-process."""


# -- client ---------------------------------------------------------------------------------
def encode_remote(
    texts: list[str],
    path: str | None,
    timeout_s: float = 600.0,
    max_seq_length: int | None = None,
):
    """Vectors from the run's server, or :class:`Unreachable`."""
    import numpy as np

    url, token = os.environ.get(URL_ENV), os.environ.get(TOKEN_ENV)
    if not url or not token:
        raise Unreachable("no embedding server in this environment")
    request: dict = {"texts": texts, "path": path}
    if max_seq_length is not None:
        request["max_seq_length"] = max_seq_length
    body = json.dumps(request).encode("utf-8")
    req = urllib.request.Request(
        f"{url}/encode",
        data=body,
        headers={"Content-Type": "application/json", TOKEN_HEADER: token},
    )
    try:
        with served_process.open_direct(req, timeout=timeout_s) as resp:
            reply = json.loads(resp.read())
        vecs = np.frombuffer(base64.b64decode(reply["data"]), dtype=np.float32)
        return vecs.reshape(int(reply["rows"]), int(reply["dim"])).copy()
    except (OSError, ValueError, KeyError) as err:  # refused, reset, HTTP error, bad body
        raise Unreachable(f"embedding server at {url}: {err}") from None
