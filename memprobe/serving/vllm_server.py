"""Where the memt jobs reach Mem-T: an existing endpoint, or a ``vllm serve`` they start.

Its settings (``VllmServing``) are part of the system's (``system_settings.memt``):
``endpoint`` set: use it. ``serve: true``: start ``<vllm_bin> serve <model_path>`` (the
executable of the separate env ``envs/vllm.yaml``: vLLM pins its own torch, so it never
shares the CPU stack's env) on a Unix socket (``--uds``) in a fresh directory only this user
can enter, wait until ``GET /health`` answers 200, and stop it when the
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
import shutil
from pathlib import Path
from typing import ClassVar

from pydantic import Field, field_validator, model_validator

from memprobe.config.base import endpoint_url
from memprobe.llm.providers import LLMError
from memprobe.registry.systems import Settings
from memprobe.serving import served_process
from memprobe.serving.local_model import model_cache_dir
from memprobe.spec.records import write_atomic

ENDPOINT_ENV = "MEMPROBE_MEMT_BASE_URL"  # a server started outside the job (wins over serve)
KEY_ENV = "MEMPROBE_MEMT_SERVED_KEY"  # the key of the server this job started (client side)


class VllmError(LLMError):
    """The Mem-T server could not be started or never became healthy."""


# Flags of vllm_args that would undo what the server is given here: a Unix socket in a private
# directory (no TCP port), the run's key.
RESERVED_ARGS = ("--host", "--port", "--uds", "--api-key")


class VllmServing(Settings):
    """Where a system's served model is: ``endpoint`` (an OpenAI-compatible server already
    running it) or ``serve: true`` with ``model_path``, in which case its jobs start ``vllm
    serve`` themselves from the separate env ``envs/vllm.yaml``. Part of the settings of a
    system that serves its own model (memt: ``system_settings.memt``)."""

    endpoint: str | None = None
    """a running server of the model (OpenAI-compatible)"""
    serve: bool = False
    """each of the system's jobs starts `vllm serve` on its GPU instead"""
    model_path: str | None = None
    """local weights of the model (`serve: true`)"""
    model: str = Field(default="Mem-T-4B", description="served model name")
    api_key_env: str = "MEMT_API_KEY"
    """the variable holding the server's key (an `endpoint`'s)"""
    vllm_bin: str = Field(default="vllm", description="the vllm executable of envs/vllm.yaml")
    vllm_args: list[str] = Field(default_factory=list)
    """extra `vllm serve` flags"""
    startup_timeout_s: float = Field(default=900.0, gt=0)
    """how long the served model may take to be healthy"""

    # The config key of the settings this is part of, for the error lines.
    config_key: ClassVar[str] = "system_settings.memt"

    _url = field_validator("endpoint")(endpoint_url)

    @field_validator("vllm_args")
    @classmethod
    def _no_reserved_args(cls, v: list[str]) -> list[str]:
        for arg in v:
            if arg.split("=", 1)[0] in RESERVED_ARGS:
                raise ValueError(
                    f"{arg.split('=', 1)[0]} is set by memprobe (a Unix socket in a private "
                    "directory, the run's key through VLLM_API_KEY); remove it"
                )
        return v

    @model_validator(mode="after")
    def _serve_needs_model(self) -> VllmServing:
        if self.serve and not self.model_path:
            raise ValueError("model_path: required when serve is true")
        return self


def missing_files(m: VllmServing) -> list[str]:
    """What ``serve: true`` needs on the host its jobs run on: the weights and vLLM."""
    if not m.serve:
        return []
    out = []
    if m.model_path and not Path(m.model_path).is_dir():
        out.append(f"{m.config_key}.model_path: {m.model_path} is not a directory (the weights)")
    if not (shutil.which(m.vllm_bin) or Path(m.vllm_bin).is_file()):
        out.append(f"{m.config_key}.vllm_bin: {m.vllm_bin} is not an executable (envs/vllm.yaml)")
    return out


def serve_command(m: VllmServing, socket_path: str) -> list[str]:
    """The ``vllm serve`` command line for Mem-T (served under its settings' ``model``)."""
    if not m.model_path:
        raise VllmError(f"{m.config_key}.model_path: required when serve is true")
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

    def __init__(
        self, m: VllmServing, log_path: str | os.PathLike[str], poll_s: float = 1.0
    ) -> None:
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
                f"{self.settings.config_key}.vllm_bin: {cmd[0]!r} not found (build "
                "envs/vllm.yaml and point vllm_bin at its bin/vllm)"
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
        return f"{self.settings.config_key}.serve: {err} (log: {self.log_path})"

    def exited(self, status: int) -> str:
        return (
            f"vllm serve exited with status {status} before it was healthy (log: {self.log_path})"
        )

    def timed_out(self, timeout_s: float) -> str:
        return (
            f"vllm serve not healthy on {self.uds} after {timeout_s:.0f}s "
            f"({self.settings.config_key}.startup_timeout_s; log: {self.log_path})"
        )


_server: Server | None = None


def ensure(
    m: VllmServing, log_path: str | os.PathLike[str] | None = None
) -> tuple[str, str | None]:
    """The Mem-T base URL for this process and the Unix socket that reaches it (None: the URL
    itself), starting one server on first use if configured."""
    global _server
    if os.environ.get(ENDPOINT_ENV):
        try:  # checked as a configured endpoint is: no credential in a URL that jobs log
            return endpoint_url(os.environ[ENDPOINT_ENV]) or "", None
        except ValueError as err:
            raise VllmError(f"{ENDPOINT_ENV}: {err}") from None
    if m.endpoint:
        return m.endpoint, None
    if not m.serve:
        raise VllmError(f"{m.config_key}: set endpoint, or serve: true with model_path")
    if _server is None:
        server = Server(m, log_path or Path("logs") / "vllm" / f"serve-{os.getpid()}.log")
        server.start()
        atexit.register(server.stop)
        _server = server
        os.environ[KEY_ENV] = server.key  # read by this job's client, inherited by nobody
    return _server.base_url, _server.uds


def key_env(m: VllmServing) -> str:
    """Where the Mem-T client reads its key: the started server's, else ``api_key_env``."""
    served = m.serve and not m.endpoint and not os.environ.get(ENDPOINT_ENV)
    return KEY_ENV if served else m.api_key_env


def cache_identity(m: VllmServing, base_url: str) -> str:
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
