"""What the two model servers we launch share (llama.cpp for ``local``, vLLM for memt):
a free loopback port, a child that dies with its parent, and a wait for ``/health``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request


class NotHealthy(RuntimeError):
    """The server exited (``exit_code`` set) or stayed unhealthy past the timeout."""

    def __init__(self, exit_code: int | None) -> None:
        super().__init__(exit_code)
        self.exit_code = exit_code


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health_url(base_url: str) -> str:
    # Both servers answer /health at the root, next to /v1.
    return base_url.rstrip("/").removesuffix("/v1") + "/health"


def die_with_parent() -> None:  # runs in the child before exec
    os.setsid()
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


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
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass  # 503 while the model loads, refused before the socket is bound
        time.sleep(poll_s)
    raise NotHealthy(None)
