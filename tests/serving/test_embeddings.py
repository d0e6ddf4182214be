"""Sentence embeddings (memprobe/serving/embeddings.py) without loading a model: the ranking
every store searches with, and where :func:`encode` gets its vectors (the run's server, else
one fallback per job to in-process). The model's own vectors are tests/serving/
test_embed_service.py's (marked torch)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from memprobe.serving import embeddings
from memprobe.serving.embed_client import SOCKET_ENV, TOKEN_ENV
from tests.helpers.encode import EncodeServer, bag_of_words

TEXTS = ["I keep bees on the roof", "the hives face north"]


def test_top_k_ranks_rows_by_dot_product_best_first_stable_on_ties():
    matrix = np.array([[0.0, 1.0], [1.0, 0.0], [0.6, 0.8], [1.0, 0.0]], dtype=np.float32)
    best = embeddings.top_k(np.array([1.0, 0.0], dtype=np.float32), matrix, 3)
    assert [i for i, _ in best] == [1, 3, 2]  # rows 1 and 3 tie: in row order
    assert [s for _, s in best] == pytest.approx([1.0, 1.0, 0.6])
    assert len(embeddings.top_k(np.array([1.0, 0.0]), matrix, 10)) == 4
    assert embeddings.top_k(np.array([1.0, 0.0]), np.zeros((0, 2)), 3) == []
    many = np.array([[1.0] if i % 3 == 0 else [0.5] for i in range(64)], dtype=np.float32)
    top = embeddings.top_k(np.array([1.0], dtype=np.float32), many, 30)
    ones, halves = [i for i in range(64) if i % 3 == 0], [i for i in range(64) if i % 3]
    assert [i for i, _ in top] == [*ones, *halves][:30]  # ties in row order


@pytest.fixture
def job(tmp_path, monkeypatch):
    """A fresh job's process state, with :func:`encode_local` recording instead of loading."""
    monkeypatch.setattr(embeddings, "_in_process", False)
    monkeypatch.delenv(SOCKET_ENV, raising=False)
    monkeypatch.setenv(TOKEN_ENV, "tok-1")
    local: list[list[str]] = []

    def encode_local(texts, path=None, copy=0, max_seq_length=None):
        local.append(texts)
        return np.ones((len(texts), 3), dtype=np.float32)

    monkeypatch.setattr(embeddings, "encode_local", encode_local)
    return local


def test_no_texts_need_no_model_and_no_server(job):
    assert embeddings.encode([]).shape == (0, 384) and job == []


def test_no_texts_load_no_model_in_process():
    loaded = embeddings.load_model.cache_info().currsize
    assert embeddings.encode_local([]).shape == (0, 384)
    assert embeddings.load_model.cache_info().currsize == loaded


def test_with_the_runs_server_the_job_loads_no_model(job, tmp_path, monkeypatch):
    path = str(tmp_path / "embed.sock")
    monkeypatch.setenv(SOCKET_ENV, path)
    server = EncodeServer(path, "tok-1")
    try:
        assert embeddings.served()
        vecs = embeddings.encode(TEXTS, "/models/bge", max_seq_length=64)
    finally:
        server.close()
    np.testing.assert_array_equal(vecs, bag_of_words(TEXTS).astype(np.float32))
    assert server.requests[0][2]["max_seq_length"] == 64 and job == []


def test_a_server_that_fails_is_tried_once_then_the_job_encodes_itself(
    job, tmp_path, monkeypatch, caplog
):
    path = str(tmp_path / "embed.sock")
    monkeypatch.setenv(SOCKET_ENV, path)
    server = EncodeServer(path, "not-our-token")
    try:
        with caplog.at_level(logging.WARNING, logger="memprobe"):
            first = embeddings.encode(TEXTS[:1])
            second = embeddings.encode(TEXTS)
    finally:
        server.close()
    assert len(server.requests) == 1  # the second encode did not ask again
    assert job == [TEXTS[:1], TEXTS] and first.shape == (1, 3) and second.shape == (2, 3)
    assert not embeddings.served()
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "403" in warning and warning.endswith("loading the embedding model in this job")


def test_without_a_server_the_job_encodes_itself_quietly(job, caplog):
    with caplog.at_level(logging.WARNING, logger="memprobe"):
        embeddings.encode(TEXTS)
    assert job == [TEXTS] and not embeddings.served() and caplog.records == []
