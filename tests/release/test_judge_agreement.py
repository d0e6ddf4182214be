"""The offline judge fitted on some release users and measured on others, and the variant
search (memprobe/release/judge_agreement.py), on the fixture release with a bag-of-words
encoder in place of MiniLM (the commands on MiniLM, and a refit on the real release:
tests/protocol/test_offline_judge.py, torch)."""

from __future__ import annotations

from collections import Counter

import pytest

from memprobe.config.stages import parse_users
from memprobe.protocol import offline_judge
from memprobe.release import judge_agreement
from memprobe.release.judge_verdicts import verdicts
from tests.helpers.encode import bag_of_words
from tests.helpers.workflow import ROOT

RELEASE = ROOT / "tests" / "fixtures" / "release"
ANCHORS = ROOT / "config" / "judge_calibration.yaml"


@pytest.fixture(scope="module")
def params():
    return judge_agreement.fit(RELEASE, "1-2", bag_of_words)


@pytest.fixture(scope="module")
def measured(params):
    return judge_agreement.measure(RELEASE, "2-3", 10, 0, params, bag_of_words, ANCHORS)


def test_the_fit_says_which_users_and_how_many_labels_it_was_fitted_on(params):
    n = len(verdicts(RELEASE, parse_users("1-2")))
    assert params.fitted_on == (
        f"the release's recorded judge scores of users 1-2: {n} non-unknown labels "
        "over all its runs"
    )
    assert judge_agreement.fit(RELEASE, "1-2", bag_of_words) == params  # deterministic


def test_measure_grades_every_label_and_draws_the_seeded_sample_from_them(params, measured):
    pairs = verdicts(RELEASE, parse_users("2-3"))
    assert measured.users == "2-3" and measured.n_natural == len(pairs)
    assert measured.natural.n == len(pairs) and measured.stratified.n == 10
    assert [sum(row) for row in measured.stratified.confusion] == [2] * 5  # 2 per recorded level
    again = judge_agreement.measure(RELEASE, "2-3", 10, 0, params, bag_of_words, ANCHORS)
    assert again == measured
    other = judge_agreement.measure(RELEASE, "2-3", 10, 1, params, bag_of_words, ANCHORS)
    assert other.natural == measured.natural  # the seed draws only the stratified sample
    assert other.stratified != measured.stratified


def test_the_per_run_differences_are_ours_minus_the_recorded_and_add_up_to_the_bias(measured):
    runs = Counter(v.run for v in verdicts(RELEASE, parse_users("2-3")))
    assert list(measured.run_mean_diff) == sorted(runs)
    total = sum(measured.run_mean_diff[r] * n for r, n in runs.items())
    assert total / sum(runs.values()) == pytest.approx(measured.natural.bias)
    assert len(set(measured.run_mean_diff.values())) > 1


def test_the_report_shows_the_sample_the_kappas_and_each_run(measured):
    lines = judge_agreement.report(measured).splitlines()
    s, nat, diffs = measured.stratified, measured.natural, measured.run_mean_diff
    assert lines[0] == "offline judge vs the paper's judge, users 2-3"
    assert lines[3].startswith(f"| 10 (+{measured.n_natural} natural) | {s.exact:.2f} | ")
    assert f"| {s.kappa:.3f} | {nat.kappa:.3f} |" in lines[3]
    assert lines[3].endswith(f"| {min(diffs.values()):+.3f} .. {max(diffs.values()):+.3f} |")
    assert lines[4] == (
        f"κ natural (all {measured.n_natural} non-unknown labels): {nat.kappa:.3f}; "
        f"κ stratified (10 pairs, 2 per recorded level): {s.kappa:.3f}"
    )
    assert lines[5].startswith(f"natural: exact {nat.exact:.2f}")
    assert lines[6] == "opposite anchors: skill-09 {:g}, episodic-09 {:g}, pref-08 {:g}".format(
        *measured.opposite_anchors.values()
    )
    assert lines[7:] == [f"  {run}: {d:+.3f}" for run, d in diffs.items()]


def test_measure_grades_the_anchors_files_opposite_pairs(measured):
    assert list(measured.opposite_anchors) == ["skill-09", "episodic-09", "pref-08"]
    a = measured.agreement()
    assert a.opposite_anchors == list(measured.opposite_anchors.values())
    assert a.kappa_natural == round(measured.natural.kappa, 3) and a.n_stratified == 10
    assert a.run_mean_diff == (
        round(min(measured.run_mean_diff.values()), 3),
        round(max(measured.run_mean_diff.values()), 3),
    )


SMALL = (
    offline_judge.Variant(name="plain", drop=offline_judge.NEW_FEATURES),
    offline_judge.Variant(name="bilinear", rank=4, ridge=3.0),
)


@pytest.fixture(scope="module")
def variant_rows():
    lines: list[str] = []
    rows = judge_agreement.variants(
        RELEASE, bag_of_words, "1-2", "2-3", SMALL, n=10, anchors=ANCHORS, progress=lines.append
    )
    return rows, lines


def test_each_variant_is_fitted_on_the_fit_users_and_measured_as_measure_does(variant_rows):
    rows, lines = variant_rows
    assert [r.variant for r in rows] == list(SMALL)
    for row in rows:
        params = judge_agreement.fit(RELEASE, "1-2", bag_of_words, row.variant)
        assert row.measured == judge_agreement.measure(
            RELEASE, "2-3", 10, 0, params, bag_of_words, ANCHORS
        )
    assert lines == [judge_agreement.variant_line(r) for r in rows]
    assert lines[0].startswith("| plain | ") and lines[0].count("|") == 10


def test_the_cross_validation_holds_out_whole_users(variant_rows, monkeypatch):
    """Two fitted users: two folds, each fitted on one user and graded on the other."""
    fitted: list[int] = []
    real = offline_judge.fit_encoded

    def spy(enc, categories, scores, variant, fitted_on):
        fitted.append(len(scores))
        return real(enc, categories, scores, variant, fitted_on)

    monkeypatch.setattr(offline_judge, "fit_encoded", spy)
    judge_agreement.variants(RELEASE, bag_of_words, "1-2", "2-3", SMALL[:1], n=10,
                             anchors=ANCHORS, progress=lambda _: None)  # fmt: skip
    per_user = Counter(v.user for v in verdicts(RELEASE, parse_users("1-2")))
    assert fitted == [per_user["user_002"], per_user["user_001"], sum(per_user.values())]
    rows, _ = variant_rows
    assert judge_agreement.best(rows) == max(rows, key=lambda r: r.cv_kappa_natural)
