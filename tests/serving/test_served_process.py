"""What our model servers share (memprobe/serving/served_process.py): the proof that the
listener is our child comes from the kernel, before any request; the child's environment."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from memprobe.serving import served_process
from tests.squatters import Squatter

LISTENER = (
    "import socket, sys, time\n"
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
    "print(s.getsockname()[1], flush=True); time.sleep(30)\n"
)


def test_a_tcp_listener_is_ours_only_when_our_child_holds_it():
    child = subprocess.Popen(
        [sys.executable, "-c", LISTENER], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    squatter = Squatter()
    try:
        port = int(child.stdout.readline())  # type: ignore[union-attr]
        assert served_process.listener_is_ours(child, f"http://127.0.0.1:{port}/v1", None)
        with pytest.raises(served_process.NotOurs, match="did not start"):
            served_process.listener_is_ours(child, f"http://127.0.0.1:{squatter.port}/v1", None)
    finally:
        child.kill()
        child.wait()
        squatter.close()
    assert squatter.received == b""


def test_a_private_dir_is_new_and_only_ours():
    first, second = served_process.private_dir("t-"), served_process.private_dir("t-")
    try:
        assert first != second
        for d in (first, second):
            st = d.stat()
            assert st.st_uid == os.getuid() and st.st_mode & 0o777 == 0o700
    finally:
        served_process.remove_private_dir(first)
        served_process.remove_private_dir(second)
