"""The run's embedding server: same vectors as in-process, and a clean fallback without it."""

from __future__ import annotations

import json
import logging
import os
import threading
import time

import numpy as np
import pytest

from memprobe.serving import embed_service, embeddings, served_process
from tests.helpers.squatters import Squatter

pytestmark = pytest.mark.torch  # the server and the fallback load sentence-transformers

TEXTS = ["I review every pull request before lunch.", "She prefers short answers.", "ok"]


@pytest.fixture
def fresh_process_state(monkeypatch):
    """No server in the environment, no model loaded, no fallback remembered."""
    monkeypatch.delenv(embed_service.SOCKET_ENV, raising=False)
    monkeypatch.delenv(embed_service.TOKEN_ENV, raising=False)
    monkeypatch.setattr(embeddings, "_in_process", False)
    embeddings.load_model.cache_clear()
    yield
    embed_service.stop_for_run()
    embeddings.load_model.cache_clear()


def test_served_vectors_equal_in_process_ones_and_load_nothing_here(fresh_process_state, tmp_path):
    where = embed_service.start_for_run(tmp_path / "embed.log")
    assert os.environ[embed_service.SOCKET_ENV] == where
    served = embeddings.encode(TEXTS)
    assert embeddings.load_model.cache_info().currsize == 0  # the server did the work
    assert embeddings.served()
    local = embeddings.encode_local(TEXTS)
    assert served.shape == local.shape == (3, 384)
    np.testing.assert_allclose(served, local, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(served, axis=1), 1.0, atol=1e-5)

    embed_service.stop_for_run()
    assert embed_service.SOCKET_ENV not in os.environ


def test_a_wrong_token_is_refused_and_the_job_encodes_itself(
    fresh_process_state, tmp_path, monkeypatch, caplog
):
    embed_service.start_for_run(tmp_path / "embed.log")
    monkeypatch.setenv(embed_service.TOKEN_ENV, "not-the-token")
    with pytest.raises(embed_service.Unreachable, match="403"):
        embed_service.encode_remote(TEXTS, None)
    with caplog.at_level(logging.WARNING, logger="memprobe"):
        vecs = embeddings.encode(TEXTS)
    assert vecs.shape == (3, 384)
    assert embeddings.load_model.cache_info().currsize == 1  # loaded here instead
    assert "loading the embedding model in this job" in caplog.text


def test_an_unreachable_server_falls_back_quietly_once(fresh_process_state, monkeypatch, tmp_path):
    monkeypatch.setenv(embed_service.SOCKET_ENV, str(tmp_path / "nobody-listens.sock"))
    monkeypatch.setenv(embed_service.TOKEN_ENV, "x")
    assert embeddings.served()
    first = embeddings.encode(TEXTS[:1])
    assert embeddings._in_process and not embeddings.served()  # straight to the local model
    np.testing.assert_allclose(first, embeddings.encode_local(TEXTS[:1]), atol=1e-6)


def test_only_the_model_load_is_niced_not_the_encodes(fresh_process_state, tmp_path):
    # A-Mem and Mem-T rollouts (the longest chains) wait on the encodes: a niced server
    # starved them on a loaded machine (issue 20). The handler threads come from the main one.
    embed_service.start_for_run(tmp_path / "embed.log")
    pid = embed_service._run_server.proc.pid
    stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    assert int(stat[16]) == 0  # field 19: nice


def test_encodes_run_on_one_thread_in_the_server_and_in_a_job(fresh_process_state, tmp_path):
    # Beside one busy process, a thread per core made each encode wait at its barriers for a
    # descheduled thread: 14x the wall time (issue 20, benchmarks/embed_contention.py).
    from memprobe.serving import served_process

    where = embed_service.start_for_run(tmp_path / "embed.log")
    embeddings.encode(TEXTS[:1])  # waits for the model
    code, body = served_process.unix_request(where, "GET", "/health", timeout=10)
    assert code == 200 and json.loads(body) == {"ready": True, "threads": 1}

    import torch

    torch.set_num_threads(2)  # torch's default on a 2-core machine; earlier tests pinned it
    embeddings.encode_local(TEXTS[:1])  # a job without the server
    assert torch.get_num_threads() == 1


def test_a_few_texts_do_not_wait_behind_a_bulk_request(fresh_process_state, tmp_path):
    # A probe encoding a whole store takes seconds on one thread; a rollout's turn (a few
    # texts) goes through the other lane meanwhile. Sharing one lane stalled the heaviest
    # A-Mem rollout 28 times for 4-7 s (issue 20).
    embed_service.start_for_run(tmp_path / "embed.log")
    embeddings.encode(TEXTS[:1])  # the model is loaded
    bulk = [f"{TEXTS[0]} {i} " * 6 for i in range(200)]
    assert len(bulk) > embed_service.BULK_TEXTS >= len(TEXTS)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (embeddings.encode(bulk), done.set()))
    worker.start()
    time.sleep(0.3)
    assert not done.is_set(), "the bulk request ended too soon to test against"
    small = embeddings.encode(TEXTS)
    assert not done.is_set(), "the few texts waited for the bulk request"
    worker.join()
    # Each lane has its own copy of the model; every copy gives the same vectors.
    for copy in range(embed_service.small_lanes() + 1):
        np.testing.assert_array_equal(small, embeddings.encode_local(TEXTS, copy=copy))


def test_few_text_requests_run_at_once_up_to_the_lanes(fresh_process_state, tmp_path, monkeypatch):
    # 50 users' Mem-T rollouts queued on one lane: one core busy, the other idle, the run at a
    # fifth of its rate. Two lanes: a turn's encode does not wait for another turn's.
    monkeypatch.setenv(embed_service.LANES_ENV, "2")
    embed_service.start_for_run(tmp_path / "embed.log")
    embeddings.encode(TEXTS[:1])  # the model is loaded
    slow = [" ".join(f"word{i} {j}" for j in range(120)) for i in range(embed_service.BULK_TEXTS)]
    done = threading.Event()
    worker = threading.Thread(target=lambda: (embeddings.encode(slow), done.set()))
    worker.start()
    time.sleep(0.1)
    assert not done.is_set(), "the slow request ended too soon to test against"
    embeddings.encode(TEXTS)
    assert not done.is_set(), "the few texts waited for the other few-text request"
    worker.join()


def test_max_seq_length_reaches_the_server_and_unset_keeps_the_models_own(
    fresh_process_state, tmp_path
):
    # memt.embedder_max_seq_length: unset keeps the model's own maximum (MiniLM's is 256,
    # bge-m3's 8192, what the release's Chroma used); a value cuts texts there, served or not.
    long = [" ".join(["word"] * 200) + " seasick on open water"]  # past 64 tokens, under 256
    assert embeddings.load_model(None).max_seq_length == 256  # MiniLM's own, nothing forced
    embed_service.start_for_run(tmp_path / "embed.log")
    served_cut = embeddings.encode(long, None, 64)
    served_full = embeddings.encode(long, None)
    assert embeddings.load_model(None, 0, 64).max_seq_length == 64
    np.testing.assert_allclose(served_cut, embeddings.encode_local(long, None, 0, 64), atol=1e-6)
    np.testing.assert_allclose(served_full, embeddings.encode_local(long), atol=1e-6)
    assert float(served_cut[0] @ served_full[0]) < 0.999  # the cut was applied on the server


# -- issue 27: nobody else can stand in for the embedding server ---------------------------
def test_a_squatter_on_the_port_gets_nothing_and_the_run_uses_its_own_server(
    fresh_process_state, tmp_path, monkeypatch
):
    squatter = Squatter()  # a real socket on the port the run used to pick for its server
    # The port the run used to pick and pass to its server, taken first (the race, made
    # certain). The run picks no port any more: its server has a private Unix socket.
    monkeypatch.setattr(served_process, "free_port", lambda: squatter.port, raising=False)
    texts = ["Mara takes her insulin before the 7am swim."]
    try:
        where = embed_service.start_for_run(tmp_path / "embed.log")
        served = embeddings.encode(texts)
    finally:
        squatter.close()
    assert squatter.connections == 0 and squatter.received == b""  # no token, no text
    assert embeddings.load_model.cache_info().currsize == 0  # the run's own server encoded them
    assert served_process.peer_pid(where) == embed_service._run_server.proc.pid
    np.testing.assert_allclose(served, embeddings.encode_local(texts), atol=1e-6)


def test_a_socket_held_by_another_process_stops_the_start_in_one_line(
    fresh_process_state, tmp_path, monkeypatch
):
    import tempfile
    from pathlib import Path

    private = Path(tempfile.mkdtemp(dir="/tmp"))  # short: a socket path has ~100 bytes
    squatter = Squatter(private / "embed.sock")  # not the child: this test's own process
    monkeypatch.setattr(served_process, "private_dir", lambda prefix: private)
    try:
        with pytest.raises(embed_service.Unreachable, match="not by the server we started") as err:
            embed_service.start_for_run(tmp_path / "embed.log")
    finally:
        squatter.close()
    assert "\n" not in str(err.value) and embed_service.SOCKET_ENV not in os.environ
    assert squatter.received == b""  # the proof sends nothing: the kernel names the listener
    assert embed_service._run_server is None and not private.exists()  # child stopped, cleaned


@pytest.mark.parametrize("value", ["x", "0", "-1", "1.5"])
def test_a_bad_lane_count_is_one_line_and_the_server_does_not_start(
    value, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv(embed_service.LANES_ENV, value)
    assert embed_service.main(["--socket", str(tmp_path / "embed.sock")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"memprobe embedding server: MEMPROBE_EMBED_LANES={value!r}: "
        "expected a whole number of lanes, 1 or more"
    ]
    assert not (tmp_path / "embed.sock").exists()
