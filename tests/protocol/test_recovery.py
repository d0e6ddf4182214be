"""Slot-fill and judge: what each prompt sees, and the budget-aware dump_all (overflow)."""

from __future__ import annotations

import pytest

from memprobe.protocol import recovery, taxonomy
from memprobe.protocol.prompts import prompt_path
from memprobe.protocol.records import Bank, BankEntry
from tests.recording_llm import RecordingLLM

BANK = Bank(
    user_id="user_001",
    entries=[
        BankEntry(
            category="skill_memory",
            dimension="critical_thinking_skill",
            short="Checks sources twice",
            explanation="SECRET-EXPLANATION",
        ),
        BankEntry(
            category="assistance_preference",
            dimension="verbosity_preference",
            short="Wants bullet points",
            explanation="SECRET-EXPLANATION-2",
        ),
    ],
)
GUIDES = taxonomy.load_guides()


def store(n: int, chars: int) -> list[dict]:
    return [{"content": f"note {i} " + "y" * chars} for i in range(n)]


def slotfill(memories, llm, **kw):
    return recovery.slotfill_user(
        user_id="user_001",
        system="memt",
        mode="dump_all",
        bank=BANK,
        guides=GUIDES,
        llm=llm,
        prompt=str(prompt_path("slotfill")),
        memories=memories,
        **kw,
    )


def evidence_answer(messages, schema):
    text = messages[-1]["content"]
    return {"label": "checks sources" if "note 7 " in text else "unknown", "reason": "r"}


def test_slotfill_never_sees_the_target():
    llm = RecordingLLM(lambda m, s: {"label": "careful", "reason": "note 1"})
    out = slotfill(store(2, 10), llm)
    assert not out.overflow and len(llm.requests) == 2
    for i in range(2):
        text = llm.prompt_text(i)
        assert "note 1" in text  # the whole store
        assert "SECRET-EXPLANATION" not in text and "Checks sources twice" not in text
    assert "critical_thinking_skill" in llm.prompt_text(0)


def test_overflow_flag_is_recorded_not_silently_scored():
    llm = RecordingLLM(evidence_answer)
    big = store(40, 400)  # ~17k chars, ~4.4k tokens: over a 2,000-token context
    out = slotfill(big, llm, context_tokens=2000, overflow="flag")
    assert out.overflow and out.overflow_strategy == "flag"
    assert out.memory_tokens > recovery.memory_budget(2000)
    assert llm.requests == []  # nothing was sent that could not fit
    assert all(
        e.label == "unknown" and not e.called and "overflow" in e.reason for e in out.entries
    )
    judge = recovery.judge_user(
        out, BANK, RecordingLLM(lambda m, s: {"score": 1.0}), str(prompt_path("recovery_judge"))
    )
    assert judge.overflow and judge.flagged  # the tables' dagger


def test_overflow_chunked_is_scored():
    llm = RecordingLLM(evidence_answer)
    big = store(40, 400)
    out = slotfill(big, llm, context_tokens=2000, overflow="chunked")
    assert out.overflow and out.overflow_strategy == "chunked"
    # every call fits the budget, and the chunk holding note 7 gives the label
    budget = recovery.memory_budget(2000)
    assert len(llm.requests) > 2
    assert all(e.label == "checks sources" for e in out.entries)
    for i in range(len(llm.requests)):
        assert recovery.count_tokens(llm.prompt_text(i)) < budget + recovery.PROMPT_OVERHEAD_TOKENS
    judge = recovery.judge_user(
        out,
        BANK,
        RecordingLLM(lambda m, s: {"reason": "r", "score": 0.75}),
        str(prompt_path("recovery_judge")),
    )
    assert judge.overall == pytest.approx(0.75) and not judge.flagged


def test_judge_sees_truth_and_label_and_scores_unknown_zero_without_a_call():
    out = slotfill(
        store(1, 5),
        RecordingLLM(
            lambda m, s: {
                "label": "unknown" if "verbosity" in m[-1]["content"] else "twice",
                "reason": "",
            }
        ),
    )
    judge_llm = RecordingLLM(lambda m, s: {"score": 0.5, "reason": "partial"})
    judge = recovery.judge_user(out, BANK, judge_llm, str(prompt_path("recovery_judge")))
    assert len(judge_llm.requests) == 1  # the unknown label costs no call
    text = judge_llm.prompt_text(0)
    assert "SECRET-EXPLANATION" in text and "Checks sources twice" in text and "twice" in text
    assert judge.per_category["skill_memory"] == 0.5
    assert judge.per_category["assistance_preference"] == 0.0
    assert judge.overall == pytest.approx(0.25)  # category-balanced, absent cats ignored


def test_store_overflows_threshold():
    over, tokens = recovery.store_overflows(store(1, 10), 2000)
    assert not over and tokens > 0
    assert recovery.store_overflows(store(40, 400), 2000)[0]
