"""What the model servers we launch share (llama.cpp for ``local``, vLLM for memt, the
embedding server): a loopback port, a child that dies with its parent, a scrubbed
environment, a wait for ``/health``, and a proof that the server answering is ours."""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

# Loopback requests never go through HTTP(S)_PROXY: a proxy would see the run's key and
# prompts, or (without NO_PROXY) make every health check time out.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# Names a child never needs and must not see: provider API keys, tokens, passwords.
_SECRET_NAME = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)")


class NotHealthy(RuntimeError):
    """The server exited (``exit_code`` set) or stayed unhealthy past the timeout."""

    def __init__(self, exit_code: int | None) -> None:
        super().__init__(exit_code)
        self.exit_code = exit_code


class NotOurs(RuntimeError):
    """The server on the port does not hold the run's key: someone else answers there."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health_url(base_url: str) -> str:
    # Both servers answer /health at the root, next to /v1.
    return base_url.rstrip("/").removesuffix("/v1") + "/health"


def child_env(**extra: str) -> dict[str, str]:
    """The parent's environment without secrets, plus ``extra`` (the child's own key)."""
    env = {k: v for k, v in os.environ.items() if not _SECRET_NAME.search(k)}
    return {**env, **extra}


def die_with_parent() -> None:  # runs in the child before exec
    os.setsid()
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def open_direct(req: urllib.request.Request | str, timeout: float):
    """``urlopen`` for a loopback server: never through HTTP(S)_PROXY."""
    return _DIRECT.open(req, timeout=timeout)


def status(url: str, headers: dict[str, str] | None = None, timeout_s: float = 5.0) -> int:
    """The HTTP status of ``GET url`` (0: no answer), never through a proxy."""
    try:
        with open_direct(urllib.request.Request(url, headers=headers or {}), timeout=timeout_s):
            return 200
    except urllib.error.HTTPError as err:
        return err.code
    except (urllib.error.URLError, OSError):
        return 0


def wait_healthy(
    proc: subprocess.Popen | None, base_url: str, timeout_s: float, poll_s: float
) -> None:
    """Poll ``/health`` until it answers 200; raise :class:`NotHealthy` otherwise."""
    url = health_url(base_url)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        code = proc.poll() if proc else None
        if code is not None:
            raise NotHealthy(code)
        if status(url) == 200:  # 503 while the model loads, refused before the bind
            return
        time.sleep(poll_s)
    raise NotHealthy(None)


def prove_ours(base_url: str, key: str) -> None:
    """The run's key opens ``/v1/models`` and a wrong key is refused, or :class:`NotOurs`.

    A healthy port proves only that something listens there; a server that accepts our
    random key and refuses another one was started with that key, by us."""
    url = base_url.rstrip("/") + "/models"
    good = status(url, {"Authorization": f"Bearer {key}"})
    wrong = status(url, {"Authorization": f"Bearer {key[::-1]}-not-the-key"})
    if good != 200 or wrong not in (401, 403):
        raise NotOurs(
            f"{base_url}: the run's key got HTTP {good or 'no answer'} and a wrong key HTTP "
            f"{wrong or 'no answer'}; another server answers on this port"
        )


def read_address(proc: subprocess.Popen, fd: int, timeout_s: float) -> str:
    """The ``http://host:port`` line a child writes to ``fd`` once it has bound its port."""
    deadline = time.monotonic() + timeout_s
    data = b""
    try:
        while b"\n" not in data:
            left = deadline - time.monotonic()
            if left <= 0:
                raise NotHealthy(None)
            ready, _, _ = select.select([fd], [], [], min(left, 0.5))
            if ready:
                chunk = os.read(fd, 256)
                if not chunk:  # the child closed its end without an address: it died
                    raise NotHealthy(proc.wait())
                data += chunk
            elif proc.poll() is not None:
                raise NotHealthy(proc.returncode)
    finally:
        os.close(fd)
    return data.split(b"\n", 1)[0].decode("ascii").strip()


class ServedProcess:
    """A model server in its own process group, logging to ``log_path``: ``launch`` starts
    it, ``stop`` ends the whole group (servers spawn workers), politely first."""

    log_path: Path
    proc: subprocess.Popen | None = None
    grace_s = 20.0  # SIGTERM, then SIGKILL after this long

    def launch(self, cmd: list[str], env: dict[str, str], pass_fds: tuple[int, ...] = ()) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                pass_fds=pass_fds,
                preexec_fn=die_with_parent,
            )

    # -- what a failed start says, per server (one line naming the config key to look at)
    error: type[Exception] = RuntimeError
    base_url = ""
    key = ""

    def not_ours(self, err: NotOurs) -> str:
        return str(err)

    def exited(self, status: int) -> str:
        return f"the server exited with status {status} (log: {self.log_path})"

    def timed_out(self, timeout_s: float) -> str:
        return f"the server was not healthy after {timeout_s:.0f}s (log: {self.log_path})"

    def healthy_and_ours(self, timeout_s: float, poll_s: float) -> None:
        """Wait for ``base_url``'s health check, then prove the server holds our ``key``."""
        try:
            wait_healthy(self.proc, self.base_url, timeout_s, poll_s)
            prove_ours(self.base_url, self.key)
        except NotOurs as err:
            raise self.error(self.not_ours(err)) from None
        except NotHealthy as err:
            raise self.unhealthy(err, timeout_s) from None

    def unhealthy(self, err: NotHealthy, timeout_s: float) -> Exception:
        code = err.exit_code
        return self.error(self.exited(code) if code is not None else self.timed_out(timeout_s))

    def ready_or_stopped(self, wait: Callable[[], None]) -> None:
        """Run ``wait`` (health checks); on any failure or interrupt the server is stopped."""
        try:
            wait()
        except BaseException:
            self.stop()
            raise

    def stop(self, grace_s: float | None = None) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=self.grace_s if grace_s is None else grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        except ProcessLookupError:
            pass
