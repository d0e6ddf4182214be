"""Where the memt jobs reach Mem-T: an existing endpoint, or a ``vllm serve`` they start.

``memt.endpoint`` set: use it. ``memt.serve: true``: start ``<memt.vllm_bin> serve
<memt.model_path>`` (the executable of the separate env ``envs/vllm.yaml``: vLLM pins its own
torch, so it never shares the CPU stack's env) on a Unix socket (``--uds``) in a fresh
directory only this user can enter, wait until ``GET /health`` answers 200, and stop it when the
job's process ends. The server dies with the job even when the job is killed
(PR_SET_PDEATHSIG), so a failed node leaves no GPU held.

No port: nobody can bind the server's address before vLLM does (it imports torch for
seconds first), and no other user can reach any of its routes (vLLM's key guards only
``/v1/*``). Before the first request the job checks that the socket's listener is the process
it started (its pid, from the kernel); only then does it send the random per-job key
(``VLLM_API_KEY`` in the server's environment, never argv), and it checks that a random wrong
key is refused. The cache identity of a served model is its weights' identity
(:func:`cache_identity`), never where it is served.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import secrets
from pathlib import Path

from memprobe.config.schema import MemT
from memprobe.llm.providers import LLMError
from memprobe.serving import served_process
from memprobe.serving.local_server import model_cache_dir
from memprobe.spec.records import write_atomic

ENDPOINT_ENV = "MEMPROBE_MEMT_BASE_URL"  # a server started outside the job (wins over serve)
KEY_ENV = "MEMPROBE_MEMT_SERVED_KEY"  # the key of the server this job started (client side)


class VllmError(LLMError):
    """The Mem-T server could not be started or never became healthy."""


def serve_command(m: MemT, socket_path: str) -> list[str]:
    """The ``vllm serve`` command line for Mem-T (served under ``memt.model``)."""
    if not m.model_path:
        raise VllmError("memt.model_path: required when memt.serve is true")
    return [
        m.vllm_bin,
        "serve",
        m.model_path,
        "--served-model-name",
        m.model,
        "--uds",
        socket_path,
        *m.vllm_args,
    ]


class Server(served_process.ServedProcess):
    """One ``vllm serve`` process: ``start()`` returns once healthy, ``stop()`` ends it."""

    grace_s = 30.0

    def __init__(self, m: MemT, log_path: str | os.PathLike[str], poll_s: float = 1.0) -> None:
        self.settings = m
        self.key = secrets.token_urlsafe(24)
        self.socket_dir = served_process.private_dir("memprobe-vllm-")
        self.uds = str(self.socket_dir / "vllm.sock")
        self.base_url = "http://localhost/v1"  # the host is a placeholder: requests go to uds
        self.log_path = Path(log_path)
        self.poll_s = poll_s

    def start(self) -> str:
        cmd = serve_command(self.settings, str(self.uds))
        try:
            self.launch(cmd, served_process.child_env(VLLM_API_KEY=self.key))
        except FileNotFoundError:
            raise VllmError(
                f"memt.vllm_bin: {cmd[0]!r} not found (build envs/vllm.yaml and point "
                "memt.vllm_bin at its bin/vllm)"
            ) from None
        finally:
            if self.proc is None:
                self.stop()  # removes the socket directory
        self.ready_or_stopped(self.wait_healthy)
        return self.base_url

    def wait_healthy(self) -> None:
        self.healthy_and_ours(self.settings.startup_timeout_s, self.poll_s)

    error = VllmError

    def not_ours(self, err: served_process.NotOurs) -> str:
        return f"memt.serve: {err} (log: {self.log_path})"

    def exited(self, status: int) -> str:
        return (
            f"vllm serve exited with status {status} before it was healthy (log: {self.log_path})"
        )

    def timed_out(self, timeout_s: float) -> str:
        return (
            f"vllm serve not healthy on {self.uds} after {timeout_s:.0f}s "
            f"(memt.startup_timeout_s; log: {self.log_path})"
        )


_server: Server | None = None


def ensure(m: MemT, log_path: str | os.PathLike[str] | None = None) -> tuple[str, str | None]:
    """The Mem-T base URL for this process and the Unix socket that reaches it (None: the URL
    itself), starting one server on first use if configured."""
    global _server
    if os.environ.get(ENDPOINT_ENV):
        return os.environ[ENDPOINT_ENV], None
    if m.endpoint:
        return m.endpoint, None
    if not m.serve:
        raise VllmError("memt: set memt.endpoint or memt.serve: true with memt.model_path")
    if _server is None:
        server = Server(m, log_path or Path("logs") / "vllm" / f"serve-{os.getpid()}.log")
        server.start()
        atexit.register(server.stop)
        _server = server
        os.environ[KEY_ENV] = server.key  # read by this job's client, inherited by nobody
    return _server.base_url, _server.uds


def key_env(m: MemT) -> str:
    """Where the Mem-T client reads its key: the started server's, else ``memt.api_key_env``."""
    served = m.serve and not m.endpoint and not os.environ.get(ENDPOINT_ENV)
    return KEY_ENV if served else m.api_key_env


def cache_identity(m: MemT, base_url: str) -> str:
    """What cache keys of Mem-T replies are keyed on: the weights, not where they are served.

    With ``model_path`` readable here, the sha256 of every file under it (weights, config,
    tokenizer), plus ``vllm_args`` when we serve it; otherwise the endpoint URL. Hashing a
    4B checkpoint takes seconds to a minute, so the digest is memoised per path, size and
    mtime of every file (a copy or an edit changes one of them, and so the identity).
    """
    if not m.model_path:
        return base_url  # an endpoint we know nothing else about (as before issue 16)
    path = Path(m.model_path)
    if not path.exists():  # served elsewhere from a path this host cannot read
        return f"memt-endpoint:{base_url}|{m.model_path}"
    digest = weights_digest(path)
    served = m.vllm_args if key_env(m) == KEY_ENV else []
    return f"memt-weights:{digest}|{json.dumps(served)}"


def weights_digest(path: Path, memo_dir: Path | None = None) -> str:
    files = sorted(p for p in ([path] if path.is_file() else path.rglob("*")) if p.is_file())
    stats = [(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in files]
    memo_key = hashlib.sha256(json.dumps(stats).encode()).hexdigest()
    memo = (memo_dir or model_cache_dir() / "weights-digests") / f"{memo_key}.sha256"
    if memo.is_file():
        return memo.read_text().strip()
    h = hashlib.sha256()
    for p in files:
        h.update(str(p.relative_to(path) if p != path else p.name).encode() + b"\0")
        with open(p, "rb") as fh:
            while block := fh.read(1 << 22):
                h.update(block)
    write_atomic(memo, h.hexdigest())
    return h.hexdigest()


def stop() -> None:
    """Stop this process's server now (tests; jobs rely on exit)."""
    global _server
    if _server is not None:
        _server.stop()
        _server = None
