"""A loopback test server on a daemon thread or in the foreground until Ctrl-C
(memprobe/testing/background.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
from http.server import ThreadingHTTPServer

import httpx2
import pytest

from memprobe.serving.json_http import QuietJSONHandler
from memprobe.testing.background import Background
from tests.helpers.workflow import ROOT


class Hello(QuietJSONHandler):
    def do_GET(self) -> None:
        self._send(200, {"path": self.path})


def test_a_background_server_answers_at_its_base_url_until_closed():
    server = Background(ThreadingHTTPServer(("127.0.0.1", 0), Hello))
    try:
        assert server.thread.daemon  # never keeps a test process alive
        port = server.server.server_address[1]
        assert server.base_url == f"http://127.0.0.1:{port}/v1"
        reply = httpx2.get(f"{server.base_url}/models", timeout=5)
        assert reply.json() == {"path": "/v1/models"}
    finally:
        server.close()
    server.thread.join(5)
    assert not server.thread.is_alive()
    with pytest.raises(httpx2.ConnectError):
        httpx2.get(f"{server.base_url}/models", timeout=5)


SERVE = """
from http.server import ThreadingHTTPServer
from memprobe.serving.json_http import QuietJSONHandler
from memprobe.testing.background import serve_until_interrupted
serve_until_interrupted(ThreadingHTTPServer(("127.0.0.1", 0), QuietJSONHandler), "the thing")
print("after", flush=True)
"""


def test_in_the_foreground_it_says_where_it_listens_and_ctrl_c_ends_it_quietly():
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        first = proc.stdout.readline()
        assert first.startswith("the thing on http://127.0.0.1:") and first.endswith("/v1\n")
        port = int(first.rsplit(":", 1)[1].removesuffix("/v1\n"))
        assert httpx2.get(f"http://127.0.0.1:{port}/", timeout=5).status_code == 501  # no GET
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0 and err == "" and out == "after\n"  # no traceback
