"""The simulated user (memprobe/protocol/simulation.py): what its request holds."""

from __future__ import annotations

import json

from memprobe.llm.client import Exhausted
from memprobe.protocol import simulation
from memprobe.spec import records
from memprobe.spec.prompts import prompt_path
from memprobe.spec.records import Bank, Episodes, Task, Tasks
from tests.helpers.jobs import ScriptJob
from tests.helpers.protocol import TWO_ENTRY_BANK, clients, persona, user_text


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
    assert len(turn.user_text) <= simulation.MAX_USER_CHARS
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
