"""Judge calibration: the anchors, the agreement figures, the verdict, degenerate labels."""

from __future__ import annotations

import csv

import pytest

from memprobe import CATEGORIES
from memprobe.protocol import calibration
from memprobe.protocol.judge import JudgeReply, degenerate_kind, judge_user, llm_grader
from memprobe.spec import taxonomy
from memprobe.spec.prompts import prompt_path
from memprobe.spec.records import Bank, BankEntry, SlotFill, SlotFillEntry
from tests.helpers.jobs import ScriptJob
from tests.helpers.recording_llm import RecordingLLM
from tests.helpers.workflow import ROOT

ANCHORS = ROOT / "config" / "judge_calibration.yaml"
PROMPT = str(prompt_path("recovery_judge"))


@pytest.fixture(scope="module")
def anchors() -> calibration.Anchors:
    return calibration.load_anchors(ANCHORS)


def test_anchors_cover_every_category_level_and_degenerate_kind(anchors):
    assert len(anchors.items) >= 40
    assert calibration.coverage_gaps(anchors) == []
    # Each category has every rubric level: a judge cannot pass on one category's items.
    for c in CATEGORIES:
        levels = {a.score for a in anchors.items if a.category == c}
        assert levels == set(calibration.LEVELS), (c, levels)
    # Every dimension is a real pool axis of its category; an axis_question label is the
    # pool's own question, a verbatim label the truth itself.
    pool = taxonomy.load_pool(taxonomy.POOL_FILE)
    for a in anchors.items:
        dim = pool.dimension(a.category, a.dimension)
        if a.kind == "axis_question":
            assert a.label == dim.axis, a.id
        if a.kind == "verbatim":
            assert a.label == a.truth, a.id
        if a.kind in ("category_name", "dimension_name", "axis_question"):
            assert degenerate_kind(a.label, a.dimension, dim.axis) == a.kind, a.id


def test_coverage_gaps_names_what_is_missing(anchors):
    only_skill = calibration.Anchors(
        items=[a for a in anchors.items if a.category == "skill_memory" and a.score > 0]
    )
    gaps = calibration.coverage_gaps(only_skill)
    assert "category self_model" in gaps and "level 0" in gaps and "kind unknown" in gaps


def test_the_judge_prompt_never_shows_an_anchor(anchors):
    text = prompt_path("recovery_judge").read_text()
    shown = [
        a.id for a in anchors.items if a.truth in text or (len(a.label) > 12 and a.label in text)
    ]
    assert shown == []


def _replies(anchors, judge) -> list[calibration.Reply]:
    llm = RecordingLLM(lambda m, s: {"score": judge(m[-1]["content"]), "reason": "r"})
    return calibration.score_anchors(anchors, llm_grader(llm, PROMPT))


def test_a_judge_that_gives_one_everywhere_fails(anchors):
    s = calibration.summarize(_replies(anchors, lambda _: 1.0))
    assert s.kappa == pytest.approx(0.0)
    assert s.bias > 0.5
    assert s.confusion[0] == [0, 0, 0, 0, sum(a.score == 0 for a in anchors.items)]
    note = calibration.verdict(s, 0.6, 0.15)
    assert note is not None and note.startswith("judge failed calibration: κ 0.00, bias +0.")


def test_a_judge_that_agrees_passes_and_tolerance_accepts_the_neighbour(anchors):
    def expected(text: str) -> float:
        a = next(a for a in anchors.items if a.truth in text and a.label in text)
        # Where the rubric allows two levels, take the other one: still exact agreement.
        return a.score - a.tolerance

    s = calibration.summarize(_replies(anchors, expected))
    assert (s.exact, s.within_one, s.bias, s.kappa) == (1.0, 1.0, 0.0, 1.0)
    assert calibration.verdict(s, 0.6, 0.15) is None


def test_summary_csv_round_trips(anchors, tmp_path):
    s = calibration.summarize(_replies(anchors, lambda _: 0.5))
    path = tmp_path / "judge_calibration.csv"
    path.write_text(calibration.summary_csv(s))
    assert calibration.read_summary(path) == s.model_copy(
        update={k: round(getattr(s, k), 4) for k in ("exact", "within_one", "bias", "kappa")}
    )


def test_quadratic_kappa_known_values():
    assert calibration.quadratic_kappa([[2, 0], [0, 2]]) == pytest.approx(1.0)
    assert calibration.quadratic_kappa([[0, 2], [2, 0]]) == pytest.approx(-1.0)
    assert calibration.quadratic_kappa([[0, 2], [0, 2]]) == 0.0  # one side never varies


def test_a_bad_anchors_file_is_one_line_naming_it(tmp_path):
    bad = tmp_path / "anchors.yaml"
    bad.write_text("items:\n  - {id: a, category: skill_memory, dimension: d, explanation: e,"
                   " truth: t, label: l, kind: verbatim, score: 0.6}\n")  # fmt: skip
    with pytest.raises(calibration.CalibrationError, match=r"anchors.yaml: items.0.score"):
        calibration.load_anchors(bad)


@pytest.mark.parametrize(
    ("label", "kind"),
    [
        ("knowledge_memory", "category_name"),
        ("Episodic Memory", "category_name"),
        ("Assistance preference", "category_name"),
        ("Critical thinking skill", "dimension_name"),
        (
            "How well do they weigh the strengths and weaknesses of arguments and alternatives?",
            "axis_question",
        ),  # fmt: skip
        ("", "empty"),
        ("unknown", None),
        ("checks every source twice", None),
    ],
)
def test_degenerate_kind(label, kind):
    axis = "How well do they weigh the strengths and weaknesses of arguments and alternatives?"
    assert degenerate_kind(label, "critical_thinking_skill", axis) == kind


def test_degenerate_as_unknown_scores_zero_without_a_call():
    bank = Bank(
        user_id="user_001",
        entries=[
            BankEntry(category=c, dimension=d, short="s", explanation="e")
            for c, d in (("skill_memory", "writing_skill"), ("self_model", "anxiety_self_view"))
        ],
    )
    slot = SlotFill(
        user_id="user_001",
        system="nomem",
        mode="dump_all",
        entries=[
            SlotFillEntry(
                category="skill_memory", dimension="writing_skill", label="Skill memory", reason=""
            ),
            SlotFillEntry(
                category="self_model", dimension="anxiety_self_view", label="calm", reason=""
            ),
        ],  # fmt: skip
    )
    answer = RecordingLLM(lambda m, s: {"score": 1.0, "reason": "r"})
    as_protocol = judge_user(slot, bank, llm_grader(answer, PROMPT))
    assert len(answer.requests) == 2 and as_protocol.overall == 1.0
    option = RecordingLLM(lambda m, s: {"score": 1.0, "reason": "r"})
    scored = judge_user(slot, bank, llm_grader(option, PROMPT), degenerate_axes={})
    assert len(option.requests) == 1
    assert scored.per_category["skill_memory"] == 0.0
    assert "category_name" in scored.details[0].judge_reason


def test_the_judge_writes_its_reason_before_its_score():
    # A grammar-constrained model generates required fields in schema order.
    schema = JudgeReply.model_json_schema()
    assert list(schema["properties"]) == ["reason", "score"]
    assert schema["required"] == ["reason", "score"]


def test_the_runs_last_lines_report_slot_only_labels_and_the_cross_check(tmp_path):
    degenerate = tmp_path / "degenerate_labels.csv"
    degenerate.write_text(
        "system,mode,n_labels,empty,category_name,dimension_name,axis_question,degenerate,share\n"
        "longctx_full,dump_all,10,0,5,1,0,6,0.6\n"
        "longctx_full,retrieve,20,0,3,3,0,6,0.3\n"
    )
    checked = tmp_path / "judge_cross_check.csv"
    checked.write_text(
        "system,mode,cell,judge,offline,difference,flagged\n"
        "mem0,dump_all,B,0.75,0.5,-0.25,True\n"
        "mem0,dump_all,skill,0.75,0.75,0.0,False\n"
    )
    lines = calibration.closing_lines(str(degenerate), str(checked))
    assert lines == [
        f"memprobe: 12 of 30 slot-fill labels (40%) only name their slot (category, dimension "
        f"or question) instead of a value ({degenerate})",
        f"memprobe: judge cross-check: the offline judge disagrees on 1 of 2 B cells by more "
        f"than the margin ({checked})",
    ]
    assert calibration.closing_lines(str(tmp_path / "none.csv"), None) == []


def test_calibration_job_past_its_re_asks_scores_zero_and_lists_each_anchor(
    scripted, tmp_path, monkeypatch
):
    # Every judge reply breaks its schema (0.6 is not a rubric level): each anchor is
    # stood in for as the judge rule stands in for a label (0.0), which counts against the judge.
    ep, _ = scripted({"judge": {"else": {"reason": "close", "score": 0.6}}})
    job = ScriptJob(
        tmp_path, monkeypatch, "judge_calibration", ep.base_url, max_reasks=1, resample_invalid=0
    )
    inputs = {"anchors": str(ANCHORS), "prompt": PROMPT}
    outputs = {"summary": "summary.csv", "replies": "replies.csv"}
    assert job.run(inputs, outputs, {}) == 0
    replies = list(csv.DictReader(open(job.out("replies.csv"))))
    assert {float(r["judged"]) for r in replies} == {0.0}
    listed = job.recoveries({}).recoveries
    assert [r.where for r in listed] == [f"calibration pair {r['id']}" for r in replies]
    assert {(r.stage, r.action) for r in listed} == {("judge", "score 0.0")}
