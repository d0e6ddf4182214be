"""A local server found by URL (``memprobe local-server``'s env file, a run's state file) proves
it is the process that file names before the run's key or a prompt goes there (issue 42 item 1,
memprobe/serving/local_server.py ``check_found``)."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from memprobe.config.loading import load_config
from memprobe.llm.client import client_for
from memprobe.llm.providers import LLMError, ProviderError
from memprobe.serving import local_server, served_process
from tests.helpers.other_user import AS_NOBODY

FAKE_LLAMA = Path(__file__).resolve().parent / "fake_llama"
MSGS = [{"role": "user", "content": "hello"}]

# Binds 127.0.0.1:PORT, says so, and writes everything any connection sends it to stdout.
SQUAT = """
import socket, sys, threading
sock = socket.socket()
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("127.0.0.1", int(sys.argv[1])))
sock.listen(16)
print("bound", flush=True)
OK = b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n\\r\\n{}"
def one(conn):
    with conn:
        while data := conn.recv(65536):
            sys.stdout.write(data.decode("latin-1")); sys.stdout.flush()
            conn.sendall(OK)
while True:
    conn, _ = sock.accept()
    threading.Thread(target=one, args=(conn,), daemon=True).start()
"""


def gguf_config(tmp_path: Path) -> dict:
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF" + bytes(60))
    sha = hashlib.sha256(gguf.read_bytes()).hexdigest()
    local = {"model_path": str(gguf), "sha256": sha, "startup_timeout_s": 60}
    return {"llm": {"backend": "local", "max_attempts": 1, "local": local}}


def start_local_server(tmp_path: Path) -> tuple[subprocess.Popen, dict[str, str]]:
    """``memprobe local-server`` on the fake llama.cpp: the process and its env file's values."""
    configfile = tmp_path / "local.yaml"
    configfile.write_text(yaml.safe_dump(gguf_config(tmp_path)))
    env = {
        **os.environ,
        "PYTHONPATH": str(FAKE_LLAMA),
        "MEMPROBE_FAKE_LLAMA": str(tmp_path / "fake_llama.log"),
        "MEMPROBE_MODEL_CACHE": str(tmp_path / "models"),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "memprobe.cli", "local-server", "--configfile", str(configfile)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    line = proc.stdout.readline()  # type: ignore[union-attr]
    assert line.startswith(". "), proc.stderr.read()  # type: ignore[union-attr]
    text = Path(line[2:].strip()).read_text().removeprefix("export ").split()
    return proc, dict(item.split("=", 1) for item in text)


def squat(port: int) -> subprocess.Popen:
    """Another local user (``nobody``, when the tests run as root) takes ``port``."""
    other = AS_NOBODY if os.geteuid() == 0 else []
    proc = subprocess.Popen(
        [*other, sys.executable, "-c", SQUAT, str(port)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "bound"  # type: ignore[union-attr]
    return proc


def test_a_stopped_servers_port_taken_by_another_user_gets_no_key_and_no_prompt(
    tmp_path, monkeypatch
):
    """Issue 42, must show: after `memprobe local-server` stopped, another user bound its port;
    a run with its env file sent that squatter its key and prompts and cached its replies under
    the model's identity. Now the client looks for the env file's pid behind the port first."""
    server, found = start_local_server(tmp_path)
    raw = {**gguf_config(tmp_path), "n_users": 1, "systems": ["nomem"]}
    raw["llm"]["cache_dir"] = str(tmp_path / "cache")
    try:
        for name in (
            local_server.BASE_URL_ENV,
            local_server.MODEL_ID_ENV,
            local_server.PID_ENV,
            local_server.KEY_ENV,
        ):
            monkeypatch.setenv(name, found[name])
        # The server it names answers (the check passes on the genuine server) ...
        cfg = load_config(raw)
        assert client_for("judge", cfg, ledger_path=tmp_path / "u1.csv").text(MSGS)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    cached = sorted(p for p in (tmp_path / "cache").rglob("*.json"))
    port = int(found[local_server.BASE_URL_ENV].rsplit(":", 1)[1].split("/")[0])
    squatter = squat(port)
    try:
        llm = client_for("judge", load_config(raw), ledger_path=tmp_path / "u2.csv")
        with pytest.raises(LLMError) as err:
            llm.text([{"role": "user", "content": "a new prompt"}])
    finally:
        squatter.kill()
        received = squatter.communicate()[0]
    line = str(err.value)
    assert "\n" not in line and f"pid {found[local_server.PID_ENV]}" in line, line
    assert "no longer running" in line and "nothing was sent" in line, line
    assert found[local_server.KEY_ENV] not in line
    assert received == "", received  # not a byte: no key, no prompt, not even a health check
    assert sorted(p for p in (tmp_path / "cache").rglob("*.json")) == cached  # nothing cached


def listener() -> tuple[socket.socket, str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def test_the_named_process_must_hold_the_port():
    mine, url = listener()
    with mine:
        served_process.found_is_ours(url, os.getpid())  # this process listens there: ours
    # A port held by another process (a child in a session of its own) while the file names
    # this one: refused, though the process it names is alive and this user's.
    child = subprocess.Popen(
        [sys.executable, "-c", SQUAT, "0"], stdout=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        assert child.stdout.readline().strip() == "bound"  # type: ignore[union-attr]
        url = f"http://127.0.0.1:{_port_of(child.pid)}/v1"
        served_process.found_is_ours(url, child.pid)
        with pytest.raises(served_process.NotOurs, match="held by a process other"):
            served_process.found_is_ours(url, os.getpid())
    finally:
        child.kill()
        child.wait()
    with pytest.raises(served_process.NotOurs, match="no longer running"):
        served_process.found_is_ours(url, child.pid)


def _port_of(pid: int) -> int:
    """The TCP port process ``pid`` listens on (from /proc, as the check reads it)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        inodes = served_process.group_socket_inodes(pid)
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            for row in Path(table).read_text().splitlines()[1:]:
                f = row.split()
                if f[3] == "0A" and int(f[9]) in inodes:
                    return int(f[1].rsplit(":", 1)[1], 16)
        time.sleep(0.05)
    raise AssertionError(f"process {pid} listens on no port")


def test_a_url_without_its_servers_pid_is_refused_before_anything_is_sent(tmp_path, monkeypatch):
    """An env file from before the pid was written (or a URL typed by hand): nothing proves
    the server behind it is the one started, so nothing goes there."""
    sock, url = listener()
    raw = {**gguf_config(tmp_path), "n_users": 1, "systems": ["nomem"]}
    raw["llm"]["cache_dir"] = str(tmp_path / "cache")
    monkeypatch.setenv(local_server.BASE_URL_ENV, url)
    monkeypatch.setenv(local_server.MODEL_ID_ENV, "ab" * 32)
    monkeypatch.setenv(local_server.KEY_ENV, "k" * 32)
    monkeypatch.delenv(local_server.PID_ENV, raising=False)
    with sock:
        sock.settimeout(0.5)
        llm = client_for("judge", load_config(raw), ledger_path=tmp_path / "u.csv")
        with pytest.raises(LLMError, match=f"without its server's pid \\({local_server.PID_ENV}"):
            llm.text(MSGS)
        with pytest.raises(TimeoutError):
            sock.accept()  # no connection came


def test_a_run_started_with_a_gone_servers_env_file_stops_before_any_job(tmp_path, monkeypatch):
    """onstart (start_for_run) checks a server the user started before any job runs: one line
    (the run's onstart stops on it, memprobe/workflow/lifecycle.py)."""
    sock, url = listener()
    sock.close()  # the server stopped: nothing listens
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    monkeypatch.setenv(local_server.BASE_URL_ENV, url)
    monkeypatch.setenv(local_server.MODEL_ID_ENV, "ab" * 32)
    monkeypatch.setenv(local_server.PID_ENV, str(gone.pid))
    cfg = load_config({**gguf_config(tmp_path), "n_users": 1, "systems": ["nomem"]})
    with pytest.raises(ProviderError) as err:
        local_server.start_for_run(cfg, tmp_path / "server.log")
    line = str(err.value)
    assert "\n" not in line and f"(pid {gone.pid}) is no longer running" in line, line
    assert local_server.BASE_URL_ENV in line  # where the URL was found
