"""Another local user, played by ``nobody`` through ``setpriv`` (root only): what they can
reach of a run's files and servers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def skip_unless_root() -> None:
    """Playing another user needs root (to drop to ``nobody``) and ``setpriv``."""
    if os.geteuid() != 0:
        pytest.skip("playing another local user needs root (setpriv to nobody); run as root")
    if shutil.which("setpriv") is None:
        pytest.skip("playing another local user needs setpriv (util-linux)")


def as_nobody(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run a Python snippet as ``nobody``; its stdout is what it found."""
    return subprocess.run(
        [*AS_NOBODY, sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd="/",
    )


def shared_folder(mode: int = 0o755) -> Path:
    """A fresh folder that every user may enter (0o1777: and make folders in, as in /tmp), so
    what keeps ``nobody`` out is the run's own files' modes, not the test's temp dir."""
    path = Path(tempfile.mkdtemp(prefix="memprobe-shared-", dir="/tmp"))
    path.chmod(mode)
    return path


# Prints, one a line, every path of argv that it could open for reading (a folder: list).
TRY_TO_OPEN = """
import os, sys
for path in sys.argv[1:]:
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            os.close(os.open(path, os.O_RDONLY))
    except OSError:
        continue
    print(path)
"""
