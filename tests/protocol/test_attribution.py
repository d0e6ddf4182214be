"""Attribution: the target episode's transcript reaches Stage 1 in both modes (compat off)."""

from __future__ import annotations

import pytest

from memprobe.llm.salvage import Exhausted
from memprobe.protocol import attribution
from memprobe.spec import records
from memprobe.spec.prompts import prompt_path
from memprobe.spec.records import (
    Attribution,
    Bank,
    Episode,
    Episodes,
    Judge,
    JudgeEntry,
    Oracle,
    OracleVerdict,
    Task,
    Tasks,
    Turn,
)
from tests.helpers.attribution_case import (
    BANK,
    DIMS,
    EPISODES,
    ORACLE,
    PROMPTS,
    TASKS,
    answer,
    judge,
)
from tests.helpers.jobs import ScriptJob
from tests.helpers.protocol import SKILL, clients, user_text
from tests.helpers.recording_llm import RecordingLLM


@pytest.mark.parametrize("mode", ["dump_all", "retrieve"])
def test_stage1_reads_the_real_transcript(mode):
    llm = RecordingLLM(answer)
    out = attribution.attribute_user(judge(mode), BANK, TASKS, EPISODES, ORACLE, llm, PROMPTS)
    labels = {d.dimension: d.label for d in out.details}
    assert labels == {
        "critical_thinking_skill": "memory_failure",
        "prudence_self_view": "agent_elicitation_failure",
        "relocation_event": "task_design_failure",  # Stage 0 says no: no Stage 1 call
        "verbosity_preference": "ok",  # score >= .75: no call at all
    }
    memory = next(d for d in out.details if d.dimension == "critical_thinking_skill")
    assert memory.ep_index == 1 and [s["stage"] for s in memory.stages] == [
        "oracle",
        "disclosure",
    ]
    # Stage 1 for dim 1 and Stage 1 + 2 for dim 2: three requests, each with its transcript
    assert len(llm.requests) == 3
    stage1 = llm.prompt_text(0)
    assert "AGENT-SAID-1" in stage1 and "USER-REVEALED-1" in stage1 and "TASK-TEXT-1" in stage1
    assert attribution.EMPTY_TRANSCRIPT not in stage1
    assert "USER-REVEALED-2" in llm.prompt_text(1)
    assert out.counts == {
        "memory_failure": 1,
        "agent_elicitation_failure": 1,
        "task_design_failure": 1,
        "ok": 1,
    }


def test_compat_switch_reproduces_the_empty_transcript():
    llm = RecordingLLM(answer)
    attribution.attribute_user(
        judge("retrieve"), BANK, TASKS, EPISODES, ORACLE, llm, PROMPTS, empty_transcript=True
    )
    stage1 = llm.prompt_text(0)
    assert "USER-REVEALED-1" not in stage1 and attribution.EMPTY_TRANSCRIPT in stage1
    assert "TASK-TEXT-1" in stage1  # the release still showed the task text


def test_oracle_is_shared_per_user_and_dimension():
    llm = RecordingLLM(
        lambda m, s: {"can_invite": "relocation" not in m[-1]["content"], "reason": "r"}
    )
    oracle = attribution.run_oracle(BANK, TASKS, llm, str(prompt_path("attribution_oracle")))
    assert len(llm.requests) == len(DIMS)
    assert set(oracle.verdicts) == {d for _, d, _ in DIMS}
    assert not oracle.verdicts["relocation_event"].can_invite


def judged(scores: dict[str, float], mode: str = "dump_all") -> Judge:
    j = judge(mode)
    details = [d.model_copy(update={"score": scores.get(d.dimension, d.score)}) for d in j.details]
    return j.model_copy(update={"details": details})


def test_stage2_b_is_simulator_too_strict_and_its_prompt_has_the_whole_case():
    def b_answer(messages, schema):
        if "disclosed" in schema.model_fields:
            return {"disclosed": False, "evidence": "", "reason": "not said"}
        return {"category": "B", "reason": "user vague", "evidence": "USER-REVEALED-2"}

    llm = RecordingLLM(b_answer)
    out = attribution.attribute_user(
        judged({"critical_thinking_skill": 0.8}), BANK, TASKS, EPISODES, ORACLE, llm, PROMPTS
    )
    entry = next(d for d in out.details if d.dimension == "prudence_self_view")
    assert entry.label == "simulator_too_strict" and entry.ep_index == 2
    assert [s["stage"] for s in entry.stages] == ["oracle", "disclosure", "disclosure_subclass"]
    assert entry.stages[2] == {
        "stage": "disclosure_subclass",
        "category": "B",
        "reason": "user vague",
        "evidence": "USER-REVEALED-2",
    }
    assert entry.stages[1]["reason"] == "not said"
    assert len(llm.requests) == 2  # Stage 1 and Stage 2 for prudence_self_view only
    stage2 = llm.prompt_text(1)
    assert "TASK-TEXT-2" in stage2 and "AGENT-SAID-2" in stage2 and "USER-REVEALED-2" in stage2
    assert "short prudence_self_view" in stage2 and "expl prudence_self_view" in stage2
    assert "dimension: prudence_self_view" in stage2
    where = "user user_001, system longctx_full, dump_all, prudence_self_view"
    assert llm.wheres == [where, where]  # what a failed call's error line names
    assert out.counts == {"ok": 2, "simulator_too_strict": 1, "task_design_failure": 1}


def test_the_075_boundary_is_ok_and_just_below_is_attributed():
    llm = RecordingLLM(answer)
    out = attribution.attribute_user(
        judged({"critical_thinking_skill": 0.75, "prudence_self_view": 0.74}),
        BANK,
        TASKS,
        EPISODES,
        ORACLE,
        llm,
        PROMPTS,
    )
    labels = {d.dimension: d.label for d in out.details}
    assert labels["critical_thinking_skill"] == "ok"
    assert labels["prudence_self_view"] == "agent_elicitation_failure"
    ok = next(d for d in out.details if d.dimension == "critical_thinking_skill")
    assert (ok.ep_index, ok.stages, ok.score) == (None, [], 0.75)


def test_a_target_without_a_task_is_no_targeted_task_without_a_call():
    tasks = Tasks(user_id="user_001", tasks=[t for t in TASKS.tasks if t.index != 1])
    llm = RecordingLLM(answer)
    out = attribution.attribute_user(
        judged({"prudence_self_view": 1.0}), BANK, tasks, EPISODES, ORACLE, llm, PROMPTS
    )
    entry = next(d for d in out.details if d.dimension == "critical_thinking_skill")
    assert (entry.label, entry.ep_index, entry.stages) == ("no_targeted_task", None, [])
    assert llm.requests == []
    oracle_llm = RecordingLLM(lambda m, s: {"can_invite": True, "reason": "r"})
    oracle = attribution.run_oracle(BANK, tasks, oracle_llm, str(prompt_path("attribution_oracle")))
    assert oracle.verdicts["critical_thinking_skill"] == OracleVerdict(
        can_invite=False, reason="no targeted task"
    )
    assert len(oracle_llm.requests) == len(DIMS) - 1


def test_stage0_no_records_the_oracle_stage_and_the_first_task_is_the_target():
    # two tasks aim at relocation_event: the first one (index 3) is the target episode
    extra = Task(
        index=9,
        task="LATER-TASK",
        target_category="episodic_memory",
        target_dimension="relocation_event",
        target_short="x",
    )
    tasks = Tasks(user_id="user_001", tasks=[*TASKS.tasks, extra])
    out = attribution.attribute_user(
        judge("dump_all"), BANK, tasks, EPISODES, ORACLE, RecordingLLM(answer), PROMPTS
    )
    entry = next(d for d in out.details if d.dimension == "relocation_event")
    assert entry.label == "task_design_failure" and entry.ep_index == 3
    assert entry.stages == [{"stage": "oracle", "can_invite": False, "reason": "r"}]
    oracle_llm = RecordingLLM(lambda m, s: {"can_invite": True, "reason": "r"})
    attribution.run_oracle(BANK, tasks, oracle_llm, str(prompt_path("attribution_oracle")))
    texts = [oracle_llm.prompt_text(i) for i in range(len(oracle_llm.requests))]
    assert not any("LATER-TASK" in t for t in texts)
    reloc = next(t for t in texts if "relocation_event" in t)
    assert "TASK-TEXT-3" in reloc and "short relocation_event" in reloc
    assert "dimension: relocation_event" in reloc
    assert "user user_001, oracle relocation_event" in oracle_llm.wheres
    assert "expl relocation_event" in reloc


def test_a_missing_episode_reads_the_empty_transcript():
    eps = Episodes(user_id="user_001", system="longctx_full", episodes=EPISODES.episodes[1:])
    llm = RecordingLLM(answer)
    attribution.attribute_user(judge("dump_all"), BANK, TASKS, eps, ORACLE, llm, PROMPTS)
    stage1 = llm.prompt_text(0)
    assert "TASK-TEXT-1" in stage1 and attribution.EMPTY_TRANSCRIPT in stage1


def test_transcript_lines_alternate_agent_then_user():
    ep = EPISODES.episodes[0].model_copy(
        update={
            "turns": [
                Turn(turn=1, agent_response="a1", feedback_type="satisfied", user_text="u1"),
                Turn(turn=2, agent_response="a2", feedback_type="satisfied", user_text="u2"),
            ]
        }
    )
    assert attribution.transcript_lines(ep) == "Agent: a1\nUser: u1\nAgent: a2\nUser: u2"
    empty = ep.model_copy(update={"turns": []})
    assert attribution.transcript_lines(empty) == attribution.EMPTY_TRANSCRIPT


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


# -- oracle and attribution jobs whose replies never validate --------------------------------
SPENT = {"max_reasks": 1, "resample_invalid": 0}
KEYS = {"system": "longctx_full", "user": "user_001", "mode": "dump_all"}
DISCLOSURE_ASK = '{"disclosed": true | false'
SUBCLASS_ASK = '{"category": "A" | "B"'


def test_oracle_job_past_its_re_asks_lets_the_task_invite(scripted, tmp_path, monkeypatch):
    ep, seen = scripted({"oracle": {"else": {"can_invite": "perhaps"}}})
    job = ScriptJob(tmp_path, monkeypatch, "oracle", ep.base_url, **SPENT)
    inputs = {"bank": BANK, "tasks": TASKS, "prompt": str(prompt_path("attribution_oracle"))}
    assert job.run(inputs, {"oracle": "oracle.json"}, {"user": "user_001"}) == 0
    out = records.load(job.out("oracle.json"), Oracle)
    assert all(v.can_invite for v in out.verdicts.values())  # the release's fallback
    assert [(r.stage, r.action, r.touches) for r in out.recoveries] == [
        ("oracle", "can_invite true", ["attribution"])
    ] * len(DIMS)
    assert [r.where for r in out.recoveries] == [f"user user_001, oracle {d}" for _, d, _ in DIMS]
    assert len(seen["oracle"]) == 2 * len(DIMS)


def attribution_job(ep, tmp_path, monkeypatch) -> Attribution:
    job = ScriptJob(tmp_path, monkeypatch, "attribution", ep.base_url, **SPENT)
    inputs = {
        "judge": judge("dump_all"),
        "bank": BANK,
        "tasks": TASKS,
        "episodes": EPISODES,
        "oracle": ORACLE,
        **PROMPTS,
    }
    assert job.run(inputs, {"attribution": "attribution.json"}, KEYS) == 0
    out = records.load(job.out("attribution.json"), Attribution)
    assert job.recoveries(KEYS).recoveries == out.recoveries
    return out


def test_attribution_job_past_the_disclosure_re_asks_says_not_disclosed(
    scripted, tmp_path, monkeypatch
):
    subclass_b = {"category": "B", "reason": "", "evidence": ""}
    rules = [[[SUBCLASS_ASK], subclass_b], [[DISCLOSURE_ASK], {"disclosed": "maybe"}]]
    ep, _ = scripted({"disclosure": {"when": rules}})
    out = attribution_job(ep, tmp_path, monkeypatch)
    # Two misses reach stage 1 (the third one's task could not invite it).
    assert out.counts == {"simulator_too_strict": 2, "task_design_failure": 1, "ok": 1}
    assert [(r.stage, r.action) for r in out.recoveries] == [("disclosure", "disclosed false")] * 2


def test_attribution_job_past_the_subclass_re_asks_reads_the_agents_replies(
    scripted, tmp_path, monkeypatch
):
    rules = [[[SUBCLASS_ASK], {"category": "C"}], [[DISCLOSURE_ASK], {"disclosed": False}]]
    ep, _ = scripted({"disclosure": {"when": rules}})
    out = attribution_job(ep, tmp_path, monkeypatch)
    # The agent never said a word of either target: A, the agent did not get near it.
    assert out.counts == {"agent_elicitation_failure": 2, "task_design_failure": 1, "ok": 1}
    assert [r.stage for r in out.recoveries] == ["subclass", "subclass"]
    assert out.recoveries[0].action.startswith("category A from the agent's replies (0.00")


def test_subclass_stand_in_says_b_when_the_agent_raised_the_topic():
    spent = Exhausted("disclosure", "w", "category: bad", ['{"category": "C"}'])
    said = "Do you double-check claims? Critical thinking skills matter here."
    reply, rec = attribution.subclass_stand_in(spent, said, "critical thinking skill")
    assert reply.category == "B" and rec.touches == ["attribution"]
