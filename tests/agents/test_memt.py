"""memt: the Mem-T tool protocol client, its store, the vLLM serving path, and the tiny run."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest
from memprobe.agents.memt import (
    COLLECTIONS,
    MemT,
    policy_client,
)

from memprobe.config.base import ConfigError
from memprobe.config.loading import load_config
from memprobe.llm.client import client_for
from memprobe.registry import systems as registry
from memprobe.serving import served_process, vllm_server
from memprobe.spec.prompts import prompt_path
from memprobe.testing.memt_standin import StandIn
from memprobe.workflow import preflight
from tests.helpers.endpoint import record_requests
from tests.helpers.memt import SERVE_STANDIN, fake_vllm, serve_settings
from tests.helpers.paper import paper_config, text_vectors
from tests.helpers.workflow import tiny_config

PROMPTS = {n: str(prompt_path(n)) for n in ("memt_formation", "memt_update", "memt_retrieve")}


class Reply:
    """A stand-in for the shared reply role: records nothing, answers a fixed text."""

    def text(self, messages, **kw):
        return "Sure, here is some help."


class Scripted:
    """A Mem-T client that answers from a list (then repeats the last) and counts calls."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.calls = []

    def text(self, messages, **kw):
        self.calls.append(messages)
        return self.replies[min(len(self.calls) - 1, len(self.replies) - 1)]


@pytest.fixture
def standin():
    s = StandIn()
    yield s
    s.close()


def memt_config(base_url: str, **memt) -> object:
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["memt"])
    raw.setdefault("system_settings", {})["memt"] = {"endpoint": base_url, **memt}
    return load_config(raw)


def make_agent(cfg, tmp_path: Path) -> MemT:
    agent = MemT(config=cfg, assistant=Reply(), writer=None, workdir=tmp_path, prompts=PROMPTS)
    agent.reset("user_001")
    return agent


def drive(agent: MemT, turns: int = 3) -> None:
    """Two short episodes through the real respond()/end_episode() hooks."""
    for episode in (1, 2):
        task = f"Help me plan a vegetable garden on a small balcony, attempt {episode}."
        history: list[dict[str, str]] = []
        for t in range(turns):
            reply = agent.respond(episode, task, history)
            history.append({"agent": reply, "user": f"I water tomatoes at dawn, note {t}."})
        agent.end_episode(episode, task, history)


@pytest.mark.torch
def test_memt_forms_all_collections_and_search_ranks_k_distinct(standin, tmp_path):
    cfg = memt_config(standin.base_url)
    agent = make_agent(cfg, tmp_path)
    drive(agent)

    dump = agent.get_all_memories()
    by_cat = {c: [m for m in dump if m["category"] == c] for c in COLLECTIONS}
    assert len(by_cat["turns"]) == 2 * 3 + 2  # every turn + each episode's final message
    assert by_cat["facts"] and by_cat["experiences"]
    assert [m["id"] for m in by_cat["personas"]] == ["User"]
    assert [m["id"] for m in by_cat["summary"]] == ["hmb_session"]
    fact = by_cat["facts"][0]
    assert "----- ORIGINAL SOURCE -----" in fact["content"]
    assert fact["metadata"]["source_turn_ids"] and fact["metadata"]["memory_content"]

    stats = agent.meta()["stats"]
    # The stand-in sends one malformed block per formation call and one per ReAct loop.
    assert stats["malformed_tool_calls"] >= stats["calls_formation"] > 0
    assert stats["tool_add_item"] > 0

    k = 5
    items = agent.search("What does the user grow on the balcony?", k)
    assert len(items) == k
    assert len({i["id"] for i in items}) == k
    assert all(i["category"] != "turns" for i in items)
    scores = [i["score"] for i in items]
    assert scores == sorted(scores, reverse=True)
    assert {"id", "content", "category", "score", "timestamp"} <= set(items[0])
    assert "ORIGINAL SOURCE" not in items[0]["content"]

    # save -> load rebuilds the same store and the same search.
    store = tmp_path / "store"
    agent.save(store)
    again = make_agent(cfg, tmp_path)
    again.load(store)
    assert again.get_all_memories() == dump
    assert again.search("What does the user grow on the balcony?", k) == items


@pytest.mark.torch
def test_compat_discovery_order_returns_release_order_without_scores(standin, tmp_path):
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["memt"])
    raw.setdefault("system_settings", {})["memt"] = {"endpoint": standin.base_url}
    raw["compat"] = {"memt_discovery_order": True}
    agent = make_agent(load_config(raw), tmp_path)
    drive(agent, turns=2)
    items = agent.search("What does the user grow?", 3)
    assert len(items) == 3 and all(i["score"] is None for i in items)
    # The stand-in searches facts first, so discovery order starts with facts.
    assert items[0]["category"] == "facts"


@pytest.mark.torch
def test_react_loop_stops_at_the_step_budget_and_never_crashes(tmp_path):
    cfg = memt_config("http://127.0.0.1:9/v1", max_tool_steps=4)
    agent = make_agent(cfg, tmp_path)
    agent._policy = Scripted(["I think the answer is tea.", "<tool_call>{oops</tool_call>"])
    assert agent.search("anything", 5) == []
    assert len(agent._policy.calls) == 4
    last = agent._policy.calls[-1]
    assert last[-1]["role"] == "user" and "No valid tool call" in last[-1]["content"]
    assert agent.stats["malformed_tool_calls"] == 3


@pytest.mark.torch
def test_update_ops_apply_and_bad_ids_are_counted(tmp_path):
    cfg = memt_config("http://127.0.0.1:9/v1")
    agent = make_agent(cfg, tmp_path)
    add = '<tool_call>{"name": "add_item", "arguments": {}}</tool_call>'
    formation = '<tool_call>{"name": "create_fact", "arguments": {"content": "%s"}}</tool_call>'
    agent._policy = Scripted(
        [
            formation % "Likes green tea",
            add,
            formation % "Likes green tea with honey",
            '<tool_call>{"name": "update_item", "arguments": {"id": "f0001", '
            '"content": "Likes green tea with honey"}}</tool_call>'
            '<tool_call>{"name": "delete_item", "arguments": {"id": "f0099"}}</tool_call>',
            formation % "No longer drinks tea",
            '<tool_call>{"name": "delete_item", "arguments": {"id": "f0001"}}</tool_call>',
        ]
    )
    agent._write_turn("I like green tea")
    assert agent.store.items["facts"]["f0001"]["metadata"]["memory_content"] == "Likes green tea"
    agent._write_turn("with honey please")
    meta = agent.store.items["facts"]["f0001"]["metadata"]
    assert meta["memory_content"] == "Likes green tea with honey"
    assert meta["source_turn_ids"] == ["t0001", "t0002"]
    assert agent.stats["malformed_tool_calls"] == 1  # delete of f0099, which does not exist
    agent._write_turn("I stopped drinking tea")
    assert agent.store.items["facts"] == {}


def test_memt_config_errors_are_one_line():
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["memt"])
    with pytest.raises(ConfigError, match=r"system_settings\.memt: set endpoint") as err:
        load_config(raw)
    assert "\n" not in str(err.value)
    raw.setdefault("system_settings", {})["memt"] = {"serve": True}
    with pytest.raises(ConfigError, match=r"system_settings\.memt: model_path: required"):
        load_config(raw)
    # Its settings were a top-level block before they moved to the system's.
    raw["memt"] = raw.pop("system_settings")["memt"]
    with pytest.raises(ConfigError, match=r"^config: memt: moved to system_settings\.memt "):
        load_config(raw)


def test_serve_command_line(tmp_path):
    m = serve_settings(tmp_path, "/envs/vllm/bin/vllm")
    assert vllm_server.serve_command(m, "/run/user/1/memprobe-vllm-x/vllm.sock") == [
        "/envs/vllm/bin/vllm",
        "serve",
        "/models/mem-t-4b",
        "--served-model-name",
        "Mem-T-4B",
        "--uds",
        "/run/user/1/memprobe-vllm-x/vllm.sock",
        "--max-model-len",
        "8192",
    ]


def test_server_starts_waits_for_health_and_stops(tmp_path):
    m = serve_settings(tmp_path, fake_vllm(tmp_path, SERVE_STANDIN))
    server = vllm_server.Server(m, tmp_path / "vllm.log", poll_s=0.2)
    t0 = time.monotonic()
    base = server.start()
    assert time.monotonic() - t0 >= 1.0  # it waited for health, not just for the spawn
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[:2] == ["serve", "/models/mem-t-4b"] and argv[argv.index("--uds") + 1] == server.uds
    assert "--port" not in argv and base == "http://localhost/v1"
    assert served_process.status(f"{base}/health", uds=server.uds) == 200
    proc, socket_dir = server.proc, server.socket_dir
    assert stat.S_IMODE(socket_dir.stat().st_mode) == 0o700  # no other user gets in
    server.stop()
    assert proc.poll() is not None and not socket_dir.exists()


def test_server_that_dies_or_hangs_fails_in_one_line(tmp_path):
    dead = serve_settings(tmp_path, fake_vllm(tmp_path, "sys.exit(3)"))
    with pytest.raises(vllm_server.VllmError, match="exited with status 3"):
        vllm_server.Server(dead, tmp_path / "a.log", poll_s=0.1).start()
    hang = serve_settings(tmp_path, fake_vllm(tmp_path, "time.sleep(60)"), startup_timeout_s=1)
    server = vllm_server.Server(hang, tmp_path / "b.log", poll_s=0.1)
    with pytest.raises(vllm_server.VllmError, match="not healthy") as err:
        server.start()
    assert "\n" not in str(err.value) and server.proc is None  # stopped after the failure
    missing = serve_settings(tmp_path, str(tmp_path / "no-such-vllm"))
    with pytest.raises(vllm_server.VllmError, match="memt.vllm_bin"):
        vllm_server.Server(missing, tmp_path / "c.log").start()


def test_ensure_prefers_endpoint_and_env(tmp_path, monkeypatch):
    cfg = memt_config("http://10.0.0.5:8000/v1")
    assert vllm_server.ensure(cfg.system_settings.memt) == ("http://10.0.0.5:8000/v1", None)
    monkeypatch.setenv(vllm_server.ENDPOINT_ENV, "http://127.0.0.1:7/v1")
    assert vllm_server.ensure(cfg.system_settings.memt) == ("http://127.0.0.1:7/v1", None)


@pytest.mark.workflow
def test_tiny_workflow_runs_memt_end_to_end(endpoint, standin, workflow_factory):
    raw = tiny_config(endpoint.base_url, systems=["nomem", "memt"])
    raw.setdefault("system_settings", {})["memt"] = {"endpoint": standin.base_url}
    wf = workflow_factory(raw)
    wf.run(wf.target("table2.csv"))
    results = wf.results
    for user in ("user_001", "user_002"):
        mem = json.loads((results / "memt" / user / "memories.json").read_text())
        cats = {m["category"] for m in mem["memories"]}
        assert {"facts", "experiences", "personas", "summary", "turns"} <= cats, cats
        assert mem["meta"]["stats"]["malformed_tool_calls"] > 0
        retrieved = json.loads((results / "memt" / user / "retrieved_k5.json").read_text())
        for q in retrieved["queries"]:
            ids = [i["id"] for i in q["items"]]
            assert len(ids) == 5 and len(set(ids)) == 5, q["dimension"]
    rows = (results / "table2.csv").read_text()
    assert "memt" in rows
    assert os.path.exists(wf.logs / "rollout" / "memt" / "user_001.log")


@pytest.mark.torch
def test_memt_turn_order_is_retrieve_reply_write(endpoint, tmp_path):
    from memprobe.agents.memt import MemT

    seen = record_requests(endpoint)
    raw = tiny_config(endpoint.base_url, systems=["memt"])
    raw["llm"]["cache_dir"] = str(tmp_path / "cache")
    raw.setdefault("system_settings", {})["memt"] = {
        "endpoint": endpoint.base_url,
        "max_tool_steps": 1,
    }
    cfg = load_config(raw)
    prompts = {n: str(prompt_path(n)) for n in ("memt_formation", "memt_update", "memt_retrieve")}
    agent = MemT(
        config=cfg, assistant=client_for("assistant", cfg), writer=None, workdir=tmp_path,
        prompts=prompts,
    )  # fmt: skip
    agent.reset("user_001")
    agent.respond(1, "Help me plan a balcony garden.", [])

    def kind(body: dict) -> str:
        system = body["messages"][0]["content"]
        if "search_facts" in system:
            return "retrieve"
        if "create_fact" in system:
            return "write"
        return "reply" if "personal assistant" in system else "other"

    calls = [kind(b) for b in seen[""]]
    assert calls == ["retrieve", "reply", "write"], calls
    assert "max_tokens" not in seen[""][2]  # formation replies are not capped


def test_paper_memt_embeds_documents_with_their_source_and_stops_react_at_the_tool_close(
    tmp_path, monkeypatch
):
    from memprobe.agents.memt import COLLECTIONS, SOURCE_SEP, MemT

    from memprobe.serving import embeddings
    from memprobe.testing.memt_standin import StandIn

    embedded: list[tuple[str, str | None, int | None]] = []

    def encode(texts, path=None, max_seq_length=None):
        embedded.extend((t, path, max_seq_length) for t in texts)
        return text_vectors(texts)

    monkeypatch.setattr(embeddings, "encode", encode)
    standin = StandIn()
    try:
        seen = record_requests(standin)
        cfg = paper_config("http://127.0.0.1:9/v1", tmp_path)
        cfg.system_settings.memt.serve, cfg.system_settings.memt.endpoint = False, standin.base_url
        agent = MemT(config=cfg, assistant=None, writer=None, workdir=tmp_path)
        agent.reset("user_001")
        first, second = "I keep bees on my roof.", "My hives are on the north side."
        agent.end_turn(1, first, [])
        agent.end_turn(1, first, [{"agent": "ok", "user": second}])
        agent.search("what does the user keep on the roof", 3)
    finally:
        standin.close()
    # Every stored item's vector is of its whole document, content + source block.
    docs = [
        it["document"] for c in COLLECTIONS if c != "turns" for it in agent.store.items[c].values()
    ]
    assert docs and all(SOURCE_SEP in d for d in docs)
    assert {(d, "BAAI/bge-m3", None) for d in docs} <= set(embedded)
    persona_doc = agent.store.items["personas"]["User"]["document"]
    assert f"user said: {first}" in persona_doc and f"user said: {second}" in persona_doc
    react = [b for b in seen[""] if "search_facts" in b["messages"][0]["content"]]
    writes = [b for b in seen[""] if "create_fact" in b["messages"][0]["content"]]
    assert react and all(b["stop"] == ["</tool_call>"] for b in react)
    assert writes and all("stop" not in b for b in writes)
    # A tool result goes back wrapped by its prompt file, with the source turns it surfaced.
    results = [
        m["content"] for b in react for m in b["messages"] if "<tool_response>" in m["content"]
    ]
    assert results and any('"sources": ["user said: I keep bees' in r for r in results)
    # ... and, as the release's, each fact with its times; update calls see them too.
    assert any('"turn_time": "t000' in r for r in results)
    updates = [b for b in seen[""] if "add_item" in b["messages"][0]["content"]]
    assert updates and all('"turn_time": "t000' in b["messages"][-1]["content"] for b in updates)


@pytest.mark.parametrize(
    ("settings", "in_job"),
    [({}, False), ({"encode_in_job": True}, True), ({"serve": True}, True)],
)
def test_its_encodes_run_in_its_job_where_it_serves_mem_t(tmp_path, monkeypatch, settings, in_job):
    """Where memt's jobs serve Mem-T themselves (serve: true, their GPU host) or the run says
    so (encode_in_job), its store encodes in the job; else through the run's server."""
    from memprobe.agents import memt

    from memprobe.serving import embeddings

    paths: list[str] = []

    def through(where):
        def encode(texts, path=None, copy=0, max_seq_length=None):
            paths.extend(where for _ in texts)
            return text_vectors(texts)

        return encode

    monkeypatch.setattr(embeddings, "encode", through("run's server"))
    monkeypatch.setattr(embeddings, "encode_local", through("in the job"))
    cfg = memt_config("http://127.0.0.1:9/v1")
    for key, value in settings.items():
        setattr(cfg.system_settings.memt, key, value)
    agent = make_agent(cfg, tmp_path)
    agent._policy = Scripted(['<tool_call>{"name": "finish", "arguments": {}}</tool_call>'])
    agent.end_turn(1, "I keep bees on my roof.", [])
    agent.search("what does the user keep", 3)
    assert paths and set(paths) == {"in the job" if in_job else "run's server"}
    assert memt.MemT.spec.uses_run_embedder(cfg) is not in_job


def test_its_preflight_wants_its_files_where_its_jobs_run(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    raw = {
        "n_users": 1,
        "llm": {"backend": "openai", "base_url": "http://127.0.0.1:9/v1"},
        "systems": ["memt"],
        "system_settings": {
            "memt": {
                "serve": True,
                "model_path": str(tmp_path / "Mem-T-4B"),
                "vllm_bin": str(tmp_path / "vllm"),
                "embedder": "BAAI/bge-m3",
            }
        },
    }
    cfg = load_config(raw)
    keys = [line.split(":")[0] for line in registry.spec("memt").preflight(cfg, True)]
    assert keys == [f"system_settings.memt.{k}" for k in ("model_path", "vllm_bin", "embedder")]
    (tmp_path / "Mem-T-4B").mkdir()
    (tmp_path / "vllm").write_text("#!/bin/sh\n")
    (tmp_path / "hf" / "hub" / "models--BAAI--bge-m3").mkdir(parents=True)
    assert registry.spec("memt").preflight(cfg, True) == []
    # the Snakefile's check: every problem in one line
    (tmp_path / "vllm").unlink()
    with pytest.raises(preflight.PreflightError, match="memt.vllm_bin"):
        preflight.check(cfg)
    assert registry.spec("memt").preflight(cfg, False) == []  # its jobs run on other hosts


def test_the_policy_client_is_built_like_every_role_s(standin, tmp_path):
    """Mem-T's policy goes through client_for: the run's re-asks, resampling, concurrency and
    rate limiter (its own endpoint: no provider's limits, the provider's signals), on the
    writer's cache, ledger and attempt."""
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["memt"])
    raw["llm"] |= {"cache_dir": str(tmp_path / "cache"), "concurrency": 3, "max_reasks": 1,
                   "resample_invalid": 4, "rate_limit": {"requests_per_minute": 60}}  # fmt: skip
    raw["system_settings"] = {"memt": {"endpoint": standin.base_url, "temperature": 0.3}}
    cfg = load_config(raw)
    writer = client_for("writer", cfg, ledger_path=tmp_path / "usage.csv", job="rollout/x")
    writer.attempt = 2
    policy = policy_client(cfg, writer)
    assert (policy.concurrency, policy.max_reasks, policy.resample_invalid) == (3, 1, 4)
    assert (policy.model, policy.temperature, policy.attempt) == ("Mem-T-4B", 0.3, 2)
    assert policy.ledger is writer.ledger and policy.cache.root == writer.cache.root
    assert policy.limiter is not None and policy.limiter.limits.requests is None
    assert writer.limiter is not None and writer.limiter.limits.requests == 60
    assert policy.text([{"role": "user", "content": "hello"}])  # the stand-in answers
    rows = (tmp_path / "usage.csv").read_text().splitlines()
    assert len(rows) == 2 and ",writer,Mem-T-4B," in rows[1]


# -- issue 43 item 2: the release's search, tool results and update calls, switch by switch ----
RELEASE_SEARCH = {
    "single_profile_hit": True,
    "turns_top_k": True,
    "dedupe_turns": True,
    "observation_times": True,
    "update_times": True,
}


def call(tool: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': tool, 'arguments': arguments})}</tool_call>"


def seeded_agent(tmp_path, monkeypatch, **memt) -> MemT:
    """A memt agent (no server, text_vectors for the embedder) whose store holds 8 turns, three
    personas, the summary and 6 facts, each fact made from one turn."""
    from memprobe.serving import embeddings

    monkeypatch.setattr(embeddings, "encode", text_vectors)
    agent = make_agent(memt_config("http://127.0.0.1:9/v1", **memt), tmp_path)
    store = agent.store
    for i in range(1, 9):
        tid, turn = f"t{i:04d}", f"user said: about bees, note {i}"
        store.upsert("turns", tid, turn, {"col_name": "turns", "turn_time": tid})
        if i <= 6:
            agent._put("facts", f"f{i:04d}", f"Keeps bees, fact {i}", [tid], [turn], "add")
    for name in ("User", "Ana", "Bob"):
        agent._upsert_profile("personas", name, f"{name} keeps bees", "t0001", "user said: hi")
    agent._upsert_profile("summary", "hmb_session", "Talked about bees", "t0001", "user said: hi")
    return agent


def tool_results(agent: MemT) -> list[list[dict]]:
    """The items of every tool result the last ReAct request carried, in order."""
    last = agent._policy.calls[-1]
    wrapped = [m["content"] for m in last[1:] if "<tool_response>" in m["content"]]
    return [json.loads(w.split("<tool_response>")[1].split("</tool_response>")[0]) for w in wrapped]


REACT = [
    call("search_personas", query="who keeps bees"),
    call("search_personas", name="Ana", query="ignored when a name is given"),
    call("search_summary", query="bees"),
    call("search_turns", query="bees", top_k=2),
    call("search_turns", query="bees", top_k="3"),
    call("search_facts", query="bees"),
    call("finish", answer="done"),
]


def test_release_search_one_profile_the_model_s_top_k_and_no_turn_twice(tmp_path, monkeypatch):
    agent = seeded_agent(tmp_path, monkeypatch, max_tool_steps=7, **RELEASE_SEARCH)
    agent._policy = Scripted(REACT)
    items = agent.search("bees", 20)
    personas, by_name, summary, turns2, turns3, facts = tool_results(agent)
    assert len(personas) == 1 and [p["id"] for p in by_name] == ["Ana"]
    assert [s["id"] for s in summary] == ["hmb_session"]
    assert len(turns2) == 2 and len(turns3) == 1  # top_k 3, the two already shown left out
    assert not {t["id"] for t in turns2} & {t["id"] for t in turns3}
    assert len(facts) == 5 and all(
        {f["start_time"], f["end_time"]} == {""} and f["turn_time"].startswith("t") for f in facts
    )
    assert "start_time" not in personas[0] and "start_time" not in summary[0]
    # A fact whose source turn a turns result showed does not show it again.
    shown = {t["content"] for t in turns2 + turns3}
    assert all(not set(f.get("sources", [])) & shown for f in facts)
    cats = [i["category"] for i in items]
    assert cats.count("personas") == 2 and cats.count("summary") == 1 and "turns" not in cats
    # The retrieve prompt names the release's optional arguments.
    system = agent._policy.calls[0][0]["content"]
    assert '"name": string' in system and '"top_k": integer' in system
    # A name the store does not have finds nothing.
    assert agent._tool_hits("personas", {"name": "Zoe", "query": "bees"}, "q") == []


def test_our_search_takes_search_topk_everywhere_and_ignores_top_k(tmp_path, monkeypatch):
    agent = seeded_agent(tmp_path, monkeypatch, max_tool_steps=7, observation_sources=True)
    agent._policy = Scripted(REACT)
    agent.search("bees", 20)
    personas, by_name, summary, turns2, turns3, facts = tool_results(agent)
    assert len(personas) == len(by_name) == 3 and len(summary) == 1
    assert len(turns2) == len(turns3) == 5 and turns2 == turns3  # shown again
    assert "turn_time" not in facts[0]
    system = agent._policy.calls[0][0]["content"]
    assert '"name": string' not in system and "top_k" not in system


@pytest.mark.parametrize(
    ("value", "k"), [(None, 5), (2, 2), ("7", 7), (0, 1), (500, 50), ("many", 5), (True, 5)]
)
def test_turns_top_k_as_the_release_read_it(value, k):
    from memprobe.agents.memt import turns_k

    assert turns_k(value) == k


def test_update_calls_show_the_items_times(tmp_path, monkeypatch):
    formation = call("create_fact", content="Keeps bees on the roof")
    for switches, shows_times in (({}, False), ({"update_times": True}, True)):
        agent = seeded_agent(tmp_path, monkeypatch, **switches)
        agent._policy = Scripted([formation, call("ignore_item")])
        agent._write_turn("I keep bees on my roof")
        update = agent._policy.calls[1][-1]["content"]
        candidate = update.split("Candidate:")[1].split("Most similar")[0].strip()
        similar = json.loads(update.split("Most similar stored items:")[1])
        assert len(similar) == 3 and all(s["id"].startswith("f") for s in similar)
        if shows_times:
            assert json.loads(candidate) == {
                "content": "Keeps bees on the roof",
                "start_time": "",
                "end_time": "",
                "turn_time": "t0001",
            }
            assert all(set(s) == {"id", "content", "start_time", "end_time", "turn_time"}
                       for s in similar)  # fmt: skip
        else:
            assert candidate == "Keeps bees on the roof"
            assert all(set(s) == {"id", "content"} for s in similar)
