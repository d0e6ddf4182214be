"""A cluster node's embedding server (memprobe/serving/node_embed.py): started by the node's
first job that encodes, used by the next, one however many start at once, gone when idle."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

from memprobe.serving import embed_client, embeddings, node_embed, served_process
from memprobe.workflow import lifecycle

NAMED = (embed_client.TOKEN_ENV, node_embed.NODE_ENV, node_embed.IDLE_ENV)  # by onstart
TEXTS = ["I review every pull request before lunch.", "She prefers short answers."]


@pytest.fixture
def node(monkeypatch):
    """A run's environment as onstart names it on a cluster (a run name of its own)."""
    for name in (embed_client.SOCKET_ENV, *NAMED):
        monkeypatch.setenv(name, "")  # so that the test's values are undone after it
        monkeypatch.delenv(name)
    lifecycle.name_node_servers(idle_s=30)
    monkeypatch.setattr(embeddings, "_in_process", False)
    run, folder = os.environ[node_embed.NODE_ENV], node_embed.node_dir()
    yield run
    for pid in servers(run):
        os.kill(pid, 9)
    for left in folder.glob(f"{run}.*"):
        left.unlink()


def servers(run: str) -> list[int]:
    """The pids of the node servers of ``run`` (its socket in their command line)."""
    found = subprocess.run(["pgrep", "-f", f"{run}.sock"], capture_output=True, text=True)
    return [int(p) for p in found.stdout.split()]


def job(code: str) -> subprocess.Popen:
    """A job of the run: another process with the run's environment."""
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


@pytest.mark.torch
def test_the_first_job_starts_the_node_s_server_and_the_next_job_uses_it(node):
    encode = (
        "import sys; from memprobe.serving import embeddings as e; "
        f"v = e.encode({TEXTS!r}); "
        "assert e.load_model.cache_info().currsize == 0, 'loaded here'; "
        "sys.stdout.write(v.tobytes().hex())"
    )
    first = job(encode).communicate(timeout=120)[0]
    (pid,) = servers(node)
    second = job(encode).communicate(timeout=120)[0]
    assert servers(node) == [pid]  # no second server
    served = np.frombuffer(bytes.fromhex(second), dtype=np.float32).reshape(2, 384)
    assert first == second
    np.testing.assert_array_equal(served, embeddings.encode_local(TEXTS))  # same vectors


def test_jobs_starting_at_once_start_one_server(node):
    ensure = (
        "from memprobe.serving import node_embed as n, served_process as s; import os; "
        "w = n.ensure(os.environ[n.NODE_ENV], os.environ['MEMPROBE_EMBED_TOKEN'], 30); "
        "print(s.peer_pid(w))"
    )
    jobs = [job(ensure) for _ in range(3)]
    pids = {int(j.communicate(timeout=60)[0]) for j in jobs}
    assert len(pids) == 1 and servers(node) == list(pids)


def test_an_idle_server_leaves_and_the_next_job_starts_another(node):
    token = os.environ[embed_client.TOKEN_ENV]
    sock = node_embed.ensure(node, token, idle_s=1.0)
    first = served_process.peer_pid(sock)
    deadline = time.monotonic() + 20
    while os.path.exists(sock) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not os.path.exists(sock)  # its socket went with it
    assert node_embed.ensure(node, token, idle_s=30) == sock
    assert served_process.peer_pid(sock) != first


def test_a_node_folder_others_may_enter_is_refused_in_one_line(node, monkeypatch, tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    monkeypatch.setattr(node_embed, "NODE_DIR", str(folder))
    with pytest.raises(embed_client.Unreachable) as err:
        embed_client.encode_remote(TEXTS, None)
    assert "others may enter it (mode 755)" in str(err.value) and "\n" not in str(err.value)
    assert not servers(node)


def test_without_a_node_or_a_token_there_is_no_server(node, monkeypatch):
    monkeypatch.delenv(embed_client.TOKEN_ENV)
    assert not embed_client.configured()
    with pytest.raises(embed_client.Unreachable, match="no embedding server"):
        embed_client.encode_remote(TEXTS, None)


def test_a_server_taken_for_dead_leaves_its_successor_s_socket_alone(node):
    """A live server whose socket a job removed (it did not answer /health in time) and that
    another replaced: when the first leaves idle, the address stays the second's."""
    token = os.environ[embed_client.TOKEN_ENV]
    sock = node_embed.ensure(node, token, idle_s=1.0)
    first = served_process.peer_pid(sock)
    os.unlink(sock)
    node_embed.ensure(node, token, idle_s=30)
    second = served_process.peer_pid(sock)
    deadline = time.monotonic() + 20
    while first in servers(node) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert servers(node) == [second]
    assert node_embed.listening(sock) and served_process.peer_pid(sock) == second
