"""Starting and trusting served processes (memprobe/serving/served_process.py): the listener is
proven to be our child by the kernel before any request, children inherit no secret."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from memprobe.serving import served_process
from memprobe.testing.memt_standin import StandIn
from tests.helpers.squatters import Squatter

SENTINEL = "sk-sentinel-openai-0123456789"
LISTENER = (
    "import socket, sys, time\n"
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
    "print(s.getsockname()[1], flush=True); time.sleep(30)\n"
)


def test_a_server_that_accepts_any_key_is_refused():
    squatter = StandIn()  # answers every request, with or without a key
    try:
        with pytest.raises(served_process.NotOurs, match="does not hold the run's key"):
            served_process.prove_ours(squatter.base_url, "the-runs-key")
    finally:
        squatter.close()


def test_the_wrong_key_of_the_proof_cannot_be_guessed():
    # A server that refuses only the wrong key it can predict from the real one (the real
    # one reversed plus a fixed suffix, as the proof once sent) must not pass the proof.
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from memprobe.testing.background import Background

    key, seen = "the-runs-key", []

    class Guesser(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            sent = self.headers.get("Authorization", "")
            seen.append(sent)
            self.send_response(401 if sent == f"Bearer {key[::-1]}-not-the-key" else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = Background(ThreadingHTTPServer(("127.0.0.1", 0), Guesser))
    try:
        for _ in range(2):
            with pytest.raises(served_process.NotOurs, match="does not hold the run's key"):
                served_process.prove_ours(server.base_url, key)
    finally:
        server.close()
    wrong = [s for s in seen if s != f"Bearer {key}"]
    assert len(wrong) == 2 and wrong[0] != wrong[1]  # a fresh random wrong key each time


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


def test_a_listener_on_another_address_with_the_same_port_is_no_stranger():
    # CI: a process on the host listened on another address with the port number the kernel
    # then gave our child on 127.0.0.1; it cannot answer 127.0.0.1, so it is not a squatter.
    child = subprocess.Popen(
        [sys.executable, "-c", LISTENER], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    neighbour = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        port = int(child.stdout.readline())  # type: ignore[union-attr]
        neighbour.bind(("127.0.0.2", port))
        neighbour.listen()
        assert served_process.listener_is_ours(child, f"http://127.0.0.1:{port}/v1", None)
        # A name, not an address, could resolve to either: the neighbour then counts.
        with pytest.raises(served_process.NotOurs, match="did not start"):
            served_process.listener_is_ours(child, f"http://localhost:{port}/v1", None)
    finally:
        neighbour.close()
        child.kill()
        child.wait()


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


def test_children_never_inherit_secrets(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    env = served_process.child_env(OMP_WAIT_POLICY="PASSIVE")
    assert "OPENAI_API_KEY" not in env and "HF_TOKEN" not in env
    assert env["OMP_WAIT_POLICY"] == "PASSIVE" and env["PATH"] == os.environ["PATH"]


def test_children_get_an_allowlisted_environment(monkeypatch):
    # A key under any configured name, credentials in URLs, an SSH agent: none reach a server.
    leaks = {
        "OPENAI_PROD": "sk-live-0123456789",  # a key under a name no pattern knows
        "MY_LLM_CRED": "sk-live-0123456789",
        "HTTPS_PROXY": "http://bob:hunter2@proxy.example:3128",
        "https_proxy": "http://bob:hunter2@proxy.example:3128",
        "DATABASE_URL": "postgres://app:pw@db.example/x",
        "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
        "HF_ENDPOINT": "https://user:pw@hub.example",  # an allowed prefix, credentials inside
    }
    for name, value in leaks.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HF_HOME", "/data/hf")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    env = served_process.child_env(VLLM_API_KEY="the-childs-own")
    assert not set(leaks) & set(env)
    assert env["HF_HOME"] == "/data/hf" and env["CUDA_VISIBLE_DEVICES"] == "0"
    assert env["VLLM_API_KEY"] == "the-childs-own" and env["HOME"] == os.environ["HOME"]


def test_a_full_listen_queue_is_waited_out_not_taken_for_a_dead_server(tmp_path):
    # 48 jobs connecting at once filled the embedding server's queue; a client turned away
    # (EAGAIN) took the server for gone and loaded the model itself.
    import threading

    path = str(tmp_path / "busy.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(0)
    queued = []
    while True:  # fill the queue: nothing accepts yet
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.setblocking(False)
        try:
            c.connect(path)
        except BlockingIOError:
            c.close()
            break
        queued.append(c)
    outcome: list[object] = []

    def connect() -> None:
        conn = served_process._UnixConnection(path, timeout=10)
        try:
            conn.connect()
            outcome.append("connected")
        except OSError as err:
            outcome.append(err)
        finally:
            conn.close()

    client = threading.Thread(target=connect)
    client.start()
    client.join(0.5)
    assert outcome == [], "the client gave up on a busy server"
    listener.settimeout(5)
    for _ in range(len(queued) + 1):
        listener.accept()[0].close()
    client.join(10)
    assert outcome == ["connected"]
    for c in [*queued, listener]:
        c.close()


def test_the_servers_listen_queue_takes_a_runs_jobs_at_once():
    assert served_process.UnixHTTPServer.request_queue_size >= 128


def test_a_key_under_an_allowed_family_of_names_reaches_no_child(monkeypatch):
    """Issue 42: the allowlist let whole families through by prefix, so a key kept in
    MEMPROBE_OPENAI (a configured api_key_env) or HF_PAT reached llama.cpp and the embedding
    server. The project's and the hub's variables are named one by one; any other variable
    that holds the value of one left out (a copy of the key) is left out too."""
    leaks = {
        "MEMPROBE_OPENAI": "sk-live-0123456789",
        "HF_PAT": "hf_live_0123456789",
        "VLLM_UPSTREAM": "sk-live-0123456789",  # an allowed family, the dropped key's value
    }
    for name, value in leaks.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MEMPROBE_EMBED_LANES", "2")  # read by the embedding server itself
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("VLLM_LOGGING_LEVEL", "1")  # short values are no key: kept
    monkeypatch.setenv("OLDPWD", os.environ["HOME"])  # left out, and HOME stays
    env = served_process.child_env()
    assert not set(leaks) & set(env), sorted(set(leaks) & set(env))
    assert env["MEMPROBE_EMBED_LANES"] == "2" and env["HF_HUB_OFFLINE"] == "1"
    assert env["VLLM_LOGGING_LEVEL"] == "1" and env["HOME"] == os.environ["HOME"]
