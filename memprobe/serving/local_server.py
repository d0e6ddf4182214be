"""The ``local`` backend: one llama.cpp server (``xllamacpp``) for a whole run.

- The model is a GGUF file, its settings ``llm.local`` (memprobe/serving/local_model.py:
  assembled once from pinned PyPI part wheels, or any other GGUF, checked by sha256).
- The Snakefile's ``onstart`` calls :func:`start_for_run`: verify the model, start ONE server
  process on a free loopback port, wait for ``/health``, and export its URL to every job through
  ``MEMPROBE_LOCAL_BASE_URL`` (jobs inherit Snakemake's environment; ``memprobe.llm.client``
  reads it).
  ``onsuccess``/``onerror`` call :func:`stop_for_run`; the server also dies with Snakemake
  (PR_SET_PDEATHSIG plus a parent watchdog), so an interrupted run leaves nothing behind.
- A server found by its URL (``memprobe local-server``'s env file, the run's state file) is
  checked before each request to be the process that file names (:func:`check_found`): once
  it stops, whoever binds its port next gets neither the key nor a prompt.
- ``OMP_WAIT_POLICY=PASSIVE``: llama.cpp's OpenMP threads otherwise spin while waiting, and a
  busy neighbour process then drops generation to under one token per second
  (``llm.local.spin_count`` trades that for speed on a quiet machine: :func:`wait_env`).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import secrets
import signal
import sys
import time
from pathlib import Path
from typing import Any, cast

from memprobe.config.schema import Config
from memprobe.llm.openai_backend import OpenAIBackend
from memprobe.llm.providers import (
    Capacity,
    Endpoint,
    Observe,
    OpenAICompatible,
    Provider,
    ProviderError,
    Reply,
    Served,
)
from memprobe.serving import served_process
from memprobe.serving.local_model import (
    LocalModel,
    LocalModelError,
    ResolvedModel,
    check_model_path,
    model_cache_dir,
    path_identity,
    resolve_model,
    served_model_id,
)

BASE_URL_ENV = "MEMPROBE_LOCAL_BASE_URL"  # set by onstart; a user-started server also works
MODEL_ID_ENV = "MEMPROBE_LOCAL_MODEL_ID"  # sha256 of the served GGUF: part of cache keys
# The run's random key: the server refuses requests without it. Passed in the environment
# only (never argv, a log or the state file); the child reads it from KEY_CHILD_ENV.
KEY_ENV = "MEMPROBE_LOCAL_API_KEY"
KEY_CHILD_ENV = "_MEMPROBE_LOCAL_KEY_IN"
# The server process's pid: a server found by URL (this variable's env file, a state file)
# proves it is that process's before any key or prompt goes to it (served_process.found_is_ours).
PID_ENV = "MEMPROBE_LOCAL_SERVER_PID"
STATE_FILE = "local_server.json"  # in the run's logs folder: {"base_url", "model_sha256", "pid"}


# -- the server process --------------------------------------------------------------------
def wait_env(local: LocalModel) -> dict[str, str]:
    """How the server's OpenMP threads wait for each other: a bounded spin, or sleep at once."""
    if local.spin_count:
        return {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": str(local.spin_count)}
    return {"OMP_WAIT_POLICY": "PASSIVE"}


class Server(served_process.ServedProcess):
    """One ``python -m memprobe.serving.local_server serve`` child; ``start()`` returns when
    healthy.

    The child binds a free port itself and writes its address to a pipe (no window in which
    another process could take a port we picked); the key then proves the server is ours.
    """

    def __init__(self, model: ResolvedModel, local: LocalModel, log_path: str | Path) -> None:
        self.model = model
        self.local = local
        self.key = secrets.token_urlsafe(24)
        self.base_url = ""
        self.log_path = Path(log_path)

    def command(self, ready_fd: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "memprobe.serving.local_server",
            "serve",
            "--model",
            str(self.model.path),
            "--ready-fd",
            str(ready_fd),
            "--threads",
            str(self.local.threads),
            "--context",
            str(self.local.context_tokens),
            "--parallel",
            str(self.local.parallel),
            "--cache-reuse",
            str(self.local.cache_reuse),
            "--parent",
            str(os.getpid()),
        ]

    def start(self) -> str:
        env = served_process.child_env(**wait_env(self.local), **{KEY_CHILD_ENV: self.key})
        read_fd, write_fd = os.pipe()
        try:
            self.launch(self.command(write_fd), env, pass_fds=(write_fd,))
        finally:
            os.close(write_fd)
        self.ready_or_stopped(lambda: self._wait_healthy(read_fd))
        return self.base_url

    def _wait_healthy(self, read_fd: int) -> None:
        timeout = self.local.startup_timeout_s
        t0 = time.monotonic()
        assert self.proc is not None, "start() launches the server first"
        try:
            address = served_process.read_address(self.proc, read_fd, timeout)
        except served_process.NotHealthy as err:
            raise self.unhealthy(err, timeout) from None
        self.base_url = f"{address}/v1"
        self.healthy_and_ours(max(timeout - (time.monotonic() - t0), 1.0), poll_s=0.5)

    error = LocalModelError

    def not_ours(self, err: served_process.NotOurs) -> str:
        return f"llm.local: {err}"

    def exited(self, status: int) -> str:
        return (
            f"llm.local: the llama.cpp server exited with status {status} while loading "
            f"{self.model.path.name} (log: {self.log_path})"
        )

    def timed_out(self, timeout_s: float) -> str:
        return (
            f"llm.local.startup_timeout_s: the llama.cpp server was not healthy after "
            f"{self.local.startup_timeout_s:.0f}s (log: {self.log_path})"  # the whole budget
        )


# -- the run's server (Snakefile hooks) -----------------------------------------------------
_run_server: Server | None = None


def state_path(cfg: Config) -> Path:
    return Path(cfg.logs_dir) / STATE_FILE


class LocalBackend(OpenAIBackend):
    """``llm.backend: local``: the run's llama.cpp server, or the one ``memprobe local-server``
    serves (``MEMPROBE_LOCAL_BASE_URL``). Its port changes every run, so cache keys use the
    served model's sha256 instead; a role with its own ``base_url`` goes there as with
    ``openai`` (without its rate limit or preflight: the run's own server is the backend's)."""

    name = "local"
    settings = LocalModel
    # How the server runs, never what it answers (the model's identity and the assistant's
    # bound are in every LLM rule's role identity; slot-fill's budget in its own slice).
    runtime_settings = (
        "threads",
        "context_tokens",
        "parallel",
        "cache_reuse",
        "startup_timeout_s",
        "spin_count",
    )
    needs_base_url = False
    rate_limited = False
    # Qwen2.5-Coder-0.5B on 2 quiet cores, two jobs' calls sharing its server: the one-turn
    # default paid 62 calls of 15.3 s each (seed 0; docs/performance.md). Longer conversations
    # have longer calls: the two-user, three-turn default's took 26 s.
    assumed_latency_s = 15.3
    loopback_only = True  # a cluster's jobs cannot reach it: the run stops at DAG load

    def endpoint(self, cfg: Config, settings: dict[str, Any]) -> Endpoint:
        if settings["base_url"]:
            return super().endpoint(cfg, settings)
        base_url, identity = _running(cfg)
        # The run's own key, never an API key.
        return Endpoint(self.name, base_url, identity, KEY_ENV, cfg.llm.timeout_s)

    def provider(self, endpoint: Endpoint) -> Provider:
        if endpoint.api_key_env != KEY_ENV:  # a role with an endpoint of its own
            return super().provider(endpoint)
        return FoundServer(endpoint)

    def identity(self, cfg: Config, base_url: str | None) -> str:
        if base_url:
            return super().identity(cfg, base_url)
        return f"local-gguf:{served_model_id(local_settings(cfg))}"

    def served(self, cfg: Config, role: str) -> Served | None:
        own = cfg.llm.roles.get(role)  # type: ignore[call-overload]
        if own and own.base_url:
            return None  # a role with an endpoint of its own
        local = local_settings(cfg)
        bound = local.assistant_max_tokens if role == "assistant" else None
        return Served(local.context_tokens, "llm.local.context_tokens", bound)

    def capacity(self, cfg: Config) -> Capacity:
        local = local_settings(cfg)
        return Capacity(jobs=local.jobs_at_once, requests=local.parallel)

    def check(self, cfg: Config) -> list[str]:
        try:
            check_model_path(local_settings(cfg))
        except LocalModelError as err:
            return [str(err)]
        return []

    def preflight(self, cfg: Config) -> list[str]:
        return []  # its server is started (and checked) by ``start``

    def key_variables(self, cfg: Config) -> list[str]:
        return []

    def start(self, cfg: Config, log_dir: str, cluster: bool) -> None:
        try:
            start_for_run(cfg, f"{log_dir}/local_server.log")
        except LocalModelError as err:
            raise ProviderError(str(err)) from None

    def stop(self, cfg: Config) -> None:
        stop_for_run(cfg)


def local_settings(cfg: Config) -> LocalModel:
    """``llm.local``, the backend's settings block (the config holds one for every backend)."""
    return cast(LocalModel, cfg.llm.local)


BACKEND = LocalBackend()


def _running(cfg: Config) -> tuple[str, str]:
    """The running server's URL and cache identity; a server given by URL alone has no
    identity to key a cache on, so it is refused. Where it was found, and the pid that file
    names, are kept for the check before the first request (:func:`check_found`)."""
    env = os.environ.get(BASE_URL_ENV)
    if env:
        model_id = os.environ.get(MODEL_ID_ENV)
        if not model_id:
            raise ProviderError(
                f"{BASE_URL_ENV} is set without {MODEL_ID_ENV}: "
                "set it to the sha256 of the served GGUF (the cache is keyed on the weights)"
            )
        _FOUND[env] = (os.environ.get(PID_ENV, ""), BASE_URL_ENV)
        return env, f"local-gguf:{model_id}"
    try:
        data = json.loads(state_path(cfg).read_text())
        base_url, identity = data["base_url"], f"local-gguf:{data['model_sha256']}"
    except (FileNotFoundError, KeyError, json.JSONDecodeError):
        raise ProviderError(
            "llm.backend 'local': no local model server is running "
            "(start the run with `snakemake`, which launches it, or `memprobe local-server`)"
        ) from None
    _FOUND[base_url] = (str(data.get("pid", "")), str(state_path(cfg)))
    return base_url, identity


_FOUND: dict[str, tuple[str, str]] = {}  # a found server's URL: (its pid, the file naming it)


def check_found(base_url: str) -> None:
    """The server at ``base_url`` is the process its env or state file names
    (served_process.found_is_ours), or :class:`ProviderError` in one line: the run's key and
    prompts must not reach whoever holds its port now (it stopped, and another process, maybe
    another user's, bound the port). Nothing is sent to find out."""
    pid, where = _FOUND.get(base_url, ("", BASE_URL_ENV))
    if not pid.isdigit():
        raise ProviderError(
            f"{where}: {base_url} comes without its server's pid ({PID_ENV}), so it cannot "
            "show it is the server that was started: source the env file `memprobe "
            "local-server` printed, or let the run start its own"
        )
    try:
        served_process.found_is_ours(base_url, int(pid))
    except served_process.NotOurs as err:
        raise ProviderError(
            f"llm.backend 'local': {err}; nothing was sent there (found in {where}: start "
            "`memprobe local-server` again and source its new env file, or unset "
            f"{BASE_URL_ENV} to let the run start its own server)"
        ) from None


class FoundServer(OpenAICompatible):
    """The run's server, checked to be the process its file names before each request
    carries the key there: a server that dies while a job runs may find its port taken
    before the job's next call. The check reads /proc only (20 ms on a busy 2-core machine,
    mostly the kernel writing /proc/net/tcp), next to a local model's seconds per call."""

    def complete(self, req: dict[str, Any], observe: Observe | None = None) -> Reply:
        check_found(self.endpoint.base_url)
        return super().complete(req, observe)

    def embed(self, req: dict[str, Any], observe: Observe | None = None) -> Reply:
        check_found(self.endpoint.base_url)
        return super().embed(req, observe)


def start_for_run(cfg: Config, log_path: str | Path) -> str | None:
    """Start the run's server (backend ``local`` only); returns its base URL.

    An already exported ``MEMPROBE_LOCAL_BASE_URL`` (a server the user started) is used as is.
    """
    global _run_server
    if cfg.llm.backend != "local":
        return None
    if os.environ.get(BASE_URL_ENV):
        base_url = _running(cfg)[0]
        check_found(base_url)  # a server the user started: checked before any job runs
        return base_url
    model = resolve_model(local_settings(cfg))
    server = Server(model, local_settings(cfg), log_path)
    t0 = time.monotonic()
    print(f"memprobe: starting llama.cpp on {model.path.name} (log: {log_path})", file=sys.stderr)
    base_url = server.start()
    _run_server = server
    atexit.register(stop_for_run, cfg)
    os.environ[BASE_URL_ENV] = base_url
    os.environ[KEY_ENV] = server.key  # jobs inherit it, as they inherit the URL
    os.environ[MODEL_ID_ENV] = model.sha256 or path_identity(model.path)
    os.environ[PID_ENV] = str(server.pid)
    state = state_path(cfg)
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(
        json.dumps(
            {"base_url": base_url, "model_sha256": os.environ[MODEL_ID_ENV], "pid": server.pid}
        ),
        encoding="utf-8",
    )
    print(
        f"memprobe: local model ready at {base_url} ({time.monotonic() - t0:.0f}s)",
        file=sys.stderr,
    )
    return base_url


def stop_for_run(cfg: Config) -> None:
    global _run_server
    server, _run_server = _run_server, None
    if server is None:
        return
    server.stop()
    os.environ.pop(BASE_URL_ENV, None)
    os.environ.pop(MODEL_ID_ENV, None)
    os.environ.pop(PID_ENV, None)
    os.environ.pop(KEY_ENV, None)
    state_path(cfg).unlink(missing_ok=True)


def config_from_files(paths: list[str]) -> Config:
    """config/config.yaml with these files layered on it, as Snakemake layers them."""
    from memprobe.config.loading import load_files

    return load_files(paths)


# Ctrl-C, `kill`, the terminal closed, Ctrl-\ (whose default would dump core and keep the key)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def run_foreground(cfg: Config, log_path: str | Path = "logs/local-server.log") -> None:
    """``memprobe local-server``: one server until Ctrl-C, for several runs in a row.

    Ctrl-C, ``kill``, a closed terminal (SIGHUP) or Ctrl-\\ (SIGQUIT) stops the server and
    removes the file that holds its key; a second signal while it stops is ignored, so it
    cannot cut that short."""
    model = resolve_model(local_settings(cfg))
    server = Server(model, local_settings(cfg), log_path)
    # The key goes to a file only its owner can read, never to stdout (it may be a log).
    env_file = model_cache_dir() / f"local-server-{os.getpid()}.env"
    for sig in STOP_SIGNALS:
        if sig != signal.SIGINT or signal.getsignal(sig) is signal.default_int_handler:
            signal.signal(sig, _interrupt)  # (a background job keeps SIGINT ignored)
    written = False
    try:  # from the start: a Ctrl-C at any point stops the server and removes the key's file
        base_url = server.start()
        model_id = model.sha256 or path_identity(model.path)
        text = (
            f"export {BASE_URL_ENV}={base_url} {MODEL_ID_ENV}={model_id} "
            f"{PID_ENV}={server.pid} {KEY_ENV}={server.key}"
        )
        written = True  # from here on the file is ours to remove, even half-written
        write_private(env_file, text + "\n")
        print(f". {env_file}", flush=True)
        print("(runs started after sourcing it use this server; Ctrl-C stops it)", file=sys.stderr)
        while server.proc and server.proc.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        _stopping()
        if written:
            env_file.unlink(missing_ok=True)  # first: the key must not outlive the server
        server.stop()


def write_private(path: Path, text: str) -> None:
    """Create ``path`` for its owner alone, never through a link and never over another file
    (O_EXCL|O_NOFOLLOW); a leftover of a killed server with our pid is replaced once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        path.unlink()  # removes a planted link itself, never what it points to
        try:
            fd = os.open(path, flags, 0o600)
        except FileExistsError:
            raise LocalModelError(f"{path}: appeared again while being replaced") from None
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def _interrupt(*_) -> None:
    _stopping()  # before anything else: a second signal must not cut the cleanup short
    raise KeyboardInterrupt


def _stopping() -> None:
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is _interrupt:
            signal.signal(sig, signal.SIG_IGN)


# -- the child process -----------------------------------------------------------------------
def serve(
    model: str,
    ready_fd: int,
    threads: int,
    context: int,
    parallel: int,
    parent: int,
    cache_reuse: int = 0,
) -> None:
    """Run llama.cpp's HTTP server in this process until SIGTERM or the parent is gone."""
    import xllamacpp as xlc  # imported here: OMP_WAIT_POLICY must be set before it loads

    key = os.environ.pop(KEY_CHILD_ENV, "")
    if not key:
        sys.exit(f"memprobe local server: {KEY_CHILD_ENV} is not set (start it via start_for_run)")
    params = xlc.CommonParams()
    params.model.path = model
    params.n_ctx = context * parallel  # llama.cpp splits n_ctx across the parallel slots
    params.n_parallel = parallel
    # Each slot keeps its last prompt: a conversation sent to the slot that holds its prefix
    # evaluates only what is new, and with cache_reuse also what moved (llama.cpp shifts it).
    params.n_cache_reuse = cache_reuse
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # bound here, reported on ready_fd: no port picked by one process for another
    params.api_keys = [key]  # every route but /health needs it
    # No web page may call it with credentials: the default is CORS * with credentials.
    params.cors_origins = "http://127.0.0.1"
    params.cors_origins_explicit = True
    params.cors_credentials = False
    params.endpoint_slots = False  # slot contents are other requests' prompts
    params.endpoint_metrics = False
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    server = xlc.Server(params)
    address = server.listening_address
    os.write(ready_fd, f"{address}\n".encode("ascii"))
    os.close(ready_fd)
    print(f"memprobe local server: listening at {address}", flush=True)
    while not stop["now"] and (parent <= 0 or os.getppid() == parent):
        time.sleep(0.5)
    del server  # the destructor stops llama.cpp's loop cleanly


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memprobe.serving.local_server")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run llama.cpp's server on a GGUF (used by start_for_run)")
    s.add_argument("--model", required=True)
    s.add_argument("--ready-fd", type=int, required=True, help="where the bound address goes")
    s.add_argument("--threads", type=int, default=2)
    s.add_argument("--context", type=int, default=4096)
    s.add_argument("--parallel", type=int, default=1)
    s.add_argument("--cache-reuse", type=int, default=0, help="llama.cpp's --cache-reuse")
    s.add_argument("--parent", type=int, default=0, help="exit when this process is gone")
    args = parser.parse_args(argv)
    serve(
        args.model,
        args.ready_fd,
        args.threads,
        args.context,
        args.parallel,
        args.parent,
        args.cache_reuse,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
