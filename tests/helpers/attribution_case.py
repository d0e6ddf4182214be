"""One user's attribution inputs (bank, tasks, episodes, oracle, judge) and scripted
answers for its stages."""

from __future__ import annotations

from memprobe.spec.prompts import prompt_path
from memprobe.spec.records import (
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
