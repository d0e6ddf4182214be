"""The client half of the run's embedding server (memprobe/serving/embed_service.py).

:func:`memprobe.serving.embeddings.encode` calls :func:`encode_remote` first; the server
itself imports embeddings, so the client lives here and the two never import each other.
Two kinds of server: the run's (local executor: ``MEMPROBE_EMBED_SOCKET``, started by onstart)
and a cluster node's (``MEMPROBE_EMBED_NODE``: started by the node's first job that encodes,
memprobe/serving/node_embed.py).
"""

from __future__ import annotations

import base64
import json
import os

from memprobe.serving import node_embed, served_process

SOCKET_ENV = "MEMPROBE_EMBED_SOCKET"  # the server's Unix socket, in a directory only we enter
TOKEN_ENV = "MEMPROBE_EMBED_TOKEN"
TOKEN_HEADER = "X-Memprobe-Token"


class Unreachable(RuntimeError):
    """No usable embedding server: the caller encodes in-process."""


# -- client ---------------------------------------------------------------------------------
def configured() -> bool:
    """Whether this environment names a server (the run's or a node's) and its token."""
    where = os.environ.get(SOCKET_ENV) or os.environ.get(node_embed.NODE_ENV)
    return bool(where and os.environ.get(TOKEN_ENV))


def encode_remote(
    texts: list[str],
    path: str | None,
    timeout_s: float = 600.0,
    max_seq_length: int | None = None,
):
    """Vectors from the run's server or this node's (started here if none answers), or
    :class:`Unreachable`."""
    where, token = os.environ.get(SOCKET_ENV), os.environ.get(TOKEN_ENV)
    run = os.environ.get(node_embed.NODE_ENV)
    if not token or not (where or run):
        raise Unreachable("no embedding server in this environment")
    request: dict = {"texts": texts, "path": path}
    if max_seq_length is not None:
        request["max_seq_length"] = max_seq_length
    body = json.dumps(request).encode("utf-8")
    if where or not run:
        return _ask(str(where), body, token, timeout_s)
    try:
        sock = node_embed.socket_path(run)
        try:
            return _ask(sock, body, token, timeout_s)
        except Unreachable:  # none on this node yet, or it left when idle: start it
            sock = node_embed.ensure(run, token, node_embed.idle_s_from_env())
        return _ask(sock, body, token, timeout_s)
    except (node_embed.NodeDirError, OSError, ValueError) as err:
        raise Unreachable(f"node embedding server: {err}") from None


def _ask(where: str, body: bytes, token: str, timeout_s: float):
    import numpy as np

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
