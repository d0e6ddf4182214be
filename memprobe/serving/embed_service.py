"""One sentence-transformers process for the whole run, so embedding jobs skip its import.

Importing sentence-transformers (torch, transformers, scikit-learn) takes 10-14 s on a 2-core
machine, and every job that embeds paid it: each probe of a searchable system, each A-Mem and
Mem-T rollout. The Snakefile's ``onstart`` launches this server when a configured system
embeds in-process; it listens at once and loads the model in the background while the
first jobs (persona, bank, tasks: no embeddings) run. Jobs inherit ``MEMPROBE_EMBED_SOCKET`` and
``MEMPROBE_EMBED_TOKEN``; :func:`memprobe.serving.embeddings.encode` sends its texts here and falls
back to loading the model itself when the server can't be reached (a script run outside
Snakemake). On a cluster the same server runs once per node, started by a job
(memprobe/serving/node_embed.py, ``--idle-exit-s``). Every path calls the same
``SentenceTransformer.encode`` on the same model, so the vectors are the same; the server
returns them as raw float32 bytes.

It listens on a Unix socket in a directory only this user can enter (no port another local
user could take first, or connect to), and the parent checks that the socket's listener is
its child before the address is exported: the texts (personas, memories) and the token go
nowhere else.

Protocol: ``GET /health`` is 200 as soon as the server listens, with
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
import queue
import secrets
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from memprobe.serving import served_process

# The client half lives apart, so that embeddings (which this server runs) never imports it.
from memprobe.serving.embed_client import SOCKET_ENV, TOKEN_ENV, TOKEN_HEADER, Unreachable
from memprobe.serving.embed_client import encode_remote as encode_remote
from memprobe.serving.json_http import QuietJSONHandler
from memprobe.serving.node_embed import TOKEN_IN_ENV

log = logging.getLogger("memprobe")


# -- server ---------------------------------------------------------------------------------
# A request of more texts than this is bulk: a probe encoding a whole store. A rollout's turn
# sends a few (A-Mem: the new note and the neighbours it updated; then the query).
BULK_TEXTS = 16
LANES_ENV = "MEMPROBE_EMBED_LANES"


def small_lanes() -> int:
    """How many few-text encodes run at once: one a core (each on one thread), at most 4 (a
    copy of the model each: 90 MB for MiniLM, 2.2 GB for bge-m3); ``MEMPROBE_EMBED_LANES``
    sets it. With one, 32 Mem-T rollouts at once queued on a single core (50 users, 2 cores:
    326 requests a minute of the 1,500 allowed, the server at 93% of one core)."""
    given = os.environ.get(LANES_ENV)
    if not given:
        return min(os.cpu_count() or 1, 4)
    if not given.isdigit() or int(given) < 1:
        raise ValueError(f"{LANES_ENV}={given!r}: expected a whole number of lanes, 1 or more")
    return int(given)


class _State:
    def __init__(self, token: str, lanes: int) -> None:
        self.token = token
        self.ready = threading.Event()
        self.failed: str | None = None
        # Lanes, one encode at a time in each, each on its own copy of the model (copy i): a
        # bulk request takes seconds on one thread, and rollouts (the longest chains) queued
        # behind probes stalled 4-7 s a time, 86 s of the heaviest A-Mem rollout's 130 s
        # (issue 20). Few-text requests take the copy last freed of the first n (a stack:
        # copy i > 0 loads only once i + 1 encodes are waiting at once); bulk has the last.
        self.n_small = lanes
        self.small: queue.LifoQueue[int] = queue.LifoQueue()
        for copy in reversed(range(self.n_small)):
            self.small.put(copy)
        self.bulk = threading.Lock()
        # Requests in progress and when the last one ended: a node server exits when idle.
        self._busy = 0
        self._since = time.monotonic()
        self._activity = threading.Lock()

    @contextlib.contextmanager
    def request(self) -> Iterator[None]:
        with self._activity:
            self._busy += 1
        try:
            yield
        finally:
            with self._activity:
                self._busy -= 1
                self._since = time.monotonic()

    def idle_for(self) -> float:
        """Seconds since the last request ended; 0 while one is in progress."""
        with self._activity:
            return 0.0 if self._busy else time.monotonic() - self._since


def _load_default(state: _State) -> None:
    from memprobe.serving import embeddings

    # The model loads while the first LLM jobs run: this thread alone yields the CPU to them
    # (Linux niceness is per thread). The encodes run at normal priority: A-Mem and Mem-T
    # rollouts, the longest chains, wait on them, and a niced server starved them under load.
    me = threading.get_native_id()
    os.setpriority(os.PRIO_PROCESS, me, 10)
    try:
        for copy in (0, state.n_small):  # the others load when that many encodes wait at once
            embeddings.load_model(None, copy)
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
            with state.request():
                self._get()

        def do_POST(self) -> None:
            with state.request():
                self._post()

        def _get(self) -> None:
            if self.path != "/health":
                return self._send(404, {"error": "not found"})
            if state.failed:
                return self._send(500, {"error": state.failed})
            ready = state.ready.is_set()  # listening is what start waits for
            self._send(200, {"ready": ready, "threads": _torch_threads() if ready else None})

        def _post(self) -> None:
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

            if len(texts) > BULK_TEXTS:
                with state.bulk:
                    vecs = embeddings.encode_local(texts, path, state.n_small, max_seq)
            else:
                copy = state.small.get()
                try:
                    vecs = embeddings.encode_local(texts, path, copy, max_seq)
                finally:
                    state.small.put(copy)
            self._send(
                200,
                {
                    "rows": int(vecs.shape[0]),
                    "dim": int(vecs.shape[1]),
                    "data": base64.b64encode(vecs.tobytes()).decode("ascii"),
                },
            )

    return Handler


def _exit_when_idle(
    server: served_process.UnixHTTPServer, state: _State, idle_s: float, lock: str
) -> None:
    """A node's server (memprobe/serving/node_embed.py): gone after ``idle_s`` without a
    request. Its socket goes first, under the lock a starting job holds, so a job either finds
    this server answering or starts the next one, never a socket nobody serves."""
    import fcntl

    bound = os.stat(server.server_address).st_ino  # type: ignore[arg-type]
    while True:
        time.sleep(min(1.0, idle_s / 4))
        if state.idle_for() < idle_s:
            continue
        with open(lock, "a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            if state.idle_for() < idle_s:  # a job asked while we waited for the lock
                continue
            with contextlib.suppress(FileNotFoundError):
                if os.stat(server.server_address).st_ino == bound:  # type: ignore[arg-type]
                    os.unlink(server.server_address)  # type: ignore[arg-type]
                # else another server took the address (this one was taken for dead): its own
        server.shutdown()
        return


def serve(
    socket_path: str, token_env: str, lanes: int, idle_exit: tuple[float, str] | None = None
) -> None:
    state = _State(os.environ.pop(token_env), lanes)
    server = served_process.UnixHTTPServer(socket_path, _handler(state))
    threading.Thread(target=_load_default, args=(state,), daemon=True).start()
    if idle_exit:
        watch = (server, state, *idle_exit)
        threading.Thread(target=_exit_when_idle, args=watch, daemon=True).start()
    server.serve_forever()


# -- lifecycle (the Snakefile's onstart / onsuccess / onerror) ------------------------------
class Server(served_process.ServedProcess):
    """The run's embedding server: ``start()`` returns once it listens and is proven ours."""

    error = Unreachable
    grace_s = 10.0

    def __init__(self, log_path: str | Path) -> None:
        self.log_path = Path(log_path)
        self.socket_dir = served_process.private_dir("memprobe-embed-")
        self.uds = str(self.socket_dir / "embed.sock")
        self.base_url = "http://localhost"
        self.token = secrets.token_hex(16)

    def start(self, bind_timeout_s: float) -> str:
        cmd = [sys.executable, "-m", "memprobe.serving.embed_service", "--socket", str(self.uds)]
        self.launch(cmd, served_process.child_env(**{TOKEN_IN_ENV: self.token}))
        self.ready_or_stopped(lambda: self.healthy_and_ours(bind_timeout_s, poll_s=0.05))
        return str(self.uds)

    def not_ours(self, err: served_process.NotOurs) -> str:
        return f"embedding server: {err} (log: {self.log_path})"

    def exited(self, status: int) -> str:
        return f"embedding server exited with {status} (see {self.log_path})"

    def timed_out(self, timeout_s: float) -> str:
        return f"embedding server did not listen within {timeout_s:.0f}s (see {self.log_path})"


_run_server: Server | None = None


def start_for_run(log_path: str | Path, bind_timeout_s=30.0) -> str:
    """Launch the server, wait until it listens (not for the model), export its socket."""
    global _run_server
    if os.environ.get(SOCKET_ENV):
        return os.environ[SOCKET_ENV]
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    Path(log_path).write_text("")  # this run's log only
    server = Server(log_path)
    where = server.start(bind_timeout_s)
    _run_server = server
    os.environ[SOCKET_ENV] = where
    os.environ[TOKEN_ENV] = server.token
    return where


def stop_for_run() -> None:
    global _run_server
    server, _run_server = _run_server, None
    if server is None:
        return
    server.stop()
    os.environ.pop(SOCKET_ENV, None)
    os.environ.pop(TOKEN_ENV, None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memprobe.serving.embed_service")
    ap.add_argument("--socket", required=True, help="the Unix socket to listen on")
    ap.add_argument(
        "--idle-exit-s",
        type=float,
        help="a node's server: exit after this many seconds without a request",
    )
    ap.add_argument("--lock", help="with --idle-exit-s: the node's start lock (node_embed.py)")
    args = ap.parse_args(argv)
    if (args.idle_exit_s is None) != (args.lock is None):
        ap.error("--idle-exit-s and --lock go together")
    try:
        lanes = small_lanes()
    except ValueError as err:  # one line in the server's log; the run's jobs encode themselves
        print(f"memprobe embedding server: {err}", file=sys.stderr)
        return 2
    idle_exit = None if args.lock is None else (args.idle_exit_s, args.lock)
    serve(args.socket, TOKEN_IN_ENV, lanes, idle_exit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
