"""amem: LLM-written notes, links and neighbour evolution reaching the dump and the index."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from memprobe.agents.amem import AMem, enhanced_text, evolution_schema

from memprobe.config.loading import load_config
from memprobe.llm.client import client_for
from memprobe.protocol.slotfill import slotfill_user
from memprobe.serving import embeddings
from memprobe.spec.prompts import prompt_path
from memprobe.spec.taxonomy import load_guides
from tests.helpers.agents import writer_system
from tests.helpers.endpoint import Endpoint, record_requests
from tests.helpers.paper import paper_config, text_vectors
from tests.helpers.protocol import TWO_ENTRY_BANK, user_text
from tests.helpers.workflow import tiny_config

TASK = "Help me plan a weekend sea kayaking trip for two."

FINAL = "I get seasick on open water, so keep us in the sheltered bay."

NEW_CONTEXT = "A kayaking trip that must avoid open water because the person gets seasick."


def analysis(keywords, context, tags):
    return {"keywords": keywords, "context": context, "tags": tags}


@pytest.fixture
def scripted(tmp_path):
    """An endpoint whose writer replies are pinned: analyze, analyze, evolve."""
    script = {
        "writer": [
            analysis(["kayaking", "weekend"], "Planning a short trip.", ["travel"]),
            analysis(["seasick", "bay"], "The person gets seasick.", ["health"]),
            {
                "should_evolve": True,
                "actions": ["strengthen", "update_neighbor"],
                "links": [1],
                "tags": ["health", "travel"],
                "neighbour_updates": [
                    {"neighbour": 1, "context": NEW_CONTEXT, "tags": ["travel", "health"]}
                ],
            },
        ]
    }
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    ep = Endpoint(str(path))
    yield ep
    ep.close()


def make_system(base_url: str, tmp_path, **over) -> AMem:
    raw = tiny_config(base_url, systems=["amem"], **over)
    raw["llm"]["cache_dir"] = str(tmp_path / "cache")
    cfg = load_config(raw)
    system = AMem(
        config=cfg,
        assistant=client_for("assistant", cfg),
        writer=client_for("writer", cfg, ledger_path=tmp_path / "ledger.csv"),
    )
    system.reset("user_001")
    return system


@pytest.mark.torch
def test_scripted_evolution_links_and_updates_neighbour_in_dump_and_search(scripted, tmp_path):
    system = make_system(scripted.base_url, tmp_path)
    system.end_turn(1, TASK, [])  # turn 1 writes the task
    system.end_episode(1, TASK, [{"agent": "Here is a plan.", "user": FINAL}])

    first, second = system.get_all_memories()
    assert (first["content"], first["category"]) == (TASK, "task")
    assert (second["content"], second["category"]) == (FINAL, "user")
    for note in (first, second):
        assert {"keywords", "context", "tags", "links", "evolution_history"} <= set(note)
    # strengthen: the new note links to its neighbour and takes the suggested tags.
    assert second["links"] == [first["id"]]
    assert second["tags"] == ["health", "travel"]
    # update_neighbor: the older note's context and tags were rewritten, with history kept.
    assert first["context"] == NEW_CONTEXT
    assert first["tags"] == ["travel", "health"]
    step = first["evolution_history"][-1]
    assert step["by"] == second["id"]
    assert step["old_context"] == "Planning a short trip."
    assert step["new_context"] == NEW_CONTEXT

    # The update reached the index: the score is the cosine with the *current* enhanced text.
    query = "open water seasickness on a kayak trip"
    hits = system.search(query, 2)
    by_id = {h["id"]: h for h in hits}
    assert by_id[first["id"]]["context"] == NEW_CONTEXT
    assert by_id[second["id"]]["links"] == [first["id"]]
    q = embeddings.encode([query])[0]
    now = float(embeddings.encode([enhanced_text(first)])[0] @ q)
    stale = dict(first, context="Planning a short trip.", tags=["travel"])
    before = float(embeddings.encode([enhanced_text(stale)])[0] @ q)
    assert by_id[first["id"]]["score"] == pytest.approx(now, abs=1e-5)
    assert abs(now - before) > 1e-3  # the check above could tell a stale index apart

    # save/load keeps notes, links and history, and search gives the same answer.
    store = tmp_path / "store"
    system.save(store)
    again = make_system(scripted.base_url, tmp_path)
    again.reset("user_999")
    again.load(store)
    assert again.user_id == "user_001"
    assert again.get_all_memories() == system.get_all_memories()
    assert [(h["id"], round(h["score"], 5)) for h in again.search(query, 2)] == [
        (h["id"], round(h["score"], 5)) for h in hits
    ]


@pytest.mark.torch
def test_unscripted_notes_are_schema_valid_and_recall_uses_tags(endpoint, tmp_path):
    system = make_system(endpoint.base_url, tmp_path)
    system.end_turn(1, TASK, [])
    history = [{"agent": "A plan.", "user": "Make it cheaper."}]
    system.end_turn(1, TASK, history)
    system.end_episode(1, TASK, [*history, {"agent": "Cheaper plan.", "user": FINAL}])
    notes = system.get_all_memories()
    assert [n["content"] for n in notes] == [TASK, "Make it cheaper.", FINAL]
    assert all(n["keywords"] and n["tags"] and n["context"] for n in notes)
    known = {n["id"] for n in notes}
    assert all(set(n["links"]) <= known for n in notes)
    lines = system.recall("next task", [{"agent": "x", "user": "Make it cheaper."}])
    assert len(lines) == 3 and all("[tags: " in line for line in lines)
    assert system.meta()["neighbours"] == 5


def test_evolution_schema_only_names_shown_neighbours():
    schema = evolution_schema(2)
    ok = {"should_evolve": True, "actions": ["strengthen"], "links": [2]}
    assert schema.model_validate(ok).links == [2]
    with pytest.raises(ValueError):
        schema.model_validate({**ok, "links": [3]})
    with pytest.raises(ValueError):
        schema.model_validate(
            {**ok, "neighbour_updates": [{"neighbour": 0, "context": "c", "tags": ["t"]}]}
        )


def test_amem_without_writer_fails_with_one_line(tmp_path):
    cfg = load_config(tiny_config("http://127.0.0.1:9/v1", systems=["amem"]))
    system = AMem(config=cfg, assistant=client_for("assistant", cfg), writer=None)
    system.reset("user_001")
    with pytest.raises(ValueError, match="writer role"):
        system.end_turn(1, TASK, [])
    assert np.asarray(system.get_all_memories()).size == 0


def unit_vectors(texts: list[str]) -> np.ndarray:
    rng = np.random.default_rng(len(texts))
    vecs = rng.normal(size=(len(texts), 8)).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def test_a_turn_encodes_the_users_message_once(scripted, tmp_path, monkeypatch):
    # A turn recalls with the user's message, then files that message as a note, whose
    # neighbours are found with it again: one request for it, alone (a batch would pad it).
    sent: list[list[str]] = []
    monkeypatch.setattr(
        embeddings, "encode", lambda texts, path=None: sent.append(texts) or unit_vectors(texts)
    )
    system = make_system(scripted.base_url, tmp_path)
    system.end_turn(1, TASK, [])  # the task is note 1
    history = [{"agent": "Here is a plan.", "user": FINAL}]
    system.recall(TASK, history)  # searches with FINAL
    system.end_turn(1, TASK, history)  # files FINAL, then its neighbours are found with FINAL
    system.search(FINAL, 1)  # waits for the batch the last write sent ahead
    first, second = (enhanced_text(n) for n in system.notes)
    assert sent[1:] == [[FINAL], [first, second]]  # after note 1 alone: evolution rewrote it


def test_a_write_encodes_its_notes_while_the_next_call_is_in_flight(
    scripted, tmp_path, monkeypatch
):
    # The batch the next search would encode (the new note, the neighbours evolution rewrote)
    # is sent as the write returns, so the rollout does not wait for it between the
    # simulator's reply and the assistant's call (issue 20); the search then reuses it.
    sent: list[list[str]] = []
    started, release = threading.Event(), threading.Event()

    def encode(texts, path=None):
        sent.append(texts)
        started.set()
        release.wait(10)
        return unit_vectors(texts)

    monkeypatch.setattr(embeddings, "encode", encode)
    monkeypatch.setattr(embeddings, "served", lambda: True)  # as under the run's server
    system = make_system(scripted.base_url, tmp_path)
    system.end_turn(1, TASK, [])  # returns while the note's encode is held
    assert started.wait(2), "the write did not encode its note ahead"
    assert sent == [[enhanced_text(system.notes[0])]]
    release.set()
    assert [h["id"] for h in system.search(FINAL, 1)] == ["n0001"]
    assert sent[1:] == [[FINAL]]  # the note's vector came from the encode sent ahead


def test_amem_writes_at_its_own_temperature(endpoint, tmp_path):
    from memprobe.agents.amem import AMem

    seen = record_requests(endpoint)
    cfg, system = writer_system(AMem, "amem", endpoint.base_url, tmp_path, {"temperature": 1.0})
    system.end_turn(1, "Help me plan a balcony garden.", [])
    assert seen["writer"] and {b["temperature"] for b in seen["writer"]} == {1.0}
    assert client_for("writer", cfg).temperature == 0.0  # only amem's writer changed


def test_compat_stale_index_searches_each_note_as_it_was_filed(scripted, tmp_path, monkeypatch):
    monkeypatch.setattr(embeddings, "encode", lambda texts, path=None: text_vectors(texts))
    query = "open water seasickness on a kayak trip"
    q = text_vectors([query])[0]
    for stale in (False, True):
        # The second system replays the first one's writer replies from the response cache.
        system = make_system(scripted.base_url, tmp_path, compat={"amem_stale_index": stale})
        system.end_turn(1, TASK, [])
        filed = enhanced_text(system.notes[0])
        system.end_episode(1, TASK, [{"agent": "Here is a plan.", "user": FINAL}])
        first = system.notes[0]
        assert first["context"] == NEW_CONTEXT  # the evolution rewrote the first note
        indexed = filed if stale else enhanced_text(first)
        hit = next(h for h in system.search(query, 2) if h["id"] == first["id"])
        assert hit["score"] == pytest.approx(float(text_vectors([indexed])[0] @ q), abs=1e-6)
        assert hit["context"] == NEW_CONTEXT  # the item itself is the current note
        store = tmp_path / f"store-{stale}"
        system.save(store)
        again = make_system(scripted.base_url, tmp_path, compat={"amem_stale_index": stale})
        again.load(store)
        assert again._index_texts() == system._index_texts()


GUIDES = load_guides()


def test_paper_amem_hands_the_slot_filler_the_release_items(endpoint, tmp_path, monkeypatch):
    from memprobe.agents.amem import AMem

    from memprobe.protocol.probe import probe
    from memprobe.serving import embeddings

    monkeypatch.setattr(embeddings, "encode", text_vectors)
    ep, seen = endpoint, record_requests(endpoint)
    for shape, cfg in (
        ("ours", load_config(tiny_config(ep.base_url, systems=["amem"]))),
        ("release", paper_config(ep.base_url, tmp_path)),
    ):
        assert cfg.system_settings.amem.item_shape == shape
        system = AMem(config=cfg, assistant=client_for("assistant", cfg),
                      writer=client_for("writer", cfg, ledger_path=tmp_path / "w.csv"))  # fmt: skip
        system.reset("user_001")
        system.end_turn(1, "Help me plan a kayak trip.", [])
        system.end_episode(
            1, "Help me plan a kayak trip.", [{"agent": "a", "user": "I get seasick."}]
        )
        retrieved = probe(system, TWO_ENTRY_BANK, GUIDES, 5, "user_001")
        slotfill = client_for("slotfill", cfg)
        for mode, kw in (("dump_all", {"memories": system.get_all_memories()}),
                         ("retrieve", {"retrieved": retrieved})):  # fmt: skip
            before = len(seen["slotfill"])
            slotfill_user(
                user_id="user_001", system="amem", mode=mode, bank=TWO_ENTRY_BANK, guides=GUIDES,
                llm=slotfill, prompt=str(prompt_path("slotfill")), context_tokens=245_000, **kw,
            )  # fmt: skip
            text = user_text(seen["slotfill"][before])
            items = json.loads(text.split("MEMORY RECORDS\n", 1)[1].split("\n\nSLOT\n", 1)[0])
            keys = {frozenset(i) for i in items}
            if shape == "ours":
                assert all({"links", "evolution_history", "task_index"} <= k for k in keys)
            elif mode == "dump_all":
                assert keys == {
                    frozenset(("id", "content", "keywords", "context", "tags", "category"))
                }
            else:
                want = frozenset(
                    ("id", "content", "keywords", "context", "tags", "category", "score")
                )
                assert keys == {want} and {i["category"] for i in items} == {""}
