"""The client half of the run's embedding server (memprobe/serving/embed_client.py): vectors
from the socket and token in the environment, and :class:`Unreachable` for every way that
fails, so the job encodes in-process instead."""

from __future__ import annotations

import numpy as np
import pytest

from memprobe.serving.embed_client import SOCKET_ENV, TOKEN_ENV, Unreachable, encode_remote
from tests.helpers.encode import EncodeServer, bag_of_words

TEXTS = ["I keep bees on the roof", "the hives face north"]


@pytest.fixture
def socket_path(tmp_path, monkeypatch):
    path = str(tmp_path / "embed.sock")
    monkeypatch.setenv(SOCKET_ENV, path)
    monkeypatch.setenv(TOKEN_ENV, "tok-1")
    return path


@pytest.fixture
def server(socket_path):
    s = EncodeServer(socket_path, "tok-1")
    yield s
    s.close()


def test_vectors_come_back_as_the_server_encoded_them(server):
    vecs = encode_remote(TEXTS, "/models/bge", max_seq_length=64)
    np.testing.assert_array_equal(vecs, bag_of_words(TEXTS).astype(np.float32))
    assert vecs.dtype == np.float32 and vecs.flags.writeable  # a copy, not the reply's buffer
    ((route, token, body),) = server.requests
    assert route == "/encode" and token == "tok-1"
    assert body == {"texts": TEXTS, "path": "/models/bge", "max_seq_length": 64}


def test_an_unset_max_seq_length_is_not_sent(server):
    encode_remote(TEXTS[:1], None)
    assert server.requests[0][2] == {"texts": TEXTS[:1], "path": None}


@pytest.mark.parametrize("unset", [SOCKET_ENV, TOKEN_ENV])
def test_without_the_servers_socket_or_token_it_is_unreachable(socket_path, monkeypatch, unset):
    monkeypatch.delenv(unset)
    with pytest.raises(Unreachable, match="no embedding server in this environment"):
        encode_remote(TEXTS, None)


def test_nothing_listening_is_unreachable_naming_the_socket(socket_path):
    with pytest.raises(Unreachable, match=f"embedding server at {socket_path}: "):
        encode_remote(TEXTS, None, timeout_s=5)


def test_a_refused_token_is_unreachable_with_the_status(socket_path):
    s = EncodeServer(socket_path, "another-token")
    try:
        with pytest.raises(Unreachable, match="HTTP Error 403: .*bad token"):
            encode_remote(TEXTS, None)
    finally:
        s.close()


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        ({"rows": 1, "data": "AAAAAAAAAAA="}, "'dim'"),  # two floats, no dim
        ({"rows": 3, "dim": 1, "data": "AAAAAAAAAAA="}, "reshape"),  # two floats, three rows
    ],
)
def test_a_malformed_reply_is_unreachable(socket_path, payload, error):
    s = EncodeServer(socket_path, "tok-1", payload=payload)
    try:
        with pytest.raises(Unreachable, match=error):
            encode_remote(TEXTS, None)
    finally:
        s.close()
