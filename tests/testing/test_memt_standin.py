"""The Mem-T stand-in (memprobe/testing/memt_standin.py): which tool calls it answers to each
kind of request, and its HTTP face (vLLM's routes, its bearer key, a Unix socket)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import httpx2
import pytest

from memprobe.serving import served_process
from memprobe.testing.background import Background
from memprobe.testing.memt_standin import MALFORMED, StandIn, make_server, reply_for
from tests.helpers.workflow import ROOT

FORMATION = "Tools: create_fact, create_experience, update_persona, update_summary."
UPDATE = "Tools: add_item, update_item, delete_item, ignore_item."
RETRIEVE = "Tools: search_facts, search_experiences, search_personas, search_summary, finish."


def calls(text: str) -> list[dict | None]:
    """Each <tool_call> block's JSON, None for a block that is not JSON."""
    out: list[dict | None] = []
    for block in re.findall(r"<tool_call>(.*?)</tool_call>", text, re.S):
        try:
            out.append(json.loads(block))
        except json.JSONDecodeError:
            out.append(None)
    return out


def body(system: str, user: str, *, steps: int = 0) -> dict:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    messages += [{"role": "assistant", "content": "x"}, {"role": "user", "content": "r"}] * steps
    return {"model": "Mem-T-4B", "messages": messages}


def test_formation_writes_every_collection_then_one_malformed_block():
    reply = reply_for(body(FORMATION, "History...\nNewest message: user said: I keep bees"))
    got = calls(reply)
    assert [c["name"] if c else None for c in got] == [
        "create_fact", "create_experience", "update_persona", "update_summary", None,
    ]  # fmt: skip
    assert got[0]["arguments"] == {"content": "The user said they I keep bees"}
    assert reply.endswith(MALFORMED)


def update(candidate: str, similar: list[dict]) -> dict:
    return body(UPDATE, f"Candidate: {candidate}\nMost similar stored items: {json.dumps(similar)}")


def test_update_adds_when_nothing_similar_is_stored():
    (call,) = calls(reply_for(update("Likes tea", [])))
    assert call == {"name": "add_item", "arguments": {"content": "Likes tea"}}


def test_update_choices_depend_on_the_candidate_alone_and_name_stored_ids():
    similar = [{"id": "f1", "content": "Likes tea"}, {"id": "f9", "content": "Drinks coffee"}]
    seen = {}
    for i in range(80):
        candidate = f"Candidate fact number {i}"
        (call,) = calls(reply_for(update(candidate, similar)))
        assert calls(reply_for(update(candidate, similar))) == [call]  # deterministic
        seen.setdefault(call["name"], call)
    assert set(seen) == {"add_item", "update_item", "ignore_item", "delete_item"}
    assert seen["update_item"]["arguments"]["id"] == "f1"  # the most similar
    assert seen["update_item"]["arguments"]["content"].startswith("Likes tea; Candidate fact")
    assert seen["delete_item"]["arguments"] == {"id": "f9"}  # the least similar


def test_retrieve_follows_its_plan_one_step_per_call_with_a_malformed_one():
    names = []
    for step in range(8):
        reply = reply_for(body(RETRIEVE, "Question: where are the hives?", steps=step))
        (call,) = calls(reply)
        names.append(call and call["name"])
        if call and call["name"].startswith("search_"):
            assert call["arguments"] == {"query": "where are the hives?"}
    assert names == [
        "search_facts", None, "search_experiences", "search_personas", "search_summary",
        "finish", "finish", "finish",
    ]  # fmt: skip


def test_a_request_without_the_tools_gets_no_tool_call():
    assert calls(reply_for(body("You are helpful.", "hi"))) == []
    assert calls(reply_for({"messages": []})) == []


@pytest.fixture
def keyed():
    server = Background(make_server(api_key="k-123"))  # type: ignore[arg-type]
    yield server
    server.close()


def test_over_http_it_answers_like_vllm_with_its_key_required(keyed):
    url, key = keyed.base_url, {"Authorization": "Bearer k-123"}
    chat = body(FORMATION, "Newest message: hello")
    with httpx2.Client(timeout=5) as http:
        assert http.get(f"{url}/health").json() == {"status": "ok"}  # no key needed
        assert http.get(f"{url}/models").status_code == 401
        assert http.post(f"{url}/chat/completions", json=chat).status_code == 401
        wrong = {"Authorization": "Bearer k-999"}
        assert http.post(f"{url}/chat/completions", json=chat, headers=wrong).status_code == 401
        assert http.get(f"{url}/models", headers=key).json()["data"] == [{"id": "Mem-T-4B"}]
        reply = http.post(f"{url}/chat/completions", json=chat, headers=key).json()
        assert reply["choices"][0]["message"]["content"] == reply_for(chat)
        assert reply["usage"]["completion_tokens"] > 0
        assert http.post(f"{url}/embeddings", json={}, headers=key).status_code == 404
        bad = http.post(f"{url}/chat/completions", content=b"{not json", headers=key)
        assert bad.status_code == 400


def test_the_test_stand_in_takes_any_key():
    standin = StandIn()
    try:
        reply = httpx2.get(f"{standin.base_url}/models", timeout=5)
    finally:
        standin.close()
    assert reply.status_code == 200


def test_on_a_unix_socket_it_serves_as_vllm_serve_uds_would(tmp_path):
    path = str(tmp_path / "memt.sock")
    proc = subprocess.Popen(
        [sys.executable, "-c", f"from memprobe.testing.memt_standin import serve; serve({path!r})"],
        cwd=ROOT,
        env={**os.environ, "VLLM_API_KEY": "k-uds"},
    )
    try:
        served_process.wait_healthy(proc, "http://localhost/v1", 30, 0.05, uds=path)
        chat = json.dumps(body(RETRIEVE, "Question: q")).encode()
        code, _ = served_process.unix_request(path, "POST", "/v1/chat/completions", body=chat)
        auth = {"Authorization": "Bearer k-uds", "Content-Type": "application/json"}
        ok, data = served_process.unix_request(
            path, "POST", "/v1/chat/completions", body=chat, headers=auth
        )
    finally:
        proc.kill()
        proc.wait(10)
    assert code == 401
    assert ok == 200 and "search_facts" in json.loads(data)["choices"][0]["message"]["content"]
