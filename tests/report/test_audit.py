"""The human audit's arithmetic and checks (memprobe/report/audit.py), without a browser."""

from __future__ import annotations

import random

import pytest

from memprobe.report import audit
from memprobe.report.audit import AuditError, AuditItem, AuditSample

# 10 items, LLM vs person (hand-checked):
#   LLM:    M M M M M M S S S S   (M = memory_failure, S = simulator_too_strict)
#   person: M M M M S S S S S M
# observed agreement p_o = (4 + 3) / 10 = 0.7
# marginals: LLM M 6, S 4; person M 5, S 5 -> chance p_e = (6*5 + 4*5) / 100 = 0.5
# kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
M, S = "memory_failure", "simulator_too_strict"
LLM = [M] * 6 + [S] * 4
PERSON = [M] * 4 + [S, S] + [S] * 3 + [M]


def test_cohen_kappa_matches_the_hand_computation():
    pairs = list(zip(LLM, PERSON, strict=True))
    assert audit.cohen_kappa(pairs) == pytest.approx(0.4)
    # Perfect agreement on two labels is 1; one label everywhere has no defined kappa.
    assert audit.cohen_kappa([(M, M), (S, S)]) == pytest.approx(1.0)
    assert audit.cohen_kappa([(M, M), (M, M)]) is None


def test_bootstrap_ci_brackets_kappa_and_is_seeded():
    pairs = list(zip(LLM, PERSON, strict=True)) * 3
    lo, hi = audit.bootstrap_ci(pairs, seed=1)
    assert lo < 0.4 < hi
    assert (lo, hi) == audit.bootstrap_ci(pairs, seed=1)


def sample_of(labels: list[str]) -> AuditSample:
    items = [
        AuditItem(
            id=f"attribution:s:dump_all:user_001:d{i}",
            label_type="attribution",
            llm_label=label,
            system="s",
            user="user_001",
            category="skill_memory",
            context=[],
        )
        for i, label in enumerate(labels)
    ]
    return AuditSample(name="t", seed=0, n=len(items), labels={}, items=items)


def write_sheet(path, rows):
    lines = ["item_id,label_type,llm_label,verdict,human_label"]
    lines += [",".join(r) for r in rows]
    path.write_text("\n".join(lines) + "\n")


def test_sheet_agreement_from_the_hand_fixture(tmp_path):
    folder = tmp_path / "audit" / "t"
    folder.mkdir(parents=True)
    sample = sample_of(LLM)
    (folder / "items.json").write_text(sample.model_dump_json())
    rows = []
    for it, person in zip(sample.items, PERSON, strict=True):
        verdict = "agree" if person == it.llm_label else "disagree"
        rows.append(
            [it.id, "attribution", it.llm_label, verdict, "" if verdict == "agree" else person]
        )
    rows.append(["attribution:s:dump_all:user_001:d0", "attribution", M, "", ""])  # unmarked
    write_sheet(folder / "sheet.csv", rows)
    out = {r["label_type"]: r for r in audit.agreement_rows([folder / "sheet.csv"])}
    assert out["attribution"]["n"] == 10
    assert out["attribution"]["raw_agreement"] == "0.7000"
    assert out["attribution"]["kappa"] == "0.4000"
    assert (
        float(out["attribution"]["kappa_ci_low"]) < 0.4 < float(out["attribution"]["kappa_ci_high"])
    )
    assert out["feedback"]["n"] == 0 and out["feedback"]["kappa"] == ""


@pytest.mark.parametrize(
    "row, message",
    [
        (["nope", "attribution", M, "agree", ""], r"line 2: unknown item id 'nope'"),
        (["attribution:s:dump_all:user_001:d0", "attribution", M, "disagree", "bogus"],
         r"line 2: unknown attribution label 'bogus'; expected one of task_design_failure"),
        (["attribution:s:dump_all:user_001:d0", "attribution", M, "maybe", ""],
         r"line 2: verdict 'maybe'"),
    ],
)  # fmt: skip
def test_a_bad_sheet_is_one_line_naming_file_and_line(tmp_path, row, message):
    write_sheet(tmp_path / "sheet.csv", [row])
    with pytest.raises(AuditError, match=message) as err:
        audit.read_sheet(tmp_path / "sheet.csv", sample_of([M]))
    assert "\n" not in str(err.value) and str(tmp_path / "sheet.csv") in str(err.value)


def test_stratified_draw_covers_every_stratum_before_repeating_one():
    items = [
        AuditItem(id=f"{s}{lab}{i}", label_type="feedback", llm_label=lab, system=s, user="u",
                  category="skill_memory", context=[])
        for s in ("a", "b")
        for lab in ("followup", "satisfied")
        for i in range(10 if lab == "followup" else 1)
    ]  # fmt: skip
    picked = audit.stratified(items, 4, random.Random(3))
    assert {(p.system, p.llm_label) for p in picked} == {
        ("a", "followup"), ("a", "satisfied"), ("b", "followup"), ("b", "satisfied")
    }  # fmt: skip
    assert [p.id for p in picked] == [p.id for p in audit.stratified(items, 4, random.Random(3))]
