"""One total deadline per HTTP call (memprobe/llm/deadline.py): a reply dripped a byte at a
time, headers or body, is cut off at the call's budget; each call gets its own budget; every
transport the client builds (direct, proxies, a Unix socket) is bounded; a given one is not."""

from __future__ import annotations

import json
import time
from http.server import ThreadingHTTPServer

import httpx2
import pytest

from memprobe.llm import deadline
from memprobe.serving import served_process
from memprobe.serving.json_http import QuietJSONHandler
from memprobe.testing.background import Background
from tests.helpers.endpoint import Drip


@pytest.mark.parametrize("part", ["body", "headers"])
def test_a_dripped_reply_is_cut_off_at_the_calls_budget(part):
    server = Drip(part)  # 20+ s in all, each byte within 0.1 s
    try:
        with deadline.http_client(0.5, trust_env=False) as client:
            t0 = time.monotonic()
            with pytest.raises(httpx2.TimeoutException):
                client.post(f"{server.base_url}/chat/completions", json={}).read()
            took = time.monotonic() - t0
    finally:
        server.close()
    assert 0.4 < took < 1.5


class Slow(QuietJSONHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(0.3)
        self._send(200, {"ok": True})


def test_each_call_gets_its_own_budget():
    server = Background(ThreadingHTTPServer(("127.0.0.1", 0), Slow))
    try:
        with deadline.http_client(0.6, trust_env=False) as client:
            for _ in range(4):  # 1.2 s in all, each call 0.3 s of its 0.6
                assert client.post(f"{server.base_url}/x", json={}).json() == {"ok": True}
    finally:
        server.close()


def test_bounding_a_transport_wraps_its_pools_backend_once():
    transport = httpx2.HTTPTransport()
    inner = transport._pool._network_backend
    assert deadline.bounded(transport) is transport
    outer = transport._pool._network_backend
    assert outer is not inner and outer._inner is inner
    deadline.bounded(transport)
    assert transport._pool._network_backend is outer  # not wrapped twice


def test_proxy_transports_are_bounded_too(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with deadline.http_client(5, trust_env=True) as client:
        proxies = [t for t in client._mounts.values() if t is not None]
        assert proxies
        bounded = deadline._backend_class()
        for t in [client._transport, *proxies]:
            assert isinstance(t._pool._network_backend, bounded)


def test_a_unix_socket_client_sends_every_request_there(tmp_path):
    path = str(tmp_path / "s.sock")

    class Echo(QuietJSONHandler):
        def do_GET(self) -> None:
            self._send(200, {"path": self.path})

    server = Background(served_process.UnixHTTPServer(path, Echo))  # type: ignore[arg-type]
    try:
        with deadline.http_client(5, trust_env=False, uds=path) as client:
            reply = client.get("http://no-such-host.invalid/v1/health")
    finally:
        server.close()
    assert reply.json() == {"path": "/v1/health"}


def test_a_given_transport_is_used_as_it_is():
    seen = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(str(request.url))
        return httpx2.Response(200, json={"n": len(seen)})

    mock = httpx2.MockTransport(answer)
    with deadline.http_client(5, trust_env=False, transport=mock) as client:
        assert json.loads(client.get("http://fake.invalid/v1/x").content) == {"n": 1}
    assert seen == ["http://fake.invalid/v1/x"]
