"""The client half of the run's embedding server (memprobe/serving/embed_service.py).

:func:`memprobe.serving.embeddings.encode` calls :func:`encode_remote` first; the server
itself imports embeddings, so the client lives here and the two never import each other.
"""

from __future__ import annotations

import base64
import json
import os

from memprobe.serving import served_process

SOCKET_ENV = "MEMPROBE_EMBED_SOCKET"  # the server's Unix socket, in a directory only we enter
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

    where, token = os.environ.get(SOCKET_ENV), os.environ.get(TOKEN_ENV)
    if not where or not token:
        raise Unreachable("no embedding server in this environment")
    request: dict = {"texts": texts, "path": path}
    if max_seq_length is not None:
        request["max_seq_length"] = max_seq_length
    body = json.dumps(request).encode("utf-8")
    headers = {"Content-Type": "application/json", TOKEN_HEADER: token}
    try:
        code, data = served_process.unix_request(
            where, "POST", "/encode", body=body, headers=headers, timeout=timeout_s
        )
        if code != 200:
            raise OSError(f"HTTP Error {code}: {data[:200].decode('utf-8', 'replace')}")
        reply = json.loads(data)
        vecs = np.frombuffer(base64.b64decode(reply["data"]), dtype=np.float32)
        return vecs.reshape(int(reply["rows"]), int(reply["dim"])).copy()
    except (OSError, ValueError, KeyError) as err:  # refused, reset, HTTP error, bad body
        raise Unreachable(f"embedding server at {where}: {err}") from None
