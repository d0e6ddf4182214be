"""One sentence-transformers process for the whole run, so embedding jobs skip its import.

Importing sentence-transformers (torch, transformers, scikit-learn) takes 10-14 s on a 2-core
machine, and every job that embeds paid it: each probe of a searchable system, each A-Mem and
Mem-T rollout. The Snakefile's ``onstart`` launches this server when a configured system
embeds in-process; it binds its port at once and loads the model in the background while the
first jobs (persona, bank, tasks: no embeddings) run. Jobs inherit ``MEMPROBE_EMBED_URL`` and
``MEMPROBE_EMBED_TOKEN``; :func:`memprobe.serving.embeddings.encode` sends its texts here and falls
back to loading the model itself when the server can't be reached (a cluster node, a script
run outside Snakemake). Both paths call the same ``SentenceTransformer.encode`` on the same
model, so the vectors are the same; the server returns them as raw float32 bytes.

Protocol (loopback only): ``GET /health`` is 200 as soon as the server listens, with
``{"ready": <default model loaded>, "threads": <torch's intra-op threads once loaded>}``
(500 if loading failed). ``POST /encode`` with
``{"texts": [...], "path": null | "<model dir>"}`` (and optionally ``"max_seq_length": n``,
where the model cuts a text; absent: the model's own) and the header ``X-Memprobe-Token``
answers ``{"rows": n, "dim": d, "data": "<base64 float32>"}``, waiting for the model if it
is still loading.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import logging
import os
import secrets
import subprocess
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

from memprobe.serving import served_process

# The client half lives apart, so that embeddings (which this server runs) never imports it.
from memprobe.serving.embed_client import TOKEN_ENV, TOKEN_HEADER, URL_ENV, Unreachable
from memprobe.serving.embed_client import encode_remote as encode_remote
from memprobe.serving.json_http import QuietJSONHandler

log = logging.getLogger("memprobe")


# -- server ---------------------------------------------------------------------------------
# A request of more texts than this is bulk: a probe encoding a whole store. A rollout's turn
# sends a few (A-Mem: the new note and the neighbours it updated; then the query).
BULK_TEXTS = 16


class _State:
    def __init__(self, token: str) -> None:
        self.token = token
        self.ready = threading.Event()
        self.failed: str | None = None
        # Two lanes, one encode at a time in each, each on its own copy of the model: a bulk
        # request takes seconds on one thread, and rollouts (the longest chains) queued behind
        # probes stalled 4-7 s a time, 86 s of the heaviest A-Mem rollout's 130 s (issue 20).
        self.lanes = {False: threading.Lock(), True: threading.Lock()}


def _load_default(state: _State) -> None:
    from memprobe.serving import embeddings

    # The model loads while the first LLM jobs run: this thread alone yields the CPU to them
    # (Linux niceness is per thread). The encodes run at normal priority: A-Mem and Mem-T
    # rollouts, the longest chains, wait on them, and a niced server starved them under load.
    me = threading.get_native_id()
    os.setpriority(os.PRIO_PROCESS, me, 10)
    try:
        for lane in (0, 1):
            embeddings.load_model(None, lane)
    except Exception as err:  # reported to every caller, which then encodes in-process
        state.failed = f"{type(err).__name__}: {err}"
    with contextlib.suppress(OSError):  # back to normal where allowed (threads it started)
        os.setpriority(os.PRIO_PROCESS, me, 0)
    state.ready.set()


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def _handler(state: _State) -> type[QuietJSONHandler]:
    class Handler(QuietJSONHandler):
        def do_GET(self) -> None:
            if self.path != "/health":
                return self._send(404, {"error": "not found"})
            if state.failed:
                return self._send(500, {"error": state.failed})
            ready = state.ready.is_set()  # listening is what start waits for
            self._send(200, {"ready": ready, "threads": _torch_threads() if ready else None})

        def do_POST(self) -> None:
            if self.path != "/encode":
                return self._send(404, {"error": "not found"})
            if not secrets.compare_digest(self.headers.get(TOKEN_HEADER, ""), state.token):
                return self._send(403, {"error": "bad token"})
            try:
                req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                texts, path = list(map(str, req["texts"])), req.get("path")
                max_seq = req.get("max_seq_length")
                max_seq = None if max_seq is None else int(max_seq)
            except (ValueError, KeyError, TypeError) as err:
                return self._send(400, {"error": f"bad request: {err}"})
            state.ready.wait()
            if state.failed:
                return self._send(500, {"error": state.failed})
            from memprobe.serving import embeddings

            bulk = len(texts) > BULK_TEXTS
            with state.lanes[bulk]:
                vecs = embeddings.encode_local(texts, path, int(bulk), max_seq)
            self._send(
                200,
                {
                    "rows": int(vecs.shape[0]),
                    "dim": int(vecs.shape[1]),
                    "data": base64.b64encode(vecs.tobytes()).decode("ascii"),
                },
            )

    return Handler


def serve(port: int, token_env: str) -> None:
    state = _State(os.environ.pop(token_env))
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(state))
    server.daemon_threads = True
    threading.Thread(target=_load_default, args=(state,), daemon=True).start()
    server.serve_forever()


# -- lifecycle (the Snakefile's onstart / onsuccess / onerror) ------------------------------
def _background_child() -> None:
    served_process.die_with_parent()


_run_server: subprocess.Popen | None = None


def start_for_run(log_path: str | Path = "logs/embed_server.log", bind_timeout_s=30.0) -> str:
    """Launch the server, wait until its port answers (not for the model), export its URL."""
    global _run_server
    if os.environ.get(URL_ENV):
        return os.environ[URL_ENV]
    port = served_process.free_port()
    token = secrets.token_hex(16)
    url = f"http://127.0.0.1:{port}"
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w", encoding="utf-8") as logf:
        proc = subprocess.Popen(
            [sys.executable, "-m", "memprobe.serving.embed_service", "--port", str(port)],
            stdout=logf,
            stderr=subprocess.STDOUT,
            env=served_process.child_env(_MEMPROBE_EMBED_TOKEN_IN=token),
            preexec_fn=_background_child,
        )
    try:
        served_process.wait_healthy(proc, url, bind_timeout_s, poll_s=0.05)
    except served_process.NotHealthy as err:
        if err.exit_code is not None:
            raise Unreachable(
                f"embedding server exited with {err.exit_code} (see {log_path})"
            ) from None
        proc.terminate()
        raise Unreachable(f"embedding server did not bind {url} (see {log_path})") from None
    _run_server = proc
    os.environ[URL_ENV] = url
    os.environ[TOKEN_ENV] = token
    return url


def stop_for_run() -> None:
    global _run_server
    proc, _run_server = _run_server, None
    if proc is None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    os.environ.pop(URL_ENV, None)
    os.environ.pop(TOKEN_ENV, None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memprobe.serving.embed_service")
    ap.add_argument("--port", type=int, required=True)
    args = ap.parse_args(argv)
    serve(args.port, "_MEMPROBE_EMBED_TOKEN_IN")
    return 0


if __name__ == "__main__":
    sys.exit(main())
