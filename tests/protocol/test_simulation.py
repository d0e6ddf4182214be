"""The simulated user (memprobe/protocol/simulation.py): what its request holds."""

from __future__ import annotations

import json

import pytest

from memprobe.config.loading import load_config
from memprobe.llm.client import client_for
from memprobe.llm.salvage import Exhausted
from memprobe.protocol import simulation
from memprobe.spec import records
from memprobe.spec.prompts import prompt_path
from memprobe.spec.records import Bank, Episodes, Task, Tasks
from tests.helpers.jobs import ScriptJob
from tests.helpers.paper import paper_config, stage_prompt
from tests.helpers.protocol import TWO_ENTRY_BANK, clients, persona, user_text
from tests.helpers.workflow import tiny_config


def test_simulator_sees_its_last_three_messages_and_the_no_repeat_rule(scripted, tmp_path):
    ep, seen = scripted({"simulator": [{"feedback_type": "followup", "text": "and then?"}]})
    _, llm = clients(ep.base_url, tmp_path, "simulator")
    history = [{"agent": f"AGENT-{i}", "user": f"MINE-{i}"} for i in range(1, 5)]
    simulation.simulate_user(
        llm["simulator"], str(prompt_path("user_simulator")), persona(), TWO_ENTRY_BANK,
        "Plan a trip.", history, "Here is a plan.", 5, "test",
    )  # fmt: skip
    body = seen["simulator"][0]
    recent = user_text(body).split("YOUR LAST MESSAGES (do not repeat them)")[1]
    recent = recent.split("Turn 5.")[0]
    assert [f"MINE-{i}" in recent for i in range(1, 5)] == [False, True, True, True]
    system = body["messages"][0]["content"]
    assert "do not say the same thing again" in system
    assert "without waiting to be asked" in system  # volunteers a parallel past event
    assert "rare" in system and "nothing is left" in system  # the hard satisfied bar
    assert body["temperature"] == 0.85


# -- a rollout job whose simulator replies never validate -------------------------------------
SPENT = {"max_reasks": 1, "resample_invalid": 0}
KEYS = {"user": "user_001", "system": "nomem"}


def tasks_for(bank: Bank) -> Tasks:
    return Tasks(
        user_id=bank.user_id,
        tasks=[
            Task(
                index=i,
                task=f"Help me with errand {i}.",
                target_category=e.category,
                target_dimension=e.dimension,
                target_short=e.short,
            )
            for i, e in enumerate(bank.entries, 1)
        ],
    )


def rollout_job(ep, tmp_path, monkeypatch) -> tuple[ScriptJob, Episodes]:
    job = ScriptJob(tmp_path, monkeypatch, "rollout", ep.base_url, **SPENT)
    job.config["max_turns"] = 2
    (tmp_path / "config.json").write_text(json.dumps(job.config))
    inputs = {
        "persona": persona(),
        "bank": TWO_ENTRY_BANK,
        "tasks": tasks_for(TWO_ENTRY_BANK),
        "simulator_prompt": str(prompt_path("user_simulator")),
        "assistant_prompt": str(prompt_path("assistant_system")),
    }
    outputs = {"episodes": "episodes.json", "memories": "memories.json", "store": "store"}
    assert job.run(inputs, outputs, KEYS) == 0
    return job, records.load(job.out("episodes.json"), Episodes)


def test_a_reply_over_the_cap_is_cut_at_a_sentence_end_and_marked(scripted, tmp_path, monkeypatch):
    text = "I tried that already. " * 80  # 1,760 characters
    ep, _ = scripted({"simulator": {"else": {"feedback_type": "correction", "text": text}}})
    job, episodes = rollout_job(ep, tmp_path, monkeypatch)
    turn = episodes.episodes[0].turns[0]
    assert turn.feedback_type == "correction"  # the model's own type stands
    assert len(turn.user_text) <= simulation.DEFAULT_MAX_REPLY_CHARS
    assert turn.user_text.endswith("already.") and text.startswith(turn.user_text)
    recs = episodes.recoveries
    assert len(recs) == 4  # 2 episodes x 2 turns
    assert recs[0].where == "user user_001, system nomem, episode 1, turn 1"
    assert (recs[0].stage, recs[0].action, recs[0].touches) == ("simulator", "cut text", [])
    assert job.recoveries(KEYS).recoveries == recs


def test_an_unusable_simulator_reply_becomes_a_marked_followup(scripted, tmp_path, monkeypatch):
    ep, _ = scripted({"simulator": {"else": {"feedback_type": "happy", "text": "Fine."}}})
    _, episodes = rollout_job(ep, tmp_path, monkeypatch)
    turns = episodes.episodes[0].turns
    assert [(t.feedback_type, t.user_text) for t in turns] == [("followup", "Fine.")] * 2
    assert episodes.episodes[0].end_reason == "max_turns"
    rec = episodes.recoveries[0]
    assert rec.action == "stand-in feedback_type followup" and rec.touches == ["A", "C"]


def test_simulator_stand_in_without_any_text_nudges():
    spent = Exhausted("simulator", "w", "not valid JSON", ['{"feedback_type": "satisfied"}'])
    reply, rec = simulation.simulator_stand_in(spent)
    assert (reply.feedback_type, reply.text) == ("satisfied", simulation.FALLBACK_TEXT)
    assert rec.touches == []  # the type is the model's: A and C are as it said


def test_paper_simulator_studies_its_bank_and_may_write_past_1500_chars(scripted, tmp_path):
    long = " ".join(["I had a bay like this once and it was a mess."] * 50)  # ~2,350 chars
    ep, seen = scripted({"simulator": [{"feedback_type": "add_context", "text": long}]})
    cfg = paper_config(ep.base_url, tmp_path)
    llm = client_for("simulator", cfg, ledger_path=tmp_path / "usage.csv")
    reply = simulation.simulate_user(
        llm, stage_prompt(cfg, "user_simulator"), persona(), TWO_ENTRY_BANK,
        "Plan a kayak trip.", [], "Here is a plan.", 1, "test", cfg.simulator.max_reply_chars,
    )  # fmt: skip
    assert len(reply.text) > 1500 and reply.text == long
    body = seen["simulator"][0]
    assert "maxLength" not in body["response_format"]["json_schema"]["schema"]["properties"]["text"]
    system, user = body["messages"][0]["content"], user_text(body)
    # The bank reaches it whole, to be studied; its one restraint is a verbatim entry.
    for e in TWO_ENTRY_BANK.entries:
        assert e.short in user and e.explanation in user
    assert "study the profile and the memory bank" in system
    assert "never\nrecite a whole bank entry word for word" in system
    assert "never state" not in (system + user).lower()
    assert "never quote" not in system.lower()
    # The reactions tied to the bank, and what does not count as delivered.
    assert "contradicts what you know (your knowledge_memory)" in system
    assert "beyond what your skill_memory or knowledge_memory" in system
    assert "a promise to help, a clarifying question, a generic outline" in system
    assert body["temperature"] == 0.85
    # The default config keeps its cap: the same reply is refused there.
    with pytest.raises(ValueError, match="at most 1500 characters"):
        simulation.reply_schema(load_config(tiny_config(ep.base_url)).simulator.max_reply_chars)(
            feedback_type="add_context", text=long
        )


# -- replay (rollout.replay) ---------------------------------------------------------------
def hook_log_system(name: str, recall_changes_store: bool):
    """A memory system that logs each hook call with what it was shown."""
    from typing import Any

    from memprobe.agents.base import MemorySystem

    from memprobe.registry.systems import declare

    @declare(name, searchable=False, recall_changes_store=recall_changes_store)
    class HookLog(MemorySystem):
        def reset(self, user_id: str) -> None:
            super().reset(user_id)
            self.log: list[tuple[Any, ...]] = []

        def recall(self, task, history):
            self.log.append(("recall", task, [dict(h) for h in history]))
            return [f"seen {len(self.log)}"]

        def end_turn(self, task_index, task, history):
            self.log.append(("end_turn", task_index, task, [dict(h) for h in history]))

        def end_episode(self, task_index, task, history):
            self.log.append(("end_episode", task_index, task, [dict(h) for h in history]))

        def get_all_memories(self):
            return [{"content": repr(x)} for x in self.log if x[0] != "recall"]

    return HookLog


def two_tasks():
    from memprobe.spec.records import Task, Tasks

    return Tasks(
        user_id="user_001",
        tasks=[
            Task(index=i, task=f"Task {i}.", target_category=e.category,
                 target_dimension=e.dimension, target_short=e.short)
            for i, e in enumerate(TWO_ENTRY_BANK.entries, 1)
        ],
    )  # fmt: skip


@pytest.mark.parametrize("recall_changes_store", [True, False])
def test_a_replay_calls_the_live_rollouts_hooks_in_its_order(
    scripted, tmp_path, recall_changes_store
):
    followup = {"feedback_type": "followup", "text": "Not quite, I grew up with boats."}
    done = {"feedback_type": "satisfied", "text": "That works."}
    ep, seen = scripted({"simulator": [followup, done, done]})
    cfg, llm = clients(ep.base_url, tmp_path, "simulator", "assistant")
    cls = hook_log_system(f"hooklog_{recall_changes_store}", recall_changes_store)
    live = cls(config=cfg, assistant=llm["assistant"])
    prompt = str(prompt_path("user_simulator"))
    episodes = simulation.rollout(
        live, llm["simulator"], prompt, persona(), TWO_ENTRY_BANK, two_tasks(), max_turns=3
    )
    assert [len(e.turns) for e in episodes.episodes] == [2, 1]
    asked = sum(len(v) for v in seen.values())

    # The replay's assistant points at a closed port: a reply call would fail the test.
    off, closed = clients("http://127.0.0.1:9/v1", tmp_path / "off", "assistant")
    replayed = cls(config=off, assistant=closed["assistant"])
    got = simulation.replay(replayed, episodes, "some_run_pooled_50")
    assert sum(len(v) for v in seen.values()) == asked  # no simulator call either
    # Every write hook, in the live order, with the same transcript; recall only where it
    # can change the store (its lines then recorded as live).
    want = [x for x in live.log if recall_changes_store or x[0] != "recall"]
    assert replayed.log == want
    assert got.replay == "some_run_pooled_50" and episodes.replay is None
    turns = [
        (t.agent_response, t.user_text, t.feedback_type) for e in got.episodes for t in e.turns
    ]
    assert turns == [
        (t.agent_response, t.user_text, t.feedback_type) for e in episodes.episodes for t in e.turns
    ]
    recalled = [t.recalled for e in got.episodes for t in e.turns]
    if recall_changes_store:
        assert recalled == [t.recalled for e in episodes.episodes for t in e.turns]
    else:
        assert recalled == [[], [], []]


def test_a_system_that_sequences_its_own_turn_is_not_replayed(tmp_path):
    cls = hook_log_system("hooklog_respond", True)

    class OwnTurn(cls):  # type: ignore[misc, valid-type]
        def respond(self, task_index, task, history):
            return "mine"

    cfg, llm = clients("http://127.0.0.1:9/v1", tmp_path, "assistant")
    from memprobe.spec.records import Episodes

    with pytest.raises(ValueError, match="overrides MemorySystem.respond"):
        simulation.replay(
            OwnTurn(config=cfg, assistant=llm["assistant"]),
            Episodes(user_id="user_001", system="x", episodes=[]),
            "run",
        )


def test_without_a_cap_the_simulator_stand_in_cuts_nothing():
    long = "I had a bay like this once and it was a mess. " * 50  # ~2,350 characters
    spent = Exhausted(
        "simulator", "w", "feedback_type", [json.dumps({"feedback_type": "happy", "text": long})]
    )
    uncapped, rec = simulation.simulator_stand_in(spent, None)  # paper.yaml: no cap
    assert (uncapped.feedback_type, uncapped.text) == ("followup", long.strip())
    assert rec.touches == ["A", "C"]
    capped, _ = simulation.simulator_stand_in(spent, simulation.DEFAULT_MAX_REPLY_CHARS)
    assert len(capped.text) <= simulation.DEFAULT_MAX_REPLY_CHARS
    assert capped.text.endswith("a mess.") and long.startswith(capped.text)
