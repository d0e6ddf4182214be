"""The judge form (memprobe/protocol/judge_form.py): judge.form picks who grades, for the judge
rule and the calibration alike."""

from __future__ import annotations

import pytest

from memprobe.config.loading import load_config
from memprobe.protocol import judge_form
from memprobe.protocol.judge import JudgeItem
from memprobe.spec.prompts import prompt_path
from tests.helpers.encode import bag_of_words
from tests.helpers.recording_llm import RecordingLLM
from tests.helpers.workflow import ROOT, tiny_config

POOL = str(ROOT / "config" / "dimension_pool.yaml")
ITEM = JudgeItem(
    category="skill_memory",
    dimension="coordination_skill",
    explanation="She keeps five subcontractors working in sequence.",
    truth="keeps crews in sync",
    label="coordination skill",  # only names the slot
)


def no_llm():
    raise AssertionError("the offline judge built an LLM client")


def test_the_scorer_form_grades_without_an_llm(monkeypatch):
    from memprobe.serving import embeddings

    monkeypatch.setattr(embeddings, "encode", bag_of_words)
    cfg = load_config(tiny_config("http://x/v1", judge={"form": "scorer"}))
    grade = judge_form.grader(cfg, no_llm, None, POOL, [])
    [reply] = grade([ITEM])
    assert reply.score == 0.0 and reply.reason.startswith("offline judge:")
    with pytest.raises(ValueError, match="needs the pool"):
        judge_form.grader(cfg, no_llm, None, None, [])


def test_the_llm_form_asks_the_judge_role():
    llm = RecordingLLM(lambda m, s: {"reason": "r", "score": 0.5})
    cfg = load_config(tiny_config("http://x/v1"))
    grade = judge_form.grader(cfg, lambda: llm, str(prompt_path("recovery_judge")), None, [])
    assert [r.score for r in grade([ITEM])] == [0.5] and len(llm.requests) == 1
    assert judge_form.second_opinion(cfg, POOL) is None
    checked = load_config(tiny_config("http://x/v1", judge={"cross_check": True}))
    assert judge_form.second_opinion(checked, POOL) is not None
