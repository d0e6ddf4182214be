"""The rubric object feeds every place that knows the judge's scale (memprobe/spec/rubric.py):
the reply schema, the prompt's scale, the unknown policy, attribution's threshold, imported
scores. Each test changes the rubric and sees the change arrive."""

from __future__ import annotations

import json
import shutil

import pytest

from memprobe.protocol import attribution
from memprobe.protocol.judge import JudgeReply, ask_judge, judge_user, llm_grader
from memprobe.release import importer, layout
from memprobe.spec.prompts import prompt_path
from memprobe.spec.records import RecordError
from memprobe.spec.rubric import RUBRIC
from tests.helpers.attribution_case import BANK as ATT_BANK
from tests.helpers.attribution_case import EPISODES, ORACLE, PROMPTS, TASKS, answer, judge
from tests.helpers.recording_llm import RecordingLLM
from tests.helpers.recovery_case import BANK, slotfill, store
from tests.helpers.release_fixture import FIXTURE, cfg_model

JUDGE_PROMPT = str(prompt_path("recovery_judge"))


def test_the_judge_schema_allows_exactly_the_rubric_levels():
    schema = JudgeReply.model_json_schema()
    assert schema["properties"]["score"]["enum"] == list(RUBRIC.levels)


def test_the_judge_prompt_shows_the_rubric_scale(monkeypatch):
    renamed = RUBRIC.grades[0].model_copy(update={"name": "IDENTICAL", "meaning": "SAME-FACT."})
    rubric = RUBRIC.model_copy(update={"grades": (renamed, *RUBRIC.grades[1:])})
    monkeypatch.setattr("memprobe.protocol.judge.RUBRIC", rubric)
    llm = RecordingLLM(lambda m, s: {"score": 1.0, "reason": "r"})
    ask_judge(
        llm,
        JUDGE_PROMPT,
        dimension="d",
        explanation="e",
        truth="t",
        label="l",
        where="",
        stand_ins=[],
    )
    text = llm.prompt_text(0)
    assert "1.0 = IDENTICAL: SAME-FACT." in text
    for g in RUBRIC.grades[1:]:
        assert f"{g.score!r} = {g.name}: {g.meaning}" in text
    assert "the level (0.0, 0.25, 0.5, 0.75 or 1.0)" in text
    assert "$" not in text


def test_an_unknown_label_scores_the_rubric_unknown_score(monkeypatch):
    monkeypatch.setattr(
        "memprobe.protocol.judge.RUBRIC", RUBRIC.model_copy(update={"unknown_score": 0.25})
    )
    out = slotfill(store(1, 5), RecordingLLM(lambda m, s: {"label": "unknown", "reason": ""}))
    judge_llm = RecordingLLM(lambda m, s: {"score": 1.0, "reason": "r"})
    judged = judge_user(out, BANK, llm_grader(judge_llm, JUDGE_PROMPT))
    assert judge_llm.requests == []  # no call for "unknown"
    assert [d.score for d in judged.details] == [0.25, 0.25]


def test_attribution_counts_recovered_from_the_rubric_threshold(monkeypatch):
    monkeypatch.setattr(
        attribution, "RUBRIC", RUBRIC.model_copy(update={"recovered_threshold": 0.5})
    )
    out = attribution.attribute_user(
        judge("dump_all"), ATT_BANK, TASKS, EPISODES, ORACLE, RecordingLLM(answer), PROMPTS
    )
    labels = {d.dimension: d.label for d in out.details}
    assert labels["prudence_self_view"] == "ok"  # 0.5: recovered at this threshold
    assert labels["critical_thinking_skill"] == "memory_failure"  # 0.25: not


def test_an_imported_score_off_the_rubric_is_refused(tmp_path):
    copy = tmp_path / "release"
    shutil.copytree(FIXTURE, copy)
    cfg = cfg_model(release_dir=str(copy))
    lay = layout.Layout(cfg)
    path = lay.recon_judge("longctx_full", "retrieve", "user_001")
    raw = json.loads(path.read_text())
    raw["details"][1]["score"] = 0.3
    path.write_text(json.dumps(raw))
    bank = importer.bank(lay, "user_001", cfg.dims_per_category)
    mem = importer.memories(lay, "longctx_full", "user_001")
    with pytest.raises(RecordError, match=r"details\.1\.score: .*0\.0, 0\.25, 0\.5, 0\.75 or 1\.0"):
        importer.scores(lay, "longctx_full", "retrieve", "user_001", bank, mem)


def test_the_levels_carry_the_releases_meanings():
    """docs/release-format.md §3.6: exact, close, partial, weak, wrong, in our own words."""
    meaning = {g.score: g.meaning for g in RUBRIC.grades}
    assert [g.name for g in RUBRIC.grades] == ["exact", "close", "partial", "weak", "wrong"]
    assert "nothing contradicted" in meaning[1.0] and "nothing left out" in meaning[1.0]
    assert "core meaning" in meaning[0.75] and "minor aspect" in meaning[0.75]
    assert "key element" in meaning[0.5] and "slightly off" in meaning[0.5]
    assert "marginal overlap" in meaning[0.25] and "misses the point" in meaning[0.25]
    assert "contradicts" in meaning[0.0] and "unrelated" in meaning[0.0]
    assert RUBRIC.version == "2"
