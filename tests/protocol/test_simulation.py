"""The simulated user (memprobe/protocol/simulation.py): what its request holds."""

from __future__ import annotations

import pytest

from memprobe.config import load_config
from memprobe.llm.client import client_for
from memprobe.protocol import simulation
from memprobe.spec.prompts import prompt_path
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
