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
