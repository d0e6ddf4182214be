"""The handler our loopback JSON servers share (memprobe/serving/json_http.py): JSON replies
with a length, no access log, and no Nagle delay on TCP (a Unix socket has none to turn off)."""

from __future__ import annotations

import json
import socket
import statistics
import time
from http.server import ThreadingHTTPServer

import httpx2

from memprobe.serving import served_process
from memprobe.serving.json_http import QuietJSONHandler
from memprobe.testing.background import Background


class Echo(QuietJSONHandler):
    """Replies with the request's body and whether Nagle is off on this connection."""

    protocol_version = "HTTP/1.1"  # keep-alive, as the openai client's connections are

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        nodelay = None
        if self.connection.family != socket.AF_UNIX:
            nodelay = bool(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        self._send(201, {"echo": body, "nodelay": nodelay})


def test_a_reply_is_json_with_its_length_and_nothing_is_logged(capfd):
    server = Background(ThreadingHTTPServer(("127.0.0.1", 0), Echo))
    try:
        reply = httpx2.post(f"{server.base_url}/x", json={"q": "é"}, timeout=5)
    finally:
        server.close()
    assert reply.status_code == 201
    assert reply.headers["Content-Type"] == "application/json"
    assert int(reply.headers["Content-Length"]) == len(reply.content)
    assert reply.json() == {"echo": {"q": "é"}, "nodelay": True}
    assert capfd.readouterr().err == ""  # no access-log line for the job's log


def test_a_reply_on_a_kept_alive_connection_is_not_held_by_nagle():
    # A reply is two writes (headers, body). With Nagle's algorithm on, the body waited for
    # the client's delayed ACK: ~40 ms on every call, inside every benchmark's LLM time.
    server = Background(ThreadingHTTPServer(("127.0.0.1", 0), Echo))
    took = []
    try:
        with httpx2.Client(timeout=5) as client:
            for i in range(15):
                start = time.perf_counter()
                client.post(f"{server.base_url}/x", json={"i": i})
                took.append(time.perf_counter() - start)
    finally:
        server.close()
    assert statistics.median(took) < 0.02


def test_the_same_handler_answers_on_a_unix_socket(tmp_path):
    path = str(tmp_path / "s.sock")
    server = served_process.UnixHTTPServer(path, Echo)
    Background(server)  # type: ignore[arg-type]  # base_url unused: no port
    try:
        code, data = served_process.unix_request(path, "POST", "/x", body=b'{"a": 1}')
    finally:
        server.shutdown()
        server.server_close()
    assert code == 201 and json.loads(data) == {"echo": {"a": 1}, "nodelay": None}
