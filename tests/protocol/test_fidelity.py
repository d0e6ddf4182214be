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

from memprobe.config import (
    PAPER_PROTOCOL,
    RELEASE_COMPAT_PROTOCOL,
    ConfigError,
    load_config,
    load_layers,
)
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


# -- issue 26: the stages that config/paper.yaml runs with the release's rules ---------------
PREF = BankEntry(
    category="assistance_preference",
    dimension="verbosity_preference",
    short="wants three lines, never more",
    explanation="EXPL-PREF: skims everything on a phone between shifts.",
)


def paper_config(base_url: str, tmp_path: Path, **over):
    """config.yaml + paper.yaml as Snakemake merges them, pointed at a loopback endpoint."""
    raw = merged("config/config.yaml", "config/paper.yaml")
    raw["llm"].update(
        base_url=base_url, api_key_env="MEMPROBE_TEST_KEY", cache_dir=str(tmp_path / "cache")
    )
    raw.update(over)
    return load_config(raw)


def stage_prompt(cfg, stage: str) -> str:
    """The prompt file a stage reads under ``cfg`` (what rules/common.smk's prompt() gives)."""
    return str(prompt_path(getattr(cfg.prompts, stage)))


def test_paper_simulator_studies_its_bank_and_may_write_past_1500_chars(scripted, tmp_path):
    long = " ".join(["I had a bay like this once and it was a mess."] * 50)  # ~2,350 chars
    ep, seen = scripted({"simulator": [{"feedback_type": "add_context", "text": long}]})
    cfg = paper_config(ep.base_url, tmp_path)
    llm = client_for("simulator", cfg, ledger_path=tmp_path / "usage.csv")
    reply = simulation.simulate_user(
        llm, stage_prompt(cfg, "user_simulator"), persona(), BANK, "Plan a kayak trip.", [],
        "Here is a plan.", 1, "test", cfg.simulator.max_reply_chars,
    )  # fmt: skip
    assert len(reply.text) > 1500 and reply.text == long
    body = seen["simulator"][0]
    assert "maxLength" not in body["response_format"]["json_schema"]["schema"]["properties"]["text"]
    system, user = body["messages"][0]["content"], user_text(body)
    # The bank reaches it whole, to be studied; its one restraint is a verbatim entry.
    for e in BANK.entries:
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


def test_paper_task_stages_see_what_the_releases_saw(scripted, tmp_path):
    ep, seen = scripted(
        {
            "task_writer": [draft("Help me sort my reading list."), draft("I moved once; plan.")],
            "critic": [verdict("neutral", "none"), verdict("fishing"), verdict("neutral", "n")],
            "editor": [draft("Help me plan a move across town.")],
        }
    )
    cfg = paper_config(ep.base_url, tmp_path)
    llm = {r: client_for(r, cfg) for r in ("task_writer", "critic", "editor")}
    stages = {"write": "task_write", "critic": "task_critic", "edit": "task_edit"}
    users.make_tasks(
        persona(), BANK, GUIDES, llm, {k: stage_prompt(cfg, v) for k, v in stages.items()}
    )
    writer = all_text(seen["task_writer"][1])
    assert "skill_memory/critical_thinking_skill: Help me sort my reading list." in writer
    assert "I've got two repairs coming up this month" in writer  # a worked neutral example
    critic = all_text(seen["critic"][1])
    assert "adjectives that match the expected stance" in critic
    assert EPISODE.short not in critic and EPISODE.dimension not in critic  # still blind
    text = user_text(seen["editor"][0])
    assert "skill_memory/critical_thinking_skill: Help me sort my reading list." in text
    assert GUIDES["episodic_memory"] in text
    assert EPISODE.short in text and EPISODE.explanation in text
    assert users.persona_block(persona(), stories=False) in text
    assert "A story." not in text  # the compact profile, as the release's editor read it
    assert seen["editor"][0]["temperature"] == 0.5


def test_paper_bank_prompt_asks_for_a_non_generic_stance_and_shows_earlier_explanations():
    from memprobe.protocol.taxonomy import load_pool
    from tests.recording_llm import RecordingLLM

    cfg = load_config(merged("config/config.yaml", "config/paper.yaml"))
    pool = load_pool()

    def answer(messages, schema):
        enum = schema.model_json_schema()["$defs"]["BankDim"]["properties"]["name"]["enum"]
        return {"dims": [{"name": enum[0], "short": "fixes bikes", "explanation": "EXPL-1."}]}

    llm = RecordingLLM(answer)
    counts = {c: int(c in ("skill_memory", "knowledge_memory")) for c in users.CATEGORIES}
    users.make_bank(persona(), counts, pool, GUIDES, llm, stage_prompt(cfg, "bank_select"))
    first, second = llm.prompt_text(0), llm.prompt_text(1)
    assert "meaningful, non-generic stance" in first and "most people would not share" not in first
    assert "Gaps, misconceptions and\n  weaknesses matter as much as strengths" in first
    assert "EXPL-1." in second  # the earlier category with its explanation
    assert pool.categories["knowledge_memory"].dimensions[0].axis in second


def test_paper_preference_judge_uses_na_sparingly_and_gives_low_scores(scripted, tmp_path):
    from memprobe.protocol import preference

    ep, seen = scripted({})
    cfg = paper_config(ep.base_url, tmp_path)
    episodes = Episodes(
        user_id="user_001", system="nomem",
        episodes=[Episode(index=1, task="Plan a trip.", target_dimension=SKILL.dimension,
                          end_reason="satisfied",
                          turns=[Turn(turn=1, agent_response="A long plan.",
                                      feedback_type="satisfied", user_text="ok")])],
    )  # fmt: skip
    bank = Bank(user_id="user_001", entries=[SKILL, PREF])
    llm = client_for("preference", cfg)
    preference.judge_preferences(episodes, bank, llm, stage_prompt(cfg, "preference_judge"))
    body = next(b for bodies in seen.values() for b in bodies)
    system = body["messages"][0]["content"]
    assert "Use it sparingly: uncertainty or a weak\nsignal is a 3, not na" in system
    assert "Be\nready to give 1 or 2 when you see a real violation" in system
    assert PREF.short in user_text(body) and PREF.explanation in user_text(body)


def test_paper_slotfill_is_one_user_message_with_the_category_drift_examples(scripted, tmp_path):
    ep, seen = scripted({})
    cfg = paper_config(ep.base_url, tmp_path)
    slotfill_user(
        user_id="user_001", system="longctx_full", mode="dump_all", bank=BANK, guides=GUIDES,
        llm=client_for("slotfill", cfg), prompt=stage_prompt(cfg, "slotfill"),
        memories=[{"content": "User: I fix bikes"}], context_tokens=245_000,
    )  # fmt: skip
    bodies = [b for bs in seen.values() for b in bs]
    assert len(bodies) == 2 and all(len(b["messages"]) == 1 for b in bodies)
    text = next(user_text(b) for b in bodies if "category: skill_memory" in user_text(b))
    assert "do not drift into another one" in text
    assert "For\nskill_memory, say what they can do, not what they prefer or believe" in text
    assert "(that is\n  assistance_preference)" in text
    assert "User: I fix bikes" in text and GUIDES["skill_memory"] in text


def test_paper_longctx_reply_has_no_tailoring_line(endpoint, tmp_path):
    from memprobe.agents.longctx import LongContext

    seen = record_requests(endpoint)
    for cfg, tailored in (
        (load_config({**tiny_config(endpoint.base_url), "llm": {
            **tiny_config(endpoint.base_url)["llm"], "cache_dir": str(tmp_path / "c1")}}), True),
        (paper_config(endpoint.base_url, tmp_path), False),
    ):  # fmt: skip
        system = LongContext(config=cfg, assistant=client_for("assistant", cfg))
        system.reset("user_001")
        system.respond(1, "Help me plan a kayak trip.", [])
        assert ("Tailor your help to this person" in seen[""][-1]["messages"][0]["content"]) is (
            tailored
        )


def text_vectors(texts: list[str], path=None, max_seq_length=None):
    """A fixed unit vector per text (a stand-in for the embedder: only inputs are checked)."""
    import hashlib

    import numpy as np

    rows = []
    for t in texts:
        rng = np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16))
        v = rng.normal(size=8)
        rows.append(v / np.linalg.norm(v))
    return np.asarray(rows, dtype=np.float32)


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
        cfg.memt.serve, cfg.memt.endpoint = False, standin.base_url
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


def test_paper_amem_hands_the_slot_filler_the_release_items(scripted, tmp_path, monkeypatch):
    from memprobe.agents.amem import AMem

    from memprobe.protocol import recovery
    from memprobe.serving import embeddings

    monkeypatch.setattr(embeddings, "encode", text_vectors)
    ep, seen = scripted({})
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
        retrieved = recovery.probe(system, BANK, GUIDES, 5, "user_001")
        slotfill = client_for("slotfill", cfg)
        for mode, kw in (("dump_all", {"memories": system.get_all_memories()}),
                         ("retrieve", {"retrieved": retrieved})):  # fmt: skip
            before = len(seen["slotfill"])
            slotfill_user(
                user_id="user_001", system="amem", mode=mode, bank=BANK, guides=GUIDES,
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


# -- issue 26 item 8: the guard covers every protocol key, --config included -----------------
GUARDED = {  # key: a --config that changes it (Snakemake merges --config over the files)
    "llm.model": {"llm": {"model": "gpt-4o"}},
    "systems": {"systems": ["nomem", "amem"]},
    "seed": {"seed": 1},
    "memt.max_tool_steps": {"memt": {"max_tool_steps": 3}},
    "memt.embedder": {"memt": {"embedder": "sentence-transformers/all-MiniLM-L6-v2"}},
    "tasks.max_edits": {"tasks": {"max_edits": 1}},
    "compat.longctx_drop_final_reply": {"compat": {"longctx_drop_final_reply": True}},
    "compat.retrieve_attribution_empty_transcript": {
        "compat": {"retrieve_attribution_empty_transcript": True}
    },
    "compat.judge_unknown_labels": {"compat": {"judge_unknown_labels": True}},
    "compat.memt_discovery_order": {"compat": {"memt_discovery_order": True}},
    "compat.amem_stale_index": {"compat": {"amem_stale_index": True}},
    "judge.degenerate_as_unknown": {"judge": {"degenerate_as_unknown": True}},
}


def paper_layers(*files: str) -> list[tuple[str, dict]]:
    return [(f, yaml.safe_load((ROOT / f).read_text())) for f in files]


@pytest.mark.parametrize("key", list(GUARDED))
def test_each_protocol_key_changed_by_config_is_one_line(key):
    layers = paper_layers("config/config.yaml", "config/paper.yaml")
    with pytest.raises(ConfigError) as err:
        load_layers([*layers, ("--config", GUARDED[key])])
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"--config: {key}: is "), msg
    assert "but protocol: paper needs" in msg and key in PAPER_PROTOCOL


def test_release_compat_guards_its_own_values():
    layers = paper_layers("config/config.yaml", "config/paper.yaml", "config/release-compat.yaml")
    load_layers(layers)  # the compat layer itself is the protocol's
    with pytest.raises(ConfigError, match=r"^--config: tasks\.max_edits: is 3 but protocol: "):
        load_layers([*layers, ("--config", {"tasks": {"max_edits": 3}})])


def cli_value(value) -> str:
    """A --config value as Snakemake parses it (YAML flow style)."""
    return yaml.safe_dump(value, default_flow_style=True, width=1000).strip()


@pytest.mark.workflow
def test_each_protocol_key_changed_by_config_stops_the_dag_load(workflow_factory):
    wf = workflow_factory(yaml.safe_load((ROOT / "config/paper.yaml").read_text()))
    for key, change in GUARDED.items():
        (top, value), *_ = change.items()
        proc = wf.run("-n", "--config", f"{top}={cli_value(value)}", check=False)
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "memprobe: " in ln]
        assert proc.returncode != 0 and len(lines) == 1, (key, proc.stderr[-1500:])
        assert lines[0].startswith(f"memprobe: --config: {key}: is "), lines[0]
    assert not (wf.root / "results").exists()
