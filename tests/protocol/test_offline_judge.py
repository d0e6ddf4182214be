"""The offline judge (memprobe/protocol/offline_judge.py): slot-only labels, levels, the fit,
the shipped figures, and (torch) the refit/measure commands and the built-in anchors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import yaml

from memprobe.protocol import calibration, offline_judge
from memprobe.protocol.judge import JudgeItem
from memprobe.spec import taxonomy
from memprobe.spec.records import RecordError
from memprobe.spec.rubric import LEVELS
from memprobe.vocabulary import CATEGORIES
from tests.helpers.encode import bag_of_words
from tests.helpers.workflow import ROOT

RELEASE = ROOT / "tests" / "fixtures" / "release"
AXES = taxonomy.load_pool(ROOT / "config" / "dimension_pool.yaml").axes()


def params(**update) -> offline_judge.Params:
    base = {
        "version": "test",
        "weights": dict.fromkeys(offline_judge.FEATURES, 0.0) | {"cos_label_truth": 1.0},
        "category_offsets": dict.fromkeys(CATEGORIES, 0.0),
        "cuts": [0.2, 0.4, 0.6, 0.8],
        "fitted_on": "a test",
    }
    return offline_judge.Params.model_validate(base | update)


def item(label: str, truth: str = "keeps crews in sync", dim: str = "coordination_skill"):
    return JudgeItem(
        category="skill_memory",
        dimension=dim,
        explanation="As a foreman she keeps five subcontractors working in sequence.",
        truth=truth,
        label=label,
    )


def test_a_label_that_only_names_its_slot_or_is_unknown_scores_zero():
    # Cuts far below any latent score: every label the features reach would score 1.0.
    generous = params(cuts=[-9.0, -8.0, -7.0, -6.0])
    slot_only = [
        "Skill memory",  # the category's name
        "skill_memory",
        "coordination skill",  # the dimension's name
        AXES["coordination_skill"],  # the pool's axis question
        "unknown",
    ]
    replies = offline_judge.grade(
        generous, [item(x) for x in [*slot_only, "keeps crews in sync"]], AXES, bag_of_words
    )
    assert [r.score for r in replies] == [0.0] * len(slot_only) + [1.0]
    assert (
        "only names its slot (category_name)" in replies[0].reason
        and "'unknown'" in replies[4].reason
    )


def test_levels_follow_the_cuts_and_the_category_offsets():
    p = params(category_offsets=dict.fromkeys(CATEGORIES, 0.0) | {"episodic_memory": -0.2})
    x = np.zeros((6, len(offline_judge.FEATURES)))
    x[:, 0] = [0.1, 0.3, 0.5, 0.7, 0.9, 0.5]
    cats = ["skill_memory"] * 5 + ["episodic_memory"]
    assert p.levels(x, cats).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0, 0.25]


def test_the_same_label_as_the_truth_scores_high_and_an_unrelated_one_low():
    replies = offline_judge.grade(
        params(),
        [item("keeps crews in sync"), item("prefers short bullet lists")],
        AXES,
        bag_of_words,
    )
    assert [r.score for r in replies] == [1.0, 0.0]
    assert replies[0].reason.startswith("offline judge: cosine to the truth 1.00")


def synthetic_pairs(n: int = 200) -> tuple[list[JudgeItem], list[float]]:
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(40)]
    items, scores = [], []
    for k in range(n):
        truth = " ".join(rng.choice(words, 4, replace=False))
        keep = int(rng.integers(0, 5))  # how many truth words the label keeps
        label = " ".join(truth.split()[:keep] + list(rng.choice(words, 4 - keep)))
        items.append(
            JudgeItem(
                category=CATEGORIES[k % 5],
                dimension="some_dimension",
                explanation="an explanation",
                truth=truth,
                label=label,
            )
        )
        scores.append(LEVELS[keep])
    return items, scores


def test_the_fit_is_deterministic_and_its_cuts_keep_the_recorded_level_shares():
    items, scores = synthetic_pairs()
    first = offline_judge.fit(items, scores, bag_of_words, fitted_on="synthetic")
    again = offline_judge.fit(items, scores, bag_of_words, fitted_on="synthetic")
    assert first == again
    graded = [r.score for r in offline_judge.grade(first, items, {}, bag_of_words)]
    for level in LEVELS:  # quantile cuts: each level about as often as recorded (ties aside)
        assert abs(graded.count(level) - scores.count(level)) <= 0.05 * len(scores), level
    # and it learned something: agreement well above chance
    s = calibration.agreement(scores, graded)
    assert s.kappa > 0.5


def test_the_shipped_figures_load_and_credit_the_release():
    p = offline_judge.load_params()
    assert tuple(p.weights) == offline_judge.FEATURES and p.cuts == sorted(p.cuts)
    assert "users 1-25" in p.fitted_on
    head = (ROOT / offline_judge.PARAMS).read_text(encoding="utf-8")
    assert "CC BY 4.0" in head and "memprobe offline-judge fit" in head


def test_a_bad_figures_file_is_one_line_naming_the_key(tmp_path):
    bad = tmp_path / "figures.yaml"
    good = (ROOT / offline_judge.PARAMS).read_text(encoding="utf-8")
    bad.write_text(good.replace("cos_label_truth:", "cos_label_truths:"))
    with pytest.raises(RecordError, match=r"figures.yaml: weights: expected the features"):
        offline_judge.load_params(bad)
    figures = yaml.safe_load(good)
    bad.write_text(yaml.safe_dump(figures | {"cuts": figures["cuts"][::-1]}, sort_keys=False))
    with pytest.raises(RecordError, match=r"figures.yaml: cuts: expected ascending"):
        offline_judge.load_params(bad)


# -- with the real MiniLM --------------------------------------------------------------------
@pytest.mark.torch
def test_the_shipped_judge_passes_the_built_in_anchors():
    """The default run calibrates on the anchors: its offline judge passes them."""
    from memprobe.serving.embeddings import encode_local

    anchors = calibration.load_anchors(ROOT / "config" / "judge_calibration.yaml")
    grade = offline_judge.grader(offline_judge.load_params(), AXES, encode_local)
    s = calibration.summarize(calibration.score_anchors(anchors, grade))
    assert s.kappa >= 0.6 and abs(s.bias) <= 0.15, s


@pytest.mark.torch
def test_the_refit_and_measure_commands_on_the_fixture_release(tmp_path):
    figures = tmp_path / "figures.yaml"

    def memprobe(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "memprobe.cli", "offline-judge", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    out = memprobe("fit", "--release", str(RELEASE), "--users", "1-2", "--params", str(figures))
    fitted = offline_judge.load_params(figures)
    assert "users 1-2" in fitted.fitted_on and str(figures) in out
    report = memprobe(
        "measure", "--release", str(RELEASE), "--users", "2-3", "--n", "10",
        "--params", str(figures),
    )  # fmt: skip
    assert "| 10 (+" in report and "mem0_pooled_50_retrieve:" in report
