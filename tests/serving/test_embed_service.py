"""The run's embedding server: same vectors as in-process, and a clean fallback without it."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

from memprobe.serving import embed_service, embeddings

pytestmark = pytest.mark.torch  # the server and the fallback load sentence-transformers

TEXTS = ["I review every pull request before lunch.", "She prefers short answers.", "ok"]


@pytest.fixture
def fresh_process_state(monkeypatch):
    """No server in the environment, no model loaded, no fallback remembered."""
    monkeypatch.delenv(embed_service.URL_ENV, raising=False)
    monkeypatch.delenv(embed_service.TOKEN_ENV, raising=False)
    monkeypatch.setattr(embeddings, "_in_process", False)
    embeddings.load_model.cache_clear()
    yield
    embed_service.stop_for_run()
    embeddings.load_model.cache_clear()


def test_served_vectors_equal_in_process_ones_and_load_nothing_here(fresh_process_state, tmp_path):
    url = embed_service.start_for_run(tmp_path / "embed.log")
    assert os.environ[embed_service.URL_ENV] == url
    served = embeddings.encode(TEXTS)
    assert embeddings.load_model.cache_info().currsize == 0  # the server did the work
    local = embeddings.encode_local(TEXTS)
    assert served.shape == local.shape == (3, 384)
    np.testing.assert_allclose(served, local, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(served, axis=1), 1.0, atol=1e-5)

    embed_service.stop_for_run()
    assert embed_service.URL_ENV not in os.environ


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


def test_an_unreachable_server_falls_back_quietly_once(fresh_process_state, monkeypatch):
    from memprobe.serving import served_process

    monkeypatch.setenv(embed_service.URL_ENV, f"http://127.0.0.1:{served_process.free_port()}")
    monkeypatch.setenv(embed_service.TOKEN_ENV, "x")
    first = embeddings.encode(TEXTS[:1])
    assert embeddings._in_process  # later calls go straight to the local model
    np.testing.assert_allclose(first, embeddings.encode_local(TEXTS[:1]), atol=1e-6)
