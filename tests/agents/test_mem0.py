"""mem0 (the real mem0ai library): local store, our writer client, save/load, no network."""

from __future__ import annotations

import csv
import hashlib
import importlib.metadata
import socket
from pathlib import Path

import pytest

from memprobe.config.loading import load_config
from memprobe.llm.client import client_for
from memprobe.workflow import preflight
from tests.helpers.agents import writer_system
from tests.helpers.endpoint import record_requests
from tests.helpers.workflow import tiny_config
from tests.netguard.sitecustomize import install

MESSAGES = [
    "Help me plan a weekend sea kayaking trip for two.",
    "I get seasick on open water, so keep us in the sheltered bay.",
    "My partner is vegetarian; pack food for that.",
    "Last year we capsized near the pier and lost the map.",
]

QUERIES = ["kayak trip", "food preferences", "what went wrong last time", "seasick"]


@pytest.fixture
def no_network(monkeypatch):
    """Refuse (and record) every non-loopback connection in this process."""
    attempts: list[str] = []
    monkeypatch.setattr(socket.socket, "connect", socket.socket.connect)
    monkeypatch.setattr(socket.socket, "connect_ex", socket.socket.connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", socket.getaddrinfo)
    install(attempts=attempts)
    yield attempts
    assert attempts == [], f"network access attempted: {attempts}"


def test_guard_refuses_public_addresses_and_allows_loopback(monkeypatch, endpoint):
    attempts: list[str] = []
    monkeypatch.setattr(socket.socket, "connect", socket.socket.connect)
    monkeypatch.setattr(socket.socket, "connect_ex", socket.socket.connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", socket.getaddrinfo)
    install(attempts=attempts)
    with pytest.raises(OSError):
        socket.create_connection(("huggingface.co", 443), timeout=1)
    with pytest.raises(OSError):
        socket.socket().connect(("1.1.1.1", 443))
    assert len(attempts) == 2
    port = int(endpoint.base_url.rsplit(":", 1)[1].split("/")[0])
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    assert len(attempts) == 2


def tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + p.read_bytes())
    return h.hexdigest()


def without_score(item: dict) -> dict:
    return {k: v for k, v in item.items() if k != "score"}


def make_system(base_url: str, tmp_path: Path, workdir: Path | None):
    from memprobe.agents.mem0 import Mem0

    raw = tiny_config(base_url, systems=["mem0"])
    raw["llm"]["cache_dir"] = str(tmp_path / "cache")
    cfg = load_config(raw)
    system = Mem0(
        config=cfg,
        assistant=client_for("assistant", cfg),
        writer=client_for("writer", cfg, ledger_path=tmp_path / "ledger.csv", job="t"),
        workdir=workdir,
    )
    system.reset("user_001")
    return system


@pytest.mark.torch
def test_search_after_load_equals_search_before_save(no_network, endpoint, tmp_path):
    live = tmp_path / "run" / "store"
    system = make_system(endpoint.base_url, tmp_path, live)
    assert system.get_all_memories() == [] and system.search("anything", 5) == []
    system.end_turn(1, MESSAGES[0], [])
    history = [{"agent": "ok", "user": m} for m in MESSAGES[1:]]
    for i in range(1, len(history)):
        system.end_turn(1, MESSAGES[0], history[:i])
    system.end_episode(1, MESSAGES[0], history)

    items = system.get_all_memories()
    assert items, "mem0 extracted nothing"
    assert all(i["category"] == "fact" and i["content"] for i in items)
    before = {q: system.search(q, 5) for q in QUERIES}
    assert any(before.values())
    assert all(len(v) <= 5 for v in before.values())
    # The store lives on disk under the system's store/, mem0's home inside it.
    assert (live / "mem0" / "qdrant").is_dir() and (live / "mem0" / "history.db").is_file()

    saved = tmp_path / "saved"
    system.save(saved)
    digest = tree_digest(saved)

    other = make_system(endpoint.base_url, tmp_path, tmp_path / "probe" / "store")
    other.load(saved)
    after = {q: other.search(q, 5) for q in QUERIES}
    # Same items in the same order; scores agree to float32 precision (qdrant persists
    # vectors as float32, the live in-memory copy scored with the original floats).
    assert {q: [without_score(i) for i in v] for q, v in after.items()} == {
        q: [without_score(i) for i in v] for q, v in before.items()
    }
    for q in QUERIES:
        assert [i["score"] for i in after[q]] == pytest.approx(
            [i["score"] for i in before[q]], abs=1e-6
        )
    assert other.get_all_memories() == items
    assert tree_digest(saved) == digest, "load wrote into the saved store"

    # Every extraction went through our writer client: its ledger has the calls.
    rows = list(csv.DictReader(open(tmp_path / "ledger.csv")))
    assert len(rows) == len(MESSAGES) and {r["role"] for r in rows} == {"writer"}
    meta = system.meta()
    assert meta["mem0ai"] == importlib.metadata.version("mem0ai") == "2.2.1"
    assert meta["adds"] == len(MESSAGES)
    import torch

    assert torch.get_num_threads() == 1  # its encodes share the cores with the run's jobs


@pytest.mark.torch
def test_users_do_not_share_a_store(no_network, endpoint, tmp_path):
    # Both systems keep the same user id, so mem0's user filter cannot hide a shared store:
    # only separate stores keep b from reading a's items.
    a = make_system(endpoint.base_url, tmp_path, tmp_path / "a" / "store")
    a.end_turn(1, MESSAGES[0], [])
    a_items = a.get_all_memories()
    assert a_items
    b = make_system(endpoint.base_url, tmp_path, tmp_path / "b" / "store")
    assert b.user_id == a.user_id
    assert b.get_all_memories() == [] and b.search(QUERIES[0], 5) == []
    assert b.recall(MESSAGES[0], []) == []
    b.end_turn(1, MESSAGES[2], [])
    b_items = b.get_all_memories()
    assert b_items and not {i["content"] for i in b_items} & {i["content"] for i in a_items}
    assert a.get_all_memories() == a_items  # b's write never reached a


@pytest.mark.torch
def test_mem0_extraction_goes_to_its_configured_model(endpoint, tmp_path):
    from memprobe.agents.mem0 import Mem0

    seen = record_requests(endpoint)
    writer = {"model": "extract-4o-mini", "temperature": 0.0, "max_tokens": 2000}
    _, system = writer_system(Mem0, "mem0", endpoint.base_url, tmp_path, writer)
    system.end_turn(1, "I get seasick, keep us in the bay.", [])
    bodies = seen["writer"]
    assert bodies and {b["model"] for b in bodies} == {"extract-4o-mini"}
    assert {(b["temperature"], b["max_tokens"]) for b in bodies} == {(0.0, 2000)}
    assert system.meta()["writer_model"] == "extract-4o-mini"


@pytest.mark.torch
def test_openai_embeddings_are_ledgered_and_replayed_from_the_cache(no_network, endpoint, tmp_path):
    # embedder: openai (the paper protocol) goes through our client, not mem0's own OpenAI
    # client: every embeddings request the endpoint saw is a ledger row, and a rerun pays none.
    from memprobe.agents.mem0 import Mem0

    def run(name: str) -> tuple[list, list[dict]]:
        raw = tiny_config(endpoint.base_url, systems=["mem0"])
        raw["llm"]["cache_dir"] = str(tmp_path / "cache")
        raw["system_settings"] = {"mem0": {"embedder": "openai", "embedder_dims": 16}}
        cfg = load_config(raw)
        ledger = tmp_path / f"{name}.csv"
        system = Mem0(
            config=cfg,
            assistant=client_for("assistant", cfg),
            writer=client_for("writer", cfg, ledger_path=ledger, job="t"),
            workdir=tmp_path / name / "store",
        )
        system.reset("user_001")
        system.end_turn(1, MESSAGES[0], [])
        system.end_turn(1, MESSAGES[0], [{"agent": "ok", "user": MESSAGES[1]}])
        found = [(i["content"], i["score"]) for q in QUERIES[:2] for i in system.search(q, 3)]
        rows = [r for r in csv.DictReader(open(ledger)) if r["role"] == "embedder"]
        return found, rows

    first, rows = run("first")
    sent = list(endpoint.server.embedding_requests)
    assert sent and len(rows) == len(sent)
    assert {(b["model"], b["dimensions"], b["encoding_format"]) for b in sent} == {
        ("text-embedding-3-small", 16, "float")
    }
    assert all(r["model"] == "text-embedding-3-small" and r["cached"] == "false" for r in rows)
    # Row i is request i: its tokens are the endpoint's usage for that request's texts.
    assert [int(r["prompt_tokens"]) for r in rows] == [
        sum(max(1, len(t) // 4) for t in b["input"]) for b in sent
    ]

    again, replayed = run("again")
    assert len(endpoint.server.embedding_requests) == len(sent)  # nothing asked again
    assert len(replayed) == len(rows) and {r["cached"] for r in replayed} == {"true"}
    assert again == first


@pytest.mark.torch  # imports mem0
def test_with_the_runs_embedding_server_mem0_loads_no_model(endpoint, tmp_path, monkeypatch):
    # A run's mem0 jobs encode through its embedding server, as A-Mem's and Mem-T's do: no
    # torch and sentence-transformers imported per job.
    from memprobe.serving import embeddings
    from memprobe.serving.embed_client import SOCKET_ENV, TOKEN_ENV
    from tests.helpers.encode import EncodeServer

    def no_model(*args, **kwargs):
        raise AssertionError("mem0 loaded the embedding model in its job")

    monkeypatch.setattr(embeddings, "encode_local", no_model)
    monkeypatch.setattr(embeddings, "_in_process", False)
    path = str(tmp_path / "embed.sock")
    monkeypatch.setenv(SOCKET_ENV, path)
    monkeypatch.setenv(TOKEN_ENV, "tok-1")
    server = EncodeServer(path, "tok-1", dim=384)
    try:
        system = make_system(endpoint.base_url, tmp_path, tmp_path / "store")
        for i in range(1, len(MESSAGES)):
            system.end_turn(1, MESSAGES[0], [{"agent": "ok", "user": m} for m in MESSAGES[1:i]])
        items = system.get_all_memories()
        system.search(QUERIES[0], 5)
    finally:
        server.close()
    sent = [t for _, _, body in server.requests for t in body["texts"]]
    assert items and QUERIES[0] in sent
    assert {i["content"] for i in items} <= set(sent)  # each stored fact was encoded there


@pytest.mark.torch
def test_mem0_minilm_vectors_are_those_of_mem0s_own_huggingface_embedder():
    from mem0.configs.embeddings.base import BaseEmbedderConfig
    from mem0.embeddings.huggingface import HuggingFaceEmbedding
    from memprobe.agents.mem0 import MINILM_DIMS, _minilm_class

    from memprobe.serving import embeddings

    theirs = HuggingFaceEmbedding(
        BaseEmbedderConfig(model=embeddings.minilm_path(), model_kwargs={"device": "cpu"})
    )
    ours = _minilm_class()(BaseEmbedderConfig(model="all-MiniLM-L6-v2", embedding_dims=MINILM_DIMS))
    assert ours.embed(MESSAGES[0]) == pytest.approx(theirs.embed(MESSAGES[0]), abs=1e-6)
    assert len(ours.embed(MESSAGES[0])) == MINILM_DIMS
    for a, b in zip(ours.embed_batch(MESSAGES), theirs.embed_batch(MESSAGES), strict=True):
        assert a == pytest.approx(b, abs=1e-6)


def test_the_bm25_model_cache_is_this_users_alone(tmp_path, monkeypatch):
    # fastembed's default, /tmp/fastembed_cache, is shared: another user could plant the BM25
    # model that hybrid search (the paper protocol) loads.
    import os
    import tempfile

    from memprobe.agents import mem0

    monkeypatch.delenv("FASTEMBED_CACHE_PATH", raising=False)
    monkeypatch.setenv("MEMPROBE_MODEL_CACHE", str(tmp_path / "models"))
    cache = mem0._fastembed_cache()
    assert cache == tmp_path / "fastembed" != Path(tempfile.gettempdir()) / "fastembed_cache"

    def cache_lines():
        return [m for m in mem0.hybrid_models_missing() if "fastembed's" in m]

    assert cache_lines() == [f"fastembed's Qdrant/bm25 model (in {cache})"]
    model = cache / "models--Qdrant--bm25" / "config.json"
    model.parent.mkdir(parents=True)
    model.write_text("{}")
    assert cache_lines() == []
    model.parent.chmod(0o777)  # anyone may swap the model
    (line,) = cache_lines()
    assert "writable by others" in line and "\n" not in line
    model.parent.chmod(0o755)
    monkeypatch.setenv("FASTEMBED_CACHE_PATH", str(cache))  # a configured path is checked too
    model.chmod(0o666)
    assert "writable by others" in cache_lines()[0]
    model.chmod(0o644)
    if os.getuid() == 0:  # only root can hand a file to another user
        os.chown(model, 12345, 12345)  # planted by another user
        assert "owned by uid 12345" in cache_lines()[0]


def test_hybrid_search_without_its_models_stops_before_any_job(monkeypatch):
    from memprobe.agents import mem0

    monkeypatch.setattr(mem0, "_installed", lambda module: False)
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["mem0"])
    raw["llm"] = {"backend": "fake"}  # nothing else to check before the first job
    raw["system_settings"] = {"mem0": {"hybrid_search": True}}
    with pytest.raises(
        preflight.PreflightError, match=r"system_settings\.mem0\.hybrid_search: "
    ) as err:
        preflight.check(load_config(raw))
    assert "en_core_web_sm" in str(err.value) and "\n" not in str(err.value)
    raw["system_settings"]["mem0"]["hybrid_search"] = False
    preflight.check(load_config(raw))  # off: nothing is needed
