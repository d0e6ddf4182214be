"""compare.runs: paired differences with other runs, on Judge records built by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from memprobe.config.loading import load_config
from memprobe.protocol.calibration import Summary
from memprobe.report import compare, tables
from memprobe.spec.records import CalibrationVerdict, JudgeIdentity, Scored
from tests.helpers.release_fixture import release_config
from tests.helpers.tables import close, entry_of, judge_of, row
from tests.helpers.workflow import tiny_config

CATS = ("skill_memory", "knowledge_memory")
OURS = JudgeIdentity(form="llm", model="our-model", prompt="prompts/recovery_judge.md", digest="ab")


def judge(system, user, cats, mode="dump_all", truth="t", flag=False):
    """A user's judge record: one target per category, scored ``cats`` (None: no target)."""
    details = [
        entry_of(c, s, dimension=f"dim_{c}", ground_truth=f"{truth} {c}")
        for c, s in zip(CATS, cats, strict=True)
        if s is not None
    ]
    per = dict(zip(CATS, cats, strict=True))
    present = [s for s in cats if s is not None]
    overall = sum(present) / len(present)
    return judge_of(system, user, overall, mode, flag, details, per)


def scored(run, pairs, users, judge_=OURS, calibration=None):
    return Scored(run=run, users=users, pairs=pairs, judge=judge_, calibration=calibration)


def side(run, judges, judge_=OURS, calibration=None):
    pairs = list(dict.fromkeys((j.system, j.mode) for j in judges))
    users = sorted({j.user_id for j in judges})
    return compare.side(scored(run, pairs, users, judge_, calibration), judges)


def test_diff_is_the_mean_of_per_user_differences_over_the_users_both_scored():
    this = side("mine", [judge("x", "u1", (1.0, 0.5)), judge("x", "u2", (0.5, 0.5)),
                         judge("x", "u3", (1.0, 1.0))])  # fmt: skip
    # the other run has no u3, and a u4 this run does not have
    other = side("theirs", [judge("y", "u1", (0.5, 0.0)), judge("y", "u2", (0.5, 0.5)),
                            judge("y", "u4", (0.0, 0.0))])  # fmt: skip
    df = compare.compare(this, [other], seed=1)
    assert list(df.columns) == compare.COMPARE_COLUMNS
    assert len(df) == 1 + 5  # B and its five categories
    b = row(df, category="all")
    assert (b["system"], b["mode"], b["other_run"], b["other_system"]) == (
        "x",
        "dump_all",
        "theirs",
        "y",
    )
    # u1: .75 vs .25, u2: .5 vs .5 -> b .625, b_other .375, diff mean(.5, 0) = .25
    assert b["n_users"] == 2
    assert close(b["b"], 0.625) and close(b["b_other"], 0.375) and close(b["diff"], 0.25)
    assert b["ci_low"] <= b["diff"] <= b["ci_high"] and b["n_boot"] == tables.N_BOOT
    skill = row(df, category="skill")  # u1: 1 vs .5, u2: .5 vs .5
    assert close(skill["b"], 0.75) and close(skill["diff"], 0.25)
    # a category neither user has a target in: its row says so with no number
    episodic = row(df, category="episodic")
    assert episodic["n_users"] == 0 and pd.isna(episodic["b"]) and pd.isna(episodic["diff"])


def test_the_ci_is_paired_csvs_method_and_seed():
    mine = [0.9, 0.4, 0.7, 0.2, 0.8]
    theirs = [0.1, 0.5, 0.3, 0.2, 0.0]
    users = [f"u{i}" for i in (3, 1, 4, 0, 2)]  # out of order: both sort users by id
    this = side("mine", [judge("a", u, (v, v)) for u, v in zip(users, mine, strict=True)])
    other = side("theirs", [judge("b", u, (v, v)) for u, v in zip(users, theirs, strict=True)])
    got = row(compare.compare(this, [other], seed=5, n_boot=300), category="all")
    # paired.csv of one run holding both systems: the same difference and the same CI
    both = [j for j in (*this.judges[("a", "dump_all")].values(),
                        *other.judges[("b", "dump_all")].values())]  # fmt: skip
    want = tables.paired(["a", "b"], ["dump_all"], both, seed=5, n_boot=300).iloc[0]
    assert close(got["diff"], want["mean_diff"])
    assert (got["ci_low"], got["ci_high"]) == (want["ci_low"], want["ci_high"])
    assert got["ci_low"] < got["ci_high"]
    # another seed draws other resamples
    other_seed = row(compare.compare(this, [other], seed=6, n_boot=300), category="all")
    assert (other_seed["ci_low"], other_seed["ci_high"]) != (got["ci_low"], got["ci_high"])


def test_one_user_has_a_difference_and_no_ci():
    this = side("mine", [judge("a", "u1", (1.0, 1.0))])
    other = side("theirs", [judge("b", "u1", (0.5, 0.5))])
    got = row(compare.compare(this, [other], seed=0), category="all")
    assert got["n_users"] == 1 and close(got["diff"], 0.5)
    assert pd.isna(got["ci_low"]) and pd.isna(got["ci_high"])


def test_every_system_and_mode_against_every_system_of_each_run_in_that_mode():
    this = side("mine", [judge("a", "u1", (1.0, 1.0)), judge("a", "u1", (1.0, 0.0), "retrieve")])
    other = side(
        "theirs",
        [judge("n", "u1", (0.0, 0.0)), judge("m", "u1", (0.5, 0.5)),
         judge("m", "u1", (0.5, 0.0), "retrieve")],
    )  # fmt: skip
    third = side("third", [judge("a", "u1", (0.25, 0.25))])
    df = compare.compare(this, [other, third], seed=0)
    got = set(zip(df["mode"], df["other_run"], df["other_system"], strict=True))
    assert got == {
        ("dump_all", "theirs", "n"),
        ("dump_all", "theirs", "m"),
        ("dump_all", "third", "a"),
        ("retrieve", "theirs", "m"),
    }
    r = row(df, mode="retrieve", other_system="m", category="knowledge")
    assert close(r["b"], 0.0) and close(r["b_other"], 0.0)


def test_users_with_other_targets_are_left_out_and_counted():
    this = side("mine", [judge("a", "u1", (1.0, 1.0)), judge("a", "u2", (1.0, 1.0))])
    other = side("theirs", [judge("b", "u1", (0.0, 0.0)),
                            judge("b", "u2", (0.0, 0.0), truth="someone else")])  # fmt: skip
    got = row(compare.compare(this, [other], seed=0), category="all")
    assert got["n_users"] == 1
    assert "1 user(s) scored by both with other targets: left out" in got["note"]
    compare.check_shared(this, [other])  # one user left: comparable
    stranger = side("strangers", [judge("b", "u1", (0.0, 0.0), truth="another")])
    with pytest.raises(compare.CompareError, match=r"'strangers': no user it shares with 'mine'"):
        compare.check_shared(this, [stranger])


def test_notes_name_where_the_judges_differ_and_how_each_was_calibrated():
    on_paper = CalibrationVerdict(source="release", n=200, kappa=0.7, bias=0.031, passed=True)
    this = side("replay", [judge("a", "u1", (1.0, 1.0))], calibration=on_paper)
    paper = side("release", [judge("b", "u1", (0.5, 0.5))], judge_=compare.PAPER_JUDGE)
    note = row(compare.compare(this, [paper], seed=0), category="all")["note"]
    assert note.startswith(
        "judges differ (replay vs release): model our-model vs gpt-5.4-mini, prompt "
        "prompts/recovery_judge.md (ab) vs the release's own"
    )
    assert "replay's judge against the paper's judge: κ 0.70, bias +0.03 on 200 pairs" in note
    assert "release's judge" not in note  # the paper's judge is the yardstick itself

    anchors = CalibrationVerdict(source="anchors", n=47, kappa=0.2, bias=0.06, passed=False)
    offline = JudgeIdentity(form="scorer", model="offline judge", prompt="o.yaml", digest="cd")
    other = side("offline", [judge("b", "u1", (0.5, 0.5))], offline, anchors)
    note = row(compare.compare(this, [other], seed=0), category="all")["note"]
    assert "form llm vs scorer, model our-model vs offline judge" in note
    assert (
        "offline's judge not calibrated against the paper's judge (anchors: κ 0.20, bias "
        "+0.06 on 47 pairs, failed calibration)" in note
    )

    # The same judge: no judge note, but a failed calibration still shows.
    same = side("same", [judge("b", "u1", (0.5, 0.5))], calibration=on_paper)
    assert row(compare.compare(this, [same], seed=0), category="all")["note"] == ""
    failing = side("failing", [judge("b", "u1", (0.5, 0.5))], calibration=anchors)
    note = row(compare.compare(failing, [same], seed=0), category="all")["note"]
    assert note == "failing's judge failed calibration"


def test_overflowed_stores_are_noted_per_run():
    this = side("mine", [judge("a", "u1", (1.0, 1.0)), judge("a", "u2", (1.0, 1.0))])
    other = side("theirs", [judge("m", "u1", (0.0, 0.0), flag=True),
                            judge("m", "u2", (0.5, 0.5))])  # fmt: skip
    note = row(compare.compare(this, [other], seed=0), category="all")["note"]
    assert note == "† theirs m dump_all: 1 of 2 stores overflowed"


def test_figure_bars_use_the_users_every_run_scored():
    this = side("mine", [judge("a", "u1", (1.0, 1.0)), judge("a", "u2", (0.5, 0.5)),
                         judge("a", "u3", (0.0, 0.0))])  # fmt: skip
    other = side("theirs", [judge("b", "u1", (0.0, 0.0)), judge("b", "u2", (0.0, 0.0))])
    third = side("third", [judge("c", "u2", (0.5, 0.0)), judge("c", "u3", (0.5, 0.0))])
    bars, n = compare.figure_bars(this, [other, third], "dump_all", seed=0)
    assert n == 1  # u2 alone is in every run
    assert [(b.run, b.system, b.other) for b in bars] == [
        ("mine", "a", False),
        ("theirs", "b", True),
        ("third", "c", True),
    ]
    columns = list(compare.FIGURE_COLUMNS)
    assert bars[0].cells[columns.index("all")] == (0.5, None, None)  # one user: no CI
    assert bars[2].cells[columns.index("knowledge_memory")][0] == 0.0
    bars, n = compare.figure_bars(this, [other], "dump_all", seed=0)
    mean, low, high = bars[0].cells[columns.index("all")]
    assert n == 2 and mean == 0.75 and low is not None and low <= mean <= high
    assert compare.figure_bars(this, [other], "retrieve", seed=0) == ([], 0)
    # a bar resting on an overflowed store carries the dagger
    flagged = side("theirs", [judge("b", "u1", (0.0, 0.0), flag=True), judge("b", "u2", (0, 0))])
    bars, _ = compare.figure_bars(this, [flagged], "dump_all", seed=0)
    assert [b.flagged for b in bars] == [False, True]


def test_judge_identity_of_each_judge_form(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prompt = tmp_path / "judge.md"
    prompt.write_text("grade it")
    figures = tmp_path / "offline.yaml"
    figures.write_text("w: 1")
    raw = tiny_config("http://127.0.0.1:9/v1")
    raw["llm"]["roles"] = {"judge": {"model": "judge-model"}}
    got = compare.judge_identity(load_config(raw), str(prompt))
    assert (got.form, got.model, got.prompt) == ("llm", "judge-model", str(prompt))
    assert not got.paper
    assert got.digest == compare.file_digest(str(prompt)) and len(got.digest) == 12
    prompt.write_text("grade it strictly")
    assert compare.judge_identity(load_config(raw), str(prompt)).digest != got.digest

    raw["judge"] = {"form": "scorer", "scorer": str(figures)}
    got = compare.judge_identity(load_config(raw), str(prompt))
    assert (got.form, got.model, got.prompt) == ("scorer", "offline judge", str(figures))
    assert got.digest == compare.file_digest(str(figures))

    assert compare.judge_identity(load_config(release_config()), str(prompt)) == (
        compare.PAPER_JUDGE
    )
    assert compare.PAPER_JUDGE.model == "gpt-5.4-mini" and compare.PAPER_JUDGE.paper


def test_scored_keeps_the_calibration_verdict():
    summary = Summary(n=47, exact=0.5, within_one=0.9, bias=0.2, kappa=0.8, confusion=[[0]])
    got = compare.scored("r", ["u1"], [("a", "dump_all")], OURS, summary, "anchors", 0.6, 0.15)
    assert got.calibration == CalibrationVerdict(
        source="anchors",
        n=47,
        kappa=0.8,
        bias=0.2,
        passed=False,  # bias over 0.15
    )
    assert got.pairs == [("a", "dump_all")] and got.judge == OURS
    imported = compare.scored("r", ["u1"], [], compare.PAPER_JUDGE, None, None, 0.6, 0.15)
    assert imported.calibration is None
    assert Scored.model_validate_json(got.model_dump_json()) == got  # the file reads back


def test_the_report_header_names_each_run_and_its_judge():
    this = side("replay", [judge("a", "u1", (1.0, 1.0)), judge("a", "u2", (1.0, 1.0))])
    paper = side("release", [judge("b", "u1", (0.5, 0.5))], judge_=compare.PAPER_JUDGE)
    same = side("again", [judge("b", "u2", (0.5, 0.5))])
    text = compare.header(this, [paper, same])
    assert "release (1 shared users; judges differ (replay vs release): model" in text
    assert "again (1 shared users; the same judge)" in text
