"""The offline judge (memprobe/protocol/offline_judge.py): slot-only labels, levels, the
contradiction cue and the bilinear term, the fit, the shipped figures and what the docs quote
of them, and (torch) the fit/measure/variants commands, the built-in anchors, and a refit on
the real release (MEMPROBE_RELEASE_DIR, skipped without it)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

from memprobe.protocol import calibration, offline_judge
from memprobe.protocol.judge import JudgeItem
from memprobe.release import judge_agreement
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
        "variant": {"name": "a test"},
    }
    return offline_judge.Params.model_validate(base | update)


def encoded(x: np.ndarray, vectors: np.ndarray | None = None) -> offline_judge.Encoded:
    v = np.zeros((len(x), 4)) if vectors is None else vectors
    return offline_judge.Encoded(x=x, label=v, truth=v, context=v)


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
    assert p.levels(encoded(x), cats).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0, 0.25]


def test_the_bilinear_term_adds_label_times_truth_and_label_times_context():
    basis = np.eye(4)[:, :2]  # rank 2: the vectors' first two coordinates
    lt, lc = np.array([[1.0, 0.0], [0.0, 0.0]]), np.array([[0.0, 0.0], [0.0, 0.5]])
    bilinear = offline_judge.Bilinear(
        rank=2,
        dim=4,
        mean=offline_judge._pack(np.zeros(4)),
        basis=offline_judge._pack(basis),
        label_truth=offline_judge._pack(lt),
        label_context=offline_judge._pack(lc),
    )
    p = params(weights=dict.fromkeys(offline_judge.FEATURES, 0.0), bilinear=bilinear)
    label = np.array([[0.5, 0.4, 9.0, 9.0]])
    truth, context = np.array([[0.6, 9.0, 9.0, 9.0]]), np.array([[9.0, 0.2, 9.0, 9.0]])
    enc = offline_judge.Encoded(x=np.zeros((1, len(offline_judge.FEATURES))), label=label,
                                truth=truth, context=context)  # fmt: skip
    assert p.latent(enc, ["skill_memory"]).tolist() == pytest.approx([0.5 * 0.6 + 0.4 * 0.5 * 0.2])
    assert params().latent(enc, ["skill_memory"]).tolist() == [0.0]  # no bilinear: no term


def test_the_same_label_as_the_truth_scores_high_and_an_unrelated_one_low():
    replies = offline_judge.grade(
        params(),
        [item("keeps crews in sync"), item("prefers short bullet lists")],
        AXES,
        bag_of_words,
    )
    assert [r.score for r in replies] == [1.0, 0.0]
    assert replies[0].reason.startswith("offline judge: cosine to the truth 1.00")


def test_a_label_on_the_other_side_of_the_truth_is_a_contradiction_cue():
    """The cue is a feature: its fitted weight pulls a contradicting label down."""
    p = params(weights=dict.fromkeys(offline_judge.FEATURES, 0.0)
               | {"cos_label_truth": 1.0, "conflict_label_truth": -0.5})  # fmt: skip
    truth = "won a small-claims case over a withheld deposit"
    same, opposite = (
        item(label, truth=truth)
        for label in ("won a small-claims case over her deposit", "lost a small-claims case")
    )
    enc = offline_judge.features([same, opposite], bag_of_words)
    col = offline_judge.FEATURES.index("conflict_label_truth")
    assert enc.x[:, col].tolist() == [0.0, 1.0]
    replies = offline_judge.grade(p, [same, opposite], AXES, bag_of_words)
    assert replies[0].score >= 0.75 and replies[1].score == 0.0
    assert "opposite sides on outcome" in replies[1].reason
    assert "opposite sides" not in replies[0].reason


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


@pytest.mark.parametrize(
    "variant",
    [offline_judge.SHIPPED, offline_judge.Variant(name="plain", drop=offline_judge.NEW_FEATURES)],
    ids=["shipped", "13-features"],
)
def test_the_fit_is_deterministic_and_its_cuts_keep_the_recorded_level_shares(variant):
    items, scores = synthetic_pairs()
    first = offline_judge.fit(items, scores, bag_of_words, fitted_on="synthetic", variant=variant)
    again = offline_judge.fit(items, scores, bag_of_words, fitted_on="synthetic", variant=variant)
    assert first == again and first.variant == variant
    assert (first.bilinear is not None) == (variant.rank > 0)
    assert all(first.weights[f] == 0.0 for f in variant.drop)
    # what the file keeps is what grades: a round trip through the YAML grades the same
    reloaded = offline_judge.Params.model_validate(yaml.safe_load(offline_judge.params_yaml(first)))
    enc = offline_judge.features(items, bag_of_words)
    cats = [it.category for it in items]
    assert reloaded.levels(enc, cats).tolist() == first.levels(enc, cats).tolist()
    graded = [r.score for r in offline_judge.grade(first, items, {}, bag_of_words)]
    for level in LEVELS:  # quantile cuts: each level about as often as recorded (ties aside)
        assert abs(graded.count(level) - scores.count(level)) <= 0.05 * len(scores), level
    # and it learned something: agreement well above chance
    s = calibration.agreement(scores, graded)
    assert s.kappa > 0.5


def test_a_variant_that_drops_an_unknown_feature_is_refused():
    items, scores = synthetic_pairs(20)
    bad = offline_judge.Variant(name="typo", drop=("cos_label_truths",))
    with pytest.raises(ValueError, match="variant 'typo': no feature cos_label_truths"):
        offline_judge.fit(items, scores, bag_of_words, fitted_on="synthetic", variant=bad)


def test_the_shipped_figures_load_credit_the_release_and_meet_the_bar():
    p = offline_judge.load_params()
    assert tuple(p.weights) == offline_judge.FEATURES and p.cuts == sorted(p.cuts)
    assert "users 1-25" in p.fitted_on and p.variant == offline_judge.SHIPPED
    assert p.bilinear is not None and p.bilinear.rank == p.variant.rank
    head = (ROOT / offline_judge.PARAMS).read_text(encoding="utf-8")
    assert "CC BY 4.0" in head and "memprobe offline-judge fit" in head
    # issue 43's bar, on users the fit never saw (measured when fitted; the release-gated
    # test below measures a refit again)
    m = p.measured
    assert m is not None and m.users == "26-50" and m.n_natural > 5000
    assert m.kappa_natural >= 0.62 and m.kappa_stratified >= 0.68
    assert -0.03 <= m.run_mean_diff[0] <= m.run_mean_diff[1] <= 0.03
    assert sum(v <= 0.25 for v in m.opposite_anchors) >= 2


def _signed(v: float, places: int = 3) -> str:
    return f"{v:+.{places}f}".replace("-", "−")


def test_the_docs_quote_the_shipped_figures():
    """docs/fidelity.md's judge row, its table of judges and its table of variants quote what
    config/offline_judge.yaml measured."""
    p = offline_judge.load_params()
    m = p.measured
    assert m is not None
    doc = (ROOT / "docs" / "fidelity.md").read_text(encoding="utf-8")
    runs = f"{_signed(m.run_mean_diff[0])} .. {_signed(m.run_mean_diff[1])}"
    shipped = [line for line in doc.splitlines() if line.startswith("| offline judge (shipped")]
    assert len(shipped) == 1, "one row for the shipped offline judge"
    assert f"| {m.kappa_stratified:.3f} | {m.kappa_natural:.3f} | {runs} |" in shipped[0]
    chosen = [line for line in doc.splitlines() if line.startswith(f"| **{p.variant.name}")]
    assert len(chosen) == 1, f"the variants table marks {p.variant.name!r} in bold"
    assert f"| {m.kappa_stratified:.3f} | {m.kappa_natural:.3f} | {runs} |" in chosen[0]
    row = next(line for line in doc.splitlines() if line.startswith("| Offline judge (`judge.form"))
    assert f"within {runs.replace(' .. ', '..')} of the recorded" in row
    assert all(f"`{f}`" in row for f in offline_judge.FEATURES), "the row names every feature"


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
def test_the_shipped_judge_sees_the_opposite_anchors_as_it_recorded():
    """At least two of the three opposite anchors at 0.25 or below, the levels the figures
    file recorded when it was fitted."""
    from memprobe.serving.embeddings import encode_local

    anchors = calibration.load_anchors(ROOT / "config" / "judge_calibration.yaml")
    opposites = [a for a in anchors.items if a.kind == "opposite"]
    p = offline_judge.load_params()
    got = [r.score for r in offline_judge.grade(p, [a.item() for a in opposites], {}, encode_local)]
    assert p.measured is not None and got == p.measured.opposite_anchors
    assert sum(v <= 0.25 for v in got) >= 2, got


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


@pytest.mark.torch
def test_the_refit_and_measure_commands_on_the_fixture_release(tmp_path):
    """fit writes the figures and what they measured; measure and the variants table's row
    for the shipped variant give the same figures."""
    figures = tmp_path / "figures.yaml"
    users = ("--release", str(RELEASE), "--users", "1-2", "--measure-users", "2-3", "--n", "10")
    out = memprobe("fit", *users, "--params", str(figures))
    fitted = offline_judge.load_params(figures)
    assert "users 1-2" in fitted.fitted_on and str(figures) in out
    m = fitted.measured
    assert m is not None and m.users == "2-3" and m.n_stratified == 10
    report = memprobe(
        "measure", "--release", str(RELEASE), "--users", "2-3", "--n", "10",
        "--params", str(figures),
    )  # fmt: skip
    assert "| 10 (+" in report and "mem0_pooled_50_retrieve:" in report
    assert f"κ natural (all {m.n_natural} non-unknown labels): {m.kappa_natural:.3f}" in report
    assert f"κ stratified (10 pairs, 2 per recorded level): {m.kappa_stratified:.3f}" in report
    table = memprobe("variants", *users).splitlines()
    rows = [line for line in table if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == len(judge_agreement.VARIANTS)
    shipped = next(r for r in rows if r.startswith(f"| {offline_judge.SHIPPED.name} |"))
    assert f"| {m.kappa_stratified:.3f} | {m.kappa_natural:.3f} |" in shipped
    assert table[-1].startswith("best cross-validated: ")


RELEASE_ENV = "MEMPROBE_RELEASE_DIR"


@pytest.mark.torch
@pytest.mark.skipif(
    not os.environ.get(RELEASE_ENV),
    reason=f"set {RELEASE_ENV} to a checkout of the authors' release to refit on it (~4 min)",
)
def test_a_refit_on_the_release_gives_the_shipped_figures(tmp_path):
    """The shipped figures are what `memprobe offline-judge fit` makes of the release: the
    same weights and cuts (to MiniLM's batch rounding) and the same measured figures."""
    figures = tmp_path / "figures.yaml"
    memprobe("fit", "--release", os.environ[RELEASE_ENV], "--params", str(figures))
    refit, shipped = offline_judge.load_params(figures), offline_judge.load_params()
    assert refit.variant == shipped.variant and refit.fitted_on == shipped.fitted_on
    for got, want in (
        (refit.weights, shipped.weights),
        (refit.category_offsets, shipped.category_offsets),
    ):
        assert got == pytest.approx(want, abs=1e-3)
    assert refit.cuts == pytest.approx(shipped.cuts, abs=1e-3)
    assert refit.bilinear is not None and shipped.bilinear is not None
    for got, want in zip(refit.bilinear.arrays(), shipped.bilinear.arrays(), strict=True):
        assert np.allclose(got, want, atol=1e-4)
    assert refit.measured == shipped.measured
