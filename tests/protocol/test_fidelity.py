"""Protocol fidelity (docs/fidelity.md): what each stage's request holds, the merged paper
config, the dump_all budget, and `memprobe search` on the release's own dumps.

Requests go through the real openai client to the loopback fake endpoint and are recorded
there (``record_requests``), so the assertions are on what an endpoint would receive.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config

from memprobe.config import PAPER_PROTOCOL, RELEASE_COMPAT_PROTOCOL, ConfigError, load_config
from memprobe.llm.client import client_for
from memprobe.protocol import attribution, simulation, users
from memprobe.protocol.prompts import prompt_path
from memprobe.protocol.records import (
    Bank,
    BankEntry,
    Episode,
    Episodes,
    Judge,
    JudgeEntry,
    Tasks,
    Turn,
)
from memprobe.protocol.recovery import slotfill_user
from tests.conftest import ROOT, record_requests, tiny_config
from tests.protocol.test_users import GUIDES, TASK_PROMPTS, draft, persona, verdict

SKILL = BankEntry(
    category="skill_memory",
    dimension="critical_thinking_skill",
    short="checks every claim against two sources",
    explanation="EXPL-SKILL: trained as a fact-checker at a local paper.",
)
EPISODE = BankEntry(
    category="episodic_memory",
    dimension="relocation_event",
    short="moved cities alone at nineteen and struggled",
    explanation="EXPL-EPISODE: left home for a job that fell through within a month.",
)
BANK = Bank(user_id="user_001", entries=[SKILL, EPISODE])


def clients(base_url: str, tmp_path: Path, *roles: str, **raw_over):
    raw = tiny_config(base_url, **raw_over)
    raw["llm"]["cache_dir"] = str(tmp_path / "cache")
    cfg = load_config(raw)
    return cfg, {r: client_for(r, cfg, ledger_path=tmp_path / "usage.csv") for r in roles}


def user_text(body: dict) -> str:
    return body["messages"][-1]["content"]


def all_text(body: dict) -> str:
    return "\n".join(m["content"] for m in body["messages"])


# -- must show 2: each stage's request -----------------------------------------------------
def test_simulator_sees_its_last_three_messages_and_the_no_repeat_rule(scripted, tmp_path):
    ep, seen = scripted({"simulator": [{"feedback_type": "followup", "text": "and then?"}]})
    _, llm = clients(ep.base_url, tmp_path, "simulator")
    history = [{"agent": f"AGENT-{i}", "user": f"MINE-{i}"} for i in range(1, 5)]
    simulation.simulate_user(
        llm["simulator"], str(prompt_path("user_simulator")), persona(), BANK, "Plan a trip.",
        history, "Here is a plan.", 5, "test",
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


def test_writer_gets_the_category_hint_and_labelled_earlier_tasks(scripted, tmp_path):
    ep, seen = scripted(
        {
            "task_writer": [draft("Help me sort my reading list."), draft("Help me pack.")],
            "critic": [verdict("neutral", "none")] * 2,
        }
    )
    _, llm = clients(ep.base_url, tmp_path, "task_writer", "critic", "editor")
    users.make_tasks(persona(), BANK, GUIDES, llm, TASK_PROMPTS)
    first, second = seen["task_writer"]
    hints = users.load_guides(users.HINTS_FILE)
    assert hints["episodic_memory"] in user_text(second)
    assert hints["skill_memory"] not in user_text(second)
    assert "skill_memory/critical_thinking_skill: Help me sort my reading list." in user_text(
        second
    )
    assert "(none yet)" in user_text(first)
    assert second["temperature"] == 0.7  # the task writer's own role, not the generator's 0.8


def test_editor_sees_the_full_target_and_the_profile(scripted, tmp_path):
    ep, seen = scripted(
        {
            "task_writer": [draft("I double-check everything; help me plan.")],
            "critic": [verdict("fishing"), verdict("neutral", "none")],
            "editor": [draft("Help me plan a research trip.")],
        }
    )
    _, llm = clients(ep.base_url, tmp_path, "task_writer", "critic", "editor")
    one = Bank(user_id="user_001", entries=[SKILL])
    users.make_tasks(persona(), one, GUIDES, llm, TASK_PROMPTS)
    text = user_text(seen["editor"][0])
    assert SKILL.explanation in text and SKILL.short in text and SKILL.dimension in text
    assert users.persona_block(persona()) in text


def test_oracle_and_stage2_see_short_and_explanation(scripted, tmp_path):
    ep, seen = scripted(
        {
            "oracle": [{"can_invite": True, "reason": "r"}],
            "disclosure": [
                {"disclosed": False, "evidence": "", "reason": "r"},
                {"category": "A", "reason": "r", "evidence": ""},
            ],
        }
    )
    _, llm = clients(ep.base_url, tmp_path, "oracle", "disclosure")
    one = Bank(user_id="user_001", entries=[SKILL])
    tasks = Tasks(
        user_id="user_001",
        tasks=[
            {
                "index": 1,
                "task": "Help me plan.",
                "target_category": SKILL.category,
                "target_dimension": SKILL.dimension,
                "target_short": SKILL.short,
            }
        ],
    )
    oracle = attribution.run_oracle(
        one, tasks, llm["oracle"], str(prompt_path("attribution_oracle"))
    )
    judge = Judge(
        user_id="user_001", system="nomem", mode="dump_all", per_category={}, overall=0.0,
        details=[
            JudgeEntry(
                category=SKILL.category, dimension=SKILL.dimension, explanation=SKILL.explanation,
                ground_truth=SKILL.short, predicted="unknown", slot_fill_reason="", score=0.0,
                judge_reason="", scoring_mode="dump_all",
            )
        ],
    )  # fmt: skip
    episodes = Episodes(
        user_id="user_001",
        system="nomem",
        episodes=[
            Episode(
                index=1, task="Help me plan.", target_dimension=SKILL.dimension,
                end_reason="satisfied",
                turns=[Turn(turn=1, agent_response="ok", feedback_type="satisfied", user_text="k")],
            )
        ],
    )  # fmt: skip
    prompts = {
        "disclosure": str(prompt_path("attribution_disclosure")),
        "subclass": str(prompt_path("attribution_subclass")),
    }
    out = attribution.attribute_user(
        judge, one, tasks, episodes, oracle, llm["disclosure"], prompts
    )
    assert out.details[0].label == "agent_elicitation_failure"
    stage0, (stage1, stage2) = seen["oracle"][0], seen["disclosure"]
    for body in (stage0, stage1, stage2):
        assert SKILL.short in user_text(body) and SKILL.explanation in user_text(body)
    assert '"category": "A" | "B"' in user_text(stage2)  # it is the Stage 2 request


@pytest.mark.torch
def test_memt_turn_order_is_retrieve_reply_write(endpoint, tmp_path):
    from memprobe.agents.memt import MemT

    seen = record_requests(endpoint)
    raw = tiny_config(endpoint.base_url, systems=["memt"])
    raw["llm"]["cache_dir"] = str(tmp_path / "cache")
    raw["memt"] = {"endpoint": endpoint.base_url, "max_tool_steps": 1}
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


def writer_system(cls, name: str, base_url: str, tmp_path: Path, writer: dict):
    """A system whose ``system_settings.<name>.writer`` is ``writer``, writing to ``base_url``."""
    raw = tiny_config(base_url, systems=[name])
    raw["llm"]["cache_dir"] = str(tmp_path / "cache")
    raw["system_settings"] = {name: {"writer": writer}}
    cfg = load_config(raw)
    system = cls(
        config=cfg,
        assistant=client_for("assistant", cfg),
        writer=client_for("writer", cfg, ledger_path=tmp_path / "ledger.csv"),
        workdir=tmp_path / "store",
    )
    system.reset("user_001")
    return cfg, system


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


def test_amem_writes_at_its_own_temperature(endpoint, tmp_path):
    from memprobe.agents.amem import AMem

    seen = record_requests(endpoint)
    cfg, system = writer_system(AMem, "amem", endpoint.base_url, tmp_path, {"temperature": 1.0})
    system.end_turn(1, "Help me plan a balcony garden.", [])
    assert seen["writer"] and {b["temperature"] for b in seen["writer"]} == {1.0}
    assert client_for("writer", cfg).temperature == 0.0  # only amem's writer changed


# -- item 13: a bank value that repeats the axis question is re-asked -----------------------
def test_short_repeating_the_axis_is_invalid():
    axis = "How well do they translate needs into concrete requirements before acting?"
    dims = [{"name": "d", "short": axis, "explanation": "e"}]
    with pytest.raises(ValueError, match=r"short repeats the axis question"):
        users.check_bank_dims(dims, ["d"], 1, "skill_memory", {"d": axis})
    dims[0]["short"] = "Translate needs into concrete requirements"
    with pytest.raises(ValueError, match=r"short repeats the axis question"):
        users.check_bank_dims(dims, ["d"], 1, "skill_memory", {"d": axis})
    dims[0]["short"] = "Writes a one-page spec with the client before building"
    users.check_bank_dims(dims, ["d"], 1, "skill_memory", {"d": axis})


def test_small_model_listing_hides_the_axis_questions():
    from memprobe.protocol.taxonomy import load_pool
    from tests.recording_llm import RecordingLLM

    pool = load_pool()
    shown = users.pool_candidates(pool, "skill_memory", 1, 4, persona().seed)
    pick = {"name": shown[0].name, "short": "fixes bikes", "explanation": "e"}
    counts = {c: int(c == "skill_memory") for c in users.CATEGORIES}
    for show_axes in (True, False):
        llm = RecordingLLM(lambda m, s: {"dims": [pick]})
        prompt = str(prompt_path("bank_select"))
        users.make_bank(persona(), counts, pool, GUIDES, llm, prompt, 4, False, show_axes)
        assert (shown[0].axis in llm.prompt_text(0)) is show_axes


# -- must show 7: the merged paper config --------------------------------------------------
def merged(*files: str, base: dict | None = None) -> dict:
    """Layer config files the way Snakemake does (workflow configfile first)."""
    cfg = copy.deepcopy(base) if base is not None else {}
    for f in files:
        update_config(cfg, yaml.safe_load((ROOT / f).read_text()))
    return cfg


def lookup(values: dict, key: str):
    for part in key.split("."):
        values = values[part]
    return values


def test_merged_paper_config_holds_every_protocol_key():
    cfg = load_config(merged("config/config.yaml", "config/paper.yaml"))
    values = cfg.model_dump()
    for key, want in PAPER_PROTOCOL.items():
        assert lookup(values, key) == want, key
    assert cfg.bank.pool_sample is None and cfg.bank.show_examples
    assert cfg.n_users == 50 and list(cfg.dims_per_category.values()) == [7, 7, 7, 5, 5]
    assert cfg.max_turns == 25 and cfg.k == 5 and cfg.slotfill.context_tokens == 245_000
    assert cfg.llm.timeout_s == 120 and cfg.llm.roles == {}  # nothing of the small-model run


def other_than(value):
    if isinstance(value, bool):
        return not value
    if value is None:
        return 3
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, dict):
        return {k: 1 for k in value}
    if isinstance(value, list):
        return value[:1]
    return f"not {value}"


def test_paper_config_wins_over_any_base():
    """Whatever it is layered on, paper.yaml sets every protocol key itself."""
    hostile: dict = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    for key, want in PAPER_PROTOCOL.items():
        *parents, leaf = key.split(".")
        node = hostile
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = other_than(want)
    cfg = load_config(merged("config/paper.yaml", base=hostile))
    values = cfg.model_dump()
    assert {k: lookup(values, k) for k in PAPER_PROTOCOL} == PAPER_PROTOCOL


def test_release_compat_layers_on_paper_and_turns_every_switch_on():
    cfg = load_config(
        merged("config/config.yaml", "config/paper.yaml", "config/release-compat.yaml")
    )
    assert all(cfg.compat.model_dump().values())
    assert cfg.protocol == "release_compat"  # the paper's keys still hold, compat's flipped
    values = cfg.model_dump()
    for key, want in RELEASE_COMPAT_PROTOCOL.items():
        assert lookup(values, key) == want, key


def test_a_protocol_key_changed_after_paper_is_one_line():
    raw = merged("config/config.yaml", "config/paper.yaml")
    raw["bank"]["pool_sample"] = 6
    with pytest.raises(ConfigError, match=r"bank\.pool_sample: is 6 but protocol: paper") as err:
        load_config(raw)
    assert "\n" not in str(err.value)
    raw["bank"]["pool_sample"] = None
    raw["llm"]["roles"] = {"generator": {"max_tokens": 400}}  # merged in from a layer below
    with pytest.raises(ConfigError, match=r"llm\.roles\.generator: protocol: paper fixes"):
        load_config(raw)


# -- must show 4: the dump_all budget of the slot-fill model -------------------------------
def local_raw(**slotfill) -> dict:
    raw = tiny_config("http://127.0.0.1:9/v1")
    raw["llm"] = {"backend": "local", "local": {"context_tokens": 4096}}
    if slotfill:
        raw["slotfill"] = slotfill
    return raw


def test_budget_defaults_to_the_served_context_and_cannot_exceed_it():
    assert load_config(local_raw()).slotfill.context_tokens == 4096
    with pytest.raises(ConfigError, match=r"slotfill\.context_tokens: 8000 is more than") as err:
        load_config(local_raw(context_tokens=8000))
    assert "\n" not in str(err.value)


def test_store_over_the_served_context_is_flagged_without_a_request(
    endpoint, tmp_path, monkeypatch
):
    seen = record_requests(endpoint)
    monkeypatch.setenv("MEMPROBE_LOCAL_BASE_URL", endpoint.base_url)
    monkeypatch.setenv("MEMPROBE_LOCAL_MODEL_ID", "0" * 64)
    raw = local_raw()
    raw["llm"]["cache_dir"] = str(tmp_path / "cache")
    cfg = load_config(raw)
    llm = client_for("slotfill", cfg)
    big = [{"content": f"note {i} " + "x" * 400} for i in range(60)]  # ~6k tokens > 4096
    out = slotfill_user(
        user_id="user_001", system="memt", mode="dump_all", bank=BANK, guides=GUIDES, llm=llm,
        prompt=str(prompt_path("slotfill")), memories=big,
        context_tokens=cfg.slotfill.context_tokens, overflow=cfg.slotfill.overflow,
    )  # fmt: skip
    assert out.overflow and all(not e.called for e in out.entries)
    assert sum(len(v) for v in seen.values()) == 0


# -- must show 5: search on the release's dump ---------------------------------------------
@pytest.mark.torch
def test_search_accepts_a_release_format_dump(tmp_path):
    dump = tmp_path / "memories.json"
    notes = ["[Task 1] plan a kayak trip", "User: I get seasick", "Agent: try the bay"]
    dump.write_text(json.dumps({"num_memories": 3, "memories": [{"content": n} for n in notes]}))
    cmd = [sys.executable, "-m", "memprobe.cli", "search", "--system", "longctx_full"]
    out = subprocess.run(
        [*cmd, "--memories", str(dump), "--k", "2", "--query", "seasickness"],
        capture_output=True,
        text=True,
        check=True,
    )
    top = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(top) == 2 and top[0]["content"] == "User: I get seasick"


# -- item 7: mem0 hybrid search needs its models before any job ----------------------------
def test_hybrid_search_without_its_models_stops_before_any_job(monkeypatch):
    from memprobe.agents import mem0

    from memprobe.workflow import preflight

    monkeypatch.setattr(mem0, "_installed", lambda module: False)
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["mem0"])
    raw["system_settings"] = {"mem0": {"hybrid_search": True}}
    with pytest.raises(
        preflight.PreflightError, match=r"system_settings\.mem0\.hybrid_search: "
    ) as err:
        preflight.check(load_config(raw))
    assert "en_core_web_sm" in str(err.value) and "\n" not in str(err.value)
    raw["system_settings"]["mem0"]["hybrid_search"] = False
    preflight.mem0_hybrid(load_config(raw))  # off: nothing is needed
