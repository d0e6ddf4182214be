"""The judge (memprobe/protocol/judge.py): truth and label shown, "unknown" scored by the rubric,
degenerate labels, category means, a second opinion, and a job past its re-asks."""

from __future__ import annotations

import json

import pytest

from memprobe.llm.salvage import Exhausted
from memprobe.protocol.judge import (
    JudgeReply,
    category_means,
    judge_stand_in,
    judge_user,
)
from memprobe.spec import records
from memprobe.spec.prompts import prompt_path
from memprobe.spec.records import (
    Judge,
    SlotFill,
    SlotFillEntry,
)
from memprobe.spec.rubric import RUBRIC
from tests.helpers.jobs import ScriptJob
from tests.helpers.protocol import SPENT
from tests.helpers.recording_llm import RecordingLLM
from tests.helpers.recovery_case import BANK, KEYS, llm_judge, slotfill, store
from tests.helpers.tables import entry_of


def twice_or_unknown() -> RecordingLLM:
    """A slot-filler that answers "twice" for the skill and "unknown" for the preference."""
    return RecordingLLM(
        lambda m, s: {
            "label": "unknown" if "verbosity" in m[-1]["content"] else "twice",
            "reason": "",
        }
    )


# -- slot-fill and judge jobs whose replies never validate -----------------------------------


def test_judge_sees_truth_and_label_and_scores_unknown_zero_without_a_call():
    out = slotfill(store(1, 5), twice_or_unknown())
    judge_llm = RecordingLLM(lambda m, s: {"score": 0.5, "reason": "partial"})
    judge = judge_user(out, BANK, llm_judge(judge_llm))
    assert len(judge_llm.requests) == 1  # the unknown label costs no call
    text = judge_llm.prompt_text(0)
    assert "SECRET-EXPLANATION" in text and "Checks sources twice" in text and "twice" in text
    assert judge.per_category["skill_memory"] == 0.5
    assert judge.per_category["assistance_preference"] == 0.0
    assert judge.overall == pytest.approx(0.25)  # category-balanced, absent cats ignored


def test_judge_unknown_option_sends_unknown_labels_to_the_judge():
    out = slotfill(store(1, 5), RecordingLLM(lambda m, s: {"label": "unknown", "reason": ""}))
    judge_llm = RecordingLLM(lambda m, s: {"score": 0.25, "reason": "lenient"})
    judge = judge_user(
        out,
        BANK,
        llm_judge(judge_llm),
        judge_unknown=True,
    )
    assert len(judge_llm.requests) == 2
    assert [d.score for d in judge.details] == [0.25, 0.25]
    assert judge.details[0].judge_reason == "lenient"


def test_category_means_hand_values():
    entry = entry_of

    per, overall = category_means(
        [entry("skill_memory", 1.0), entry("skill_memory", 0.5), entry("self_model", 0.0)]
    )
    assert per["skill_memory"] == 0.75 and per["self_model"] == 0.0
    assert per["episodic_memory"] is None and per["assistance_preference"] is None
    assert overall == pytest.approx(0.375)  # (0.75 + 0.0) / 2 present categories
    assert category_means([]) == (dict.fromkeys(per), 0.0)


def test_judge_prompt_has_the_dimension_and_the_label_and_reasons_are_recorded():
    out = slotfill(store(1, 5), RecordingLLM(lambda m, s: {"label": "LABEL-XYZ", "reason": ""}))
    out.entries[1] = out.entries[1].model_copy(update={"label": "unknown"})
    judge_llm = RecordingLLM(lambda m, s: {"score": 0.5, "reason": "half"})
    judged = judge_user(out, BANK, llm_judge(judge_llm))
    text = judge_llm.prompt_text(0)
    assert "LABEL-XYZ" in text and "critical_thinking_skill" in text
    assert [d.judge_reason for d in judged.details] == [
        "half",
        "label is 'unknown': 0 by the rubric (no call)",
    ]


def test_degenerate_labels_are_unknown_only_with_the_option_and_the_axis_counts():
    axis = "How carefully does the user weigh evidence?"
    out = slotfill(store(1, 5), RecordingLLM(lambda m, s: {"label": axis, "reason": ""}))
    axes = {"critical_thinking_skill": axis, "verbosity_preference": "How long?"}
    judge_llm = RecordingLLM(lambda m, s: {"score": 0.5, "reason": "r"})
    judged = judge_user(out, BANK, llm_judge(judge_llm), degenerate_axes=axes)
    # the skill label is its own axis question: unknown, no call; the preference label is not
    assert [d.score for d in judged.details] == [0.0, 0.5] and len(judge_llm.requests) == 1
    assert (
        judged.details[0].judge_reason == "label is a axis_question: scored as 'unknown' (no call)"
    )
    plain = judge_user(
        out,
        BANK,
        llm_judge(RecordingLLM(lambda m, s: {"score": 0.5, "reason": ""})),
    )
    assert [d.score for d in plain.details] == [0.5, 0.5]


def test_the_judge_prompt_shows_the_rubric_scale_and_levels():
    out = slotfill(store(1, 5), RecordingLLM(lambda m, s: {"label": "LABEL-XYZ", "reason": ""}))
    judge_llm = RecordingLLM(lambda m, s: {"score": 0.5, "reason": "r"})
    judge_user(out, BANK, llm_judge(judge_llm))
    text = judge_llm.prompt_text(0)
    assert RUBRIC.scale_text() in text and RUBRIC.levels_text() in text
    assert "None" not in text


def test_a_second_opinion_grades_every_label_beside_the_judge():
    """judge.cross_check: the offline judge's score of each label rides along in its entry."""
    out = slotfill(store(1, 5), twice_or_unknown())
    seen = []

    def second(items):
        seen.extend(items)
        return [JudgeReply(reason="offline", score=0.25) for _ in items]

    judge_llm = RecordingLLM(lambda m, s: {"score": 0.75, "reason": "close"})
    judged = judge_user(
        out,
        BANK,
        llm_judge(judge_llm),
        second_opinion=second,
    )
    assert [d.score for d in judged.details] == [0.75, 0.0]  # the judge's, unchanged
    assert [d.second_opinion for d in judged.details] == [0.25, 0.25]
    assert [it.truth for it in seen] == ["Checks sources twice", "Wants bullet points"]
    plain = judge_user(out, BANK, llm_judge(judge_llm))
    assert all(d.second_opinion is None for d in plain.details)


def test_judge_job_past_its_re_asks_scores_zero_and_flags_b(scripted, tmp_path, monkeypatch):
    ep, _ = scripted({"judge": {"else": {"reason": "close enough", "score": 0.6}}})
    job = ScriptJob(tmp_path, monkeypatch, "judge", ep.base_url, **SPENT)
    filled = SlotFill(
        user_id="user_001",
        system="longctx_full",
        mode="dump_all",
        entries=[
            SlotFillEntry(category=e.category, dimension=e.dimension, label=e.short, reason="")
            for e in BANK.entries
        ],
    )
    inputs = {"slotfill": filled, "bank": BANK, "prompt": str(prompt_path("recovery_judge"))}
    assert job.run(inputs, {"judge": "judge.json"}, KEYS) == 0
    out = records.load(job.out("judge.json"), Judge)
    assert [d.score for d in out.details] == [0.0, 0.0]  # the release's parse-failure score
    assert out.details[0].judge_reason.startswith("stand-in: no valid judge reply (score:")
    assert [(r.stage, r.action, r.touches) for r in out.recoveries] == [
        ("judge", "score 0.0", ["B"])
    ] * 2


def test_a_judge_reason_over_its_limit_is_cut_and_its_score_stands():
    spent = Exhausted(
        "judge", "w", "reason: too long", [json.dumps({"reason": "Same. " * 200, "score": 0.75})]
    )
    reply, rec = judge_stand_in(spent)
    assert reply.score == 0.75 and len(reply.reason) <= 500 and reply.reason.endswith("Same.")
    assert rec.touches == [] and rec.action == "cut reason"
