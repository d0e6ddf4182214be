"""The offline judge against the paper's judge: fit it on some release users, measure it on
others, and rerun the variant search (``memprobe offline-judge fit|measure|variants``,
docs/fidelity.md's table of judges and table of variants)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from memprobe.config.stages import parse_users
from memprobe.protocol import calibration, offline_judge
from memprobe.protocol.offline_judge import Variant
from memprobe.release.judge_verdicts import stratified, verdicts

ANCHORS = "config/judge_calibration.yaml"


def _fitted_on(users: str, n: int) -> str:
    return (
        f"the release's recorded judge scores of users {users}: {n} non-unknown labels "
        "over all its runs"
    )


def fit(
    release_dir: str | Path,
    users: str,
    encode: offline_judge.Encode,
    variant: Variant = offline_judge.SHIPPED,
) -> offline_judge.Params:
    pairs = verdicts(release_dir, parse_users(users))
    return offline_judge.fit(
        [v.item() for v in pairs],
        [v.score for v in pairs],
        encode,
        fitted_on=_fitted_on(users, len(pairs)),
        variant=variant,
    )


class Measured(BaseModel):
    users: str
    n_natural: int
    stratified: calibration.Summary  # the seeded sample, equal per recorded level
    natural: calibration.Summary  # every non-unknown label of the users
    run_mean_diff: dict[str, float]  # per release run: our mean - the recorded mean
    opposite_anchors: dict[str, float]  # the anchors file's "opposite" pairs: our level

    def agreement(self) -> offline_judge.Agreement:
        """The headline figures, as the figures file keeps them."""
        diffs = self.run_mean_diff.values()
        return offline_judge.Agreement(
            users=self.users,
            n_stratified=self.stratified.n,
            n_natural=self.n_natural,
            kappa_stratified=round(self.stratified.kappa, 3),
            kappa_natural=round(self.natural.kappa, 3),
            bias_stratified=round(self.stratified.bias, 3),
            run_mean_diff=(round(min(diffs), 3), round(max(diffs), 3)),
            opposite_anchors=list(self.opposite_anchors.values()),
        )


def _opposites(anchors: str | Path) -> list[calibration.Anchor]:
    return [a for a in calibration.load_anchors(anchors).items if a.kind == "opposite"]


def _measured(
    users: str,
    pairs: Sequence[calibration.Anchor],
    ours: Sequence[float],
    sample_ids: set[str],
    opposites: dict[str, float],
) -> Measured:
    by_id = {v.id: o for v, o in zip(pairs, ours, strict=True)}
    by_run: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for v in pairs:
        by_run[v.run].append((v.score, by_id[v.id]))
    sample = [v for v in pairs if v.id in sample_ids]
    return Measured(
        users=users,
        n_natural=len(pairs),
        stratified=calibration.agreement([v.score for v in sample], [by_id[v.id] for v in sample]),
        natural=calibration.agreement([v.score for v in pairs], list(ours)),
        run_mean_diff={
            run: sum(o - r for r, o in rows) / len(rows) for run, rows in sorted(by_run.items())
        },
        opposite_anchors=opposites,
    )


def measure(
    release_dir: str | Path,
    users: str,
    n: int,
    seed: int,
    params: offline_judge.Params,
    encode: offline_judge.Encode,
    anchors: str | Path = ANCHORS,
) -> Measured:
    """The scorer on every judged label of ``users`` (it never grades a pair twice), and on
    the anchors file's opposite pairs."""
    pairs = verdicts(release_dir, parse_users(users))
    sample = {v.id for v in stratified(pairs, n, seed)}
    scored = offline_judge.grade(params, [v.item() for v in pairs], {}, encode)
    opposites = _opposites(anchors)
    graded = offline_judge.grade(params, [a.item() for a in opposites], {}, encode)
    return _measured(
        users,
        pairs,
        [float(r.score) for r in scored],
        sample,
        {a.id: float(r.score) for a, r in zip(opposites, graded, strict=True)},
    )


def report(m: Measured) -> str:
    s, nat = m.stratified, m.natural
    diffs = m.run_mean_diff.values()
    lines = [
        f"offline judge vs the paper's judge, users {m.users}",
        "| n | exact | within one | bias | κ stratified | κ natural | per-run mean difference |",
        "|---|---|---|---|---|---|---|",
        f"| {s.n} (+{m.n_natural} natural) | {s.exact:.2f} | {s.within_one:.2f} | "
        f"{s.bias:+.3f} | {s.kappa:.3f} | {nat.kappa:.3f} | "
        f"{min(diffs):+.3f} .. {max(diffs):+.3f} |",
        f"κ natural (all {m.n_natural} non-unknown labels): {nat.kappa:.3f}; "
        f"κ stratified ({s.n} pairs, {s.n // 5} per recorded level): {s.kappa:.3f}",
        f"natural: exact {nat.exact:.2f}, within one {nat.within_one:.2f}, bias {nat.bias:+.3f}",
        "opposite anchors: " + ", ".join(f"{k} {v:g}" for k, v in m.opposite_anchors.items()),
        *(f"  {run}: {d:+.3f}" for run, d in m.run_mean_diff.items()),
    ]
    return "\n".join(lines)


# -- the variant search ------------------------------------------------------------------
VARIANTS: tuple[Variant, ...] = (
    Variant(name="13 features + category (before issue 43)", drop=offline_judge.NEW_FEATURES),
    Variant(name="15 features + category", drop=()),
    Variant(
        name="15 features + category + bilinear r=48 (ridge 3), no contradiction cues",
        drop=("conflict_label_truth",),
        rank=48,
        ridge=3.0,
    ),
    Variant(
        name="15 features + category + bilinear r=48 (ridge 3), no label_clauses",
        drop=("label_clauses",),
        rank=48,
        ridge=3.0,
    ),
    *(
        Variant(name=f"15 features + category + bilinear r={r} (ridge {lam:g})", rank=r, ridge=lam)
        for r in (16, 32, 48)
        for lam in (1.0, 3.0, 10.0)
    ),
)
FOLDS = 5


class VariantRow(BaseModel):
    variant: Variant
    cv_kappa_natural: float  # mean over the folds of the fitted users, each graded by the rest
    measured: Measured


def _subset(enc: offline_judge.Encoded, keep: np.ndarray) -> offline_judge.Encoded:
    return offline_judge.Encoded(*(a[keep] for a in enc))


def variants(
    release_dir: str | Path,
    encode: offline_judge.Encode,
    fit_users: str = "1-25",
    measure_users: str = "26-50",
    candidates: Sequence[Variant] = VARIANTS,
    n: int = 200,
    seed: int = 0,
    anchors: str | Path = ANCHORS,
    progress=print,
) -> list[VariantRow]:
    """Every candidate fitted on ``fit_users`` and measured on ``measure_users`` (the same
    pairs, draw and anchors as ``measure``), with its cross-validated κ natural on
    ``fit_users`` alone: up to five folds of whole users (1-5, 6-10, ... of 1-25), each
    fitted on the others. The shipped variant is the one with the best cross-validated κ;
    the held-out figures only report it."""
    train = verdicts(release_dir, parse_users(fit_users))
    test = verdicts(release_dir, parse_users(measure_users))
    opposites = _opposites(anchors)
    sample = {v.id for v in stratified(test, n, seed)}
    enc_train = offline_judge.features([v.item() for v in train], encode)
    enc_test = offline_judge.features([v.item() for v in test], encode)
    enc_opp = offline_judge.features([a.item() for a in opposites], encode)
    cats = [v.category for v in train]
    y = np.array([v.score for v in train])
    users = sorted({v.user for v in train})
    folds = min(FOLDS, len(users))
    of_user = {u: i * folds // len(users) for i, u in enumerate(users)}
    fold = np.array([of_user[v.user] for v in train])
    rows = []
    for variant in candidates:
        kappas = []
        for k in range(folds):
            fit_on, held = fold != k, fold == k
            p = offline_judge.fit_encoded(
                _subset(enc_train, fit_on),
                [c for c, f in zip(cats, fit_on, strict=True) if f],
                y[fit_on],
                variant,
                "a fold",
            )
            got = p.levels(
                _subset(enc_train, held), [c for c, h in zip(cats, held, strict=True) if h]
            )
            kappas.append(calibration.agreement(y[held].tolist(), got.tolist()).kappa)
        p = offline_judge.fit_encoded(
            enc_train, cats, y, variant, _fitted_on(fit_users, len(train))
        )
        ours = p.levels(enc_test, [v.category for v in test]).tolist()
        opp = p.levels(enc_opp, [a.category for a in opposites]).tolist()
        row = VariantRow(
            variant=variant,
            cv_kappa_natural=float(np.mean(kappas)),
            measured=_measured(
                measure_users,
                test,
                ours,
                sample,
                {a.id: float(v) for a, v in zip(opposites, opp, strict=True)},
            ),
        )
        progress(variant_line(row))
        rows.append(row)
    return rows


def variant_line(row: VariantRow) -> str:
    m = row.measured
    s, diffs = m.stratified, m.run_mean_diff.values()
    opp = ", ".join(f"{v:g}" for v in m.opposite_anchors.values())
    return (
        f"| {row.variant.name} | {row.cv_kappa_natural:.3f} | {s.exact:.2f} | {s.within_one:.2f} "
        f"| {s.bias:+.3f} | {s.kappa:.3f} | {m.natural.kappa:.3f} "
        f"| {min(diffs):+.3f} .. {max(diffs):+.3f} | {opp} |"
    )


VARIANTS_HEADER = (
    "| variant | κ natural, 5-fold CV on 1-25 | exact | within one | bias | κ stratified "
    "| κ natural | per-run mean difference | opposite anchors |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def best(rows: Sequence[VariantRow]) -> VariantRow:
    """The variant with the best cross-validated κ natural (the first of a tie)."""
    return max(rows, key=lambda r: round(r.cv_kappa_natural, 3))
