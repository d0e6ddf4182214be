"""Attribution: the target episode's transcript reaches Stage 1 in both modes (compat off)."""

from __future__ import annotations

import pytest

from memprobe.protocol import attribution
from memprobe.protocol.prompts import prompt_path
from memprobe.protocol.records import (
    Bank,
    BankEntry,
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
from tests.recording_llm import RecordingLLM

DIMS = [
    ("skill_memory", "critical_thinking_skill", 0.25),
    ("self_model", "prudence_self_view", 0.5),
    ("episodic_memory", "relocation_event", 0.0),
    ("assistance_preference", "verbosity_preference", 1.0),
]
BANK = Bank(
    user_id="user_001",
    entries=[
        BankEntry(category=c, dimension=d, short=f"short {d}", explanation=f"expl {d}")
        for c, d, _ in DIMS
    ],
)
TASKS = Tasks(
    user_id="user_001",
    tasks=[
        Task(
            index=i,
            task=f"TASK-TEXT-{i}",
            target_category=c,
            target_dimension=d,
            target_short=f"short {d}",
        )
        for i, (c, d, _) in enumerate(DIMS, 1)
    ],
)
EPISODES = Episodes(
    user_id="user_001",
    system="longctx_full",
    episodes=[
        Episode(
            index=i,
            task=f"TASK-TEXT-{i}",
            target_dimension=d,
            end_reason="satisfied",
            turns=[
                Turn(
                    turn=1,
                    agent_response=f"AGENT-SAID-{i}",
                    feedback_type="satisfied",
                    user_text=f"USER-REVEALED-{i}",
                )
            ],
        )
        for i, (_, d, _) in enumerate(DIMS, 1)
    ],
)
ORACLE = Oracle(
    user_id="user_001",
    verdicts={d: OracleVerdict(can_invite=d != "relocation_event", reason="r") for _, d, _ in DIMS},
)
PROMPTS = {
    "disclosure": str(prompt_path("attribution_disclosure")),
    "subclass": str(prompt_path("attribution_subclass")),
}


def judge(mode: str) -> Judge:
    return Judge(
        user_id="user_001",
        system="longctx_full",
        mode=mode,
        per_category={},
        overall=0.0,
        details=[
            JudgeEntry(
                category=c,
                dimension=d,
                explanation=f"expl {d}",
                ground_truth=f"short {d}",
                predicted="x",
                slot_fill_reason="",
                score=s,
                judge_reason="",
                scoring_mode=mode,
            )
            for c, d, s in DIMS
        ],
    )


def answer(messages, schema):
    text = messages[-1]["content"]
    if "disclosed" in schema.model_fields:
        return {"disclosed": "critical_thinking" in text, "evidence": "", "reason": ""}
    return {"category": "A", "reason": "", "evidence": ""}


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
