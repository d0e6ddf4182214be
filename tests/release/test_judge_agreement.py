"""The offline judge fitted on some release users and measured on others
(memprobe/release/judge_agreement.py), on the fixture release with a bag-of-words encoder in
place of MiniLM (the commands on MiniLM: tests/protocol/test_offline_judge.py, torch)."""

from __future__ import annotations

from collections import Counter

import pytest

from memprobe.config.stages import parse_users
from memprobe.release import judge_agreement
from memprobe.release.judge_verdicts import verdicts
from tests.helpers.encode import bag_of_words
from tests.helpers.workflow import ROOT

RELEASE = ROOT / "tests" / "fixtures" / "release"


@pytest.fixture(scope="module")
def params():
    return judge_agreement.fit(RELEASE, "1-2", bag_of_words)


@pytest.fixture(scope="module")
def measured(params):
    return judge_agreement.measure(RELEASE, "2-3", 10, 0, params, bag_of_words)


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
    again = judge_agreement.measure(RELEASE, "2-3", 10, 0, params, bag_of_words)
    assert again == measured
    other = judge_agreement.measure(RELEASE, "2-3", 10, 1, params, bag_of_words)
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
    assert lines[4].startswith(f"natural: exact {nat.exact:.2f}")
    assert lines[5:] == [f"  {run}: {d:+.3f}" for run, d in diffs.items()]
