"""The offline judge: a scorer fitted on the paper's judge, for runs without a strong LLM.

It grades a (truth, label) pair from the all-MiniLM-L6-v2 vectors of the label, the truth,
the bank explanation, both together ("context") and the dimension's name, and from the words
of the texts. Its latent score is the sum of

- fifteen features (:data:`FEATURES`), each with a weight: five cosines (the label against
  the truth, the explanation, the context and the dimension's name; the truth against the
  explanation), three content-word overlaps and their Jaccard, a length ratio, a negation
  mismatch, cosine × overlap, the label's length, how many phrases the label strings
  together, and a contradiction cue (the axes on which label and truth take opposite sides,
  ``memprobe/protocol/opposites.py``);
- one offset per category;
- a bilinear term: the label's, the truth's and the context's vectors projected on the first
  ``rank`` principal axes of the fitted texts' vectors, and fitted ``rank × rank`` matrices
  between label and truth and between label and context, so the fit learns which
  differences of meaning the paper's judge weighs, where a cosine weighs all alike.

The latent score is cut into the rubric's five levels at four thresholds. The figures live in
``config/offline_judge.yaml``: ``memprobe offline-judge fit`` refits them on the release's
recorded verdicts of users 1-25 (ridge least squares of the recorded score, the ridge on the
bilinear matrices only; the cuts where the fitted users' recorded levels have the same
shares, so the levels are spread as the paper's judge spread them) and measures them on users
26-50, which the file keeps beside them. ``memprobe offline-judge variants`` reruns the
variant search that chose the features, rank and ridge (docs/fidelity.md). Judge time is
numpy only, milliseconds per batch once the texts are encoded.

A label that only names its slot (a category, the dimension, the axis question, see
``judge.degenerate_kind``) and "unknown" score 0 before any feature is computed: the
release's labels never do that, so no fit could learn it.
"""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from memprobe.protocol.judge import Grader, JudgeItem, JudgeReply, degenerate_kind
from memprobe.protocol.opposites import conflicts
from memprobe.protocol.slotfill import is_unknown
from memprobe.spec.records import load_yaml
from memprobe.spec.rubric import LEVELS, RUBRIC
from memprobe.vocabulary import CATEGORIES, Category

PARAMS = "config/offline_judge.yaml"
Encode = Callable[[list[str]], np.ndarray]

FEATURES: tuple[str, ...] = (
    "cos_label_truth",
    "cos_label_explanation",
    "cos_label_context",  # truth and explanation together
    "cos_label_dimension",
    "cos_truth_explanation",
    "truth_words_in_label",
    "label_words_in_truth",
    "label_words_in_context",
    "word_jaccard",
    "length_ratio",
    "negation_mismatch",
    "cos_times_overlap",
    "label_length",
    "label_clauses",  # how many phrases the label strings together
    "conflict_label_truth",  # axes on which label and truth take opposite sides
)
# the features added in issue 43; the judge before it had the other thirteen
NEW_FEATURES = ("label_clauses", "conflict_label_truth")

_STOP = frozenset(
    """a an the and or but if of to in on for with by at from as into about over under after
    before than then so is are was were be been being it its this that these those he she they
    him her his hers them their theirs i me my we us our you your who whom which what when
    where how why not no nor also just only very more most less much many some any all each
    other own same such can could would should will may might do does did have has had up
    down out off again once here there both few too""".split()
)
_NEGATION = re.compile(
    r"\b(no|not|never|none|nothing|without|lacks?|lacking|avoids?|dislikes?|rarely|hardly|"
    r"cannot|can't|doesn't|don't|isn't|won't|un\w+|non\w*)\b"
)


def _stem(word: str) -> str:
    for suffix in ("ing", "edly", "ed", "ly", "es", "s", "er", "ers"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


# where a label's phrases part: punctuation and the words that join clauses
_CLAUSE_BREAK = re.compile(
    r"[,;:/()]|\b(?:and|or|but|while|with|that|who|when|after|before|because|by|via|through)\b",
    re.I,
)


def _clauses(text: str) -> int:
    return max(1, sum(len(part.strip()) > 2 for part in _CLAUSE_BREAK.split(text)))


def _content(text: str) -> set[str]:
    return {_stem(w) for w in _words(text) if w not in _STOP and len(w) > 2}


def _share(part: set[str], whole: set[str]) -> float:
    return len(part & whole) / len(part) if part else 0.0


def _dimension_text(dimension: str) -> str:
    return dimension.replace("_", " ")


def _context(truth: str, explanation: str) -> str:
    return f"{truth}. {explanation}"


class Encoded(NamedTuple):
    """What the judge computes of a batch of pairs: one row of :data:`FEATURES` per pair, and
    the MiniLM vectors its bilinear term reads."""

    x: np.ndarray
    label: np.ndarray
    truth: np.ndarray
    context: np.ndarray


def features(items: Sequence[JudgeItem], encode: Encode) -> Encoded:
    """The features of every pair; every distinct text is encoded once."""
    texts = sorted(
        {
            t
            for it in items
            for t in (
                it.label,
                it.truth,
                it.explanation,
                _context(it.truth, it.explanation),
                _dimension_text(it.dimension),
            )
        }
    )
    vec = dict(zip(texts, encode(texts), strict=True))
    rows = []
    for it in items:
        label = vec[it.label]
        cos_truth = float(label @ vec[it.truth])
        lw, tw = _content(it.label), _content(it.truth)
        cw = tw | _content(it.explanation)
        truth_in_label = _share(tw, lw)
        rows.append(
            [
                cos_truth,
                float(label @ vec[it.explanation]),
                float(label @ vec[_context(it.truth, it.explanation)]),
                float(label @ vec[_dimension_text(it.dimension)]),
                float(vec[it.truth] @ vec[it.explanation]),
                truth_in_label,
                _share(lw, tw),
                _share(lw, cw),
                len(lw & tw) / max(1, len(lw | tw)),
                float(np.log((len(_words(it.label)) + 1) / (len(_words(it.truth)) + 1))),
                float(
                    bool(_NEGATION.search(it.label.lower()))
                    != bool(_NEGATION.search(it.truth.lower()))
                ),
                cos_truth * truth_in_label,
                float(np.log1p(len(_words(it.label)))),
                float(_clauses(it.label)),
                float(len(conflicts(it.label, it.truth))),
            ]
        )

    def stack(texts: list[str]) -> np.ndarray:
        if not texts:  # an empty batch (every label only named its slot)
            return np.zeros((0, 0))
        return np.asarray([vec[t] for t in texts], dtype=np.float64).reshape(len(texts), -1)

    return Encoded(
        x=np.asarray(rows, dtype=np.float64).reshape(len(items), len(FEATURES)),
        label=stack([it.label for it in items]),
        truth=stack([it.truth for it in items]),
        context=stack([_context(it.truth, it.explanation) for it in items]),
    )


def _pack(a: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(a, dtype="<f4").tobytes()).decode("ascii")


def _unpack(text: str, shape: tuple[int, ...]) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f4").astype(np.float64).reshape(shape)


class Bilinear(BaseModel):
    """The bilinear term: label · truth and label · context through ``rank × rank`` matrices,
    on the vectors' first ``rank`` principal axes (float32 arrays, base64, little-endian)."""

    model_config = ConfigDict(extra="forbid")

    rank: int = Field(ge=1)
    dim: int = Field(ge=1)  # the vectors' size (MiniLM: 384)
    mean: str  # dim: the fitted texts' mean vector
    basis: str  # dim x rank: the principal axes
    label_truth: str  # rank x rank
    label_context: str  # rank x rank

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        r, d = self.rank, self.dim
        return (
            _unpack(self.mean, (d,)),
            _unpack(self.basis, (d, r)),
            _unpack(self.label_truth, (r, r)),
            _unpack(self.label_context, (r, r)),
        )

    def term(self, enc: Encoded) -> np.ndarray:
        mean, basis, lt, lc = self.arrays()
        label, truth, context = ((v - mean) @ basis for v in (enc.label, enc.truth, enc.context))
        return np.einsum("ni,ij,nj->n", label, lt, truth) + np.einsum(
            "ni,ij,nj->n", label, lc, context
        )


class Variant(BaseModel):
    """What a fit fits: the features it leaves out (weight 0), and the bilinear term's rank
    (0: none) and ridge."""

    model_config = ConfigDict(extra="forbid")

    name: str
    drop: tuple[str, ...] = ()
    rank: int = Field(default=0, ge=0)
    ridge: float = Field(default=0.0, ge=0.0)  # on the bilinear matrices only


class Agreement(BaseModel):
    """The fitted figures against the paper's judge on users the fit never saw, as measured
    when they were fitted (``memprobe offline-judge fit``; docs/fidelity.md quotes them)."""

    model_config = ConfigDict(extra="forbid")

    users: str
    n_stratified: int
    n_natural: int
    kappa_stratified: float
    kappa_natural: float
    bias_stratified: float
    run_mean_diff: tuple[float, float]  # the lowest and highest, over the release's runs
    opposite_anchors: list[float]  # config/judge_calibration.yaml's "opposite" anchors


class Params(BaseModel):
    """The fitted figures (config/offline_judge.yaml)."""

    model_config = ConfigDict(extra="forbid")

    version: str
    variant: Variant
    weights: dict[str, float]  # one per feature, in FEATURES order
    category_offsets: dict[Category, float]
    cuts: list[float] = Field(min_length=len(LEVELS) - 1, max_length=len(LEVELS) - 1)
    fitted_on: str  # what the figures were fitted on, in words
    measured: Agreement | None = None
    bilinear: Bilinear | None = None

    @field_validator("weights")
    @classmethod
    def _every_feature(cls, v: dict[str, float]) -> dict[str, float]:
        if tuple(v) != FEATURES:
            raise ValueError(f"expected the features {', '.join(FEATURES)} in this order")
        return v

    @field_validator("category_offsets")
    @classmethod
    def _every_category(cls, v: dict[str, float]) -> dict[str, float]:
        if set(v) != set(CATEGORIES):
            raise ValueError(f"expected one offset per category ({', '.join(CATEGORIES)})")
        return v

    @field_validator("cuts")
    @classmethod
    def _ascending(cls, v: list[float]) -> list[float]:
        if v != sorted(v):
            raise ValueError("expected ascending thresholds")
        return v

    def latent(self, enc: Encoded, categories: Sequence[str]) -> np.ndarray:
        w = np.array(list(self.weights.values()))
        offsets = np.array([self.category_offsets[c] for c in categories])  # type: ignore[index]
        score = enc.x @ w + offsets
        return score + self.bilinear.term(enc) if self.bilinear else score

    def levels(self, enc: Encoded, categories: Sequence[str]) -> np.ndarray:
        i = np.searchsorted(np.array(self.cuts), self.latent(enc, categories), side="right")
        return np.array(LEVELS)[i]


def load_params(path: str | Path = PARAMS) -> Params:
    return load_yaml(path, Params, "offline judge figures")


def _slot_only(it: JudgeItem, axes: dict[str, str]) -> str | None:
    if is_unknown(it.label):
        return "label is 'unknown'"
    kind = degenerate_kind(it.label, it.dimension, axes.get(it.dimension))
    return f"label only names its slot ({kind}), no value" if kind else None


def grade(
    params: Params, items: Sequence[JudgeItem], axes: dict[str, str], encode: Encode
) -> list[JudgeReply]:
    """The rubric level of every pair, with a one-line reason (the LLM judge's record shape)."""
    names = {g.score: g.name for g in RUBRIC.grades}
    empty = {i: why for i, it in enumerate(items) if (why := _slot_only(it, axes))}
    scored = [it for i, it in enumerate(items) if i not in empty]
    enc = features(scored, encode)
    graded = params.levels(enc, [it.category for it in scored]) if scored else np.array([])
    levels = iter(graded.tolist())
    rows = iter(enc.x.tolist())
    pairs = iter(scored)
    out = []
    for i in range(len(items)):
        if i in empty:
            out.append(JudgeReply(reason=f"offline judge: {empty[i]}", score=RUBRIC.unknown_score))
            continue
        level, row, it = next(levels), dict(zip(FEATURES, next(rows), strict=True)), next(pairs)
        opposed = conflicts(it.label, it.truth)
        out.append(
            JudgeReply(
                reason=f"offline judge: cosine to the truth {row['cos_label_truth']:.2f}, "
                f"to truth and explanation {row['cos_label_context']:.2f}, "
                f"word overlap {row['word_jaccard']:.2f}"
                + (f", opposite sides on {', '.join(opposed)}" if opposed else "")
                + f" -> {names[level]}",
                score=level,
            )
        )
    return out


def grader(params: Params, axes: dict[str, str], encode: Encode | None = None) -> Grader:
    """A ``judge.Grader`` that scores with these figures (MiniLM, from the run's embedding
    server when it has one)."""
    if encode is None:
        from memprobe.serving import embeddings

        encode = embeddings.encode
    return functools.partial(grade, params, axes=axes, encode=encode)


# -- fitting ----------------------------------------------------------------------------
SHIPPED = Variant(name="15 features + category + bilinear r=48 (ridge 3)", rank=48, ridge=3.0)


def _principal_axes(enc: Encoded, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """The fitted texts' mean vector and first ``rank`` principal axes, rounded to float32
    (what the figures file keeps), signs fixed so that the fit does not depend on LAPACK's."""
    stacked = np.vstack([enc.label, enc.truth, enc.context])
    mean = stacked.mean(axis=0)
    vt = np.linalg.svd(stacked - mean, full_matrices=False)[2][:rank]
    vt *= np.sign(vt[np.arange(rank), np.abs(vt).argmax(axis=1)])[:, None]
    return mean.astype("<f4").astype(np.float64), vt.T.astype("<f4").astype(np.float64)


def fit_encoded(
    enc: Encoded,
    categories: Sequence[str],
    scores: Sequence[float] | np.ndarray,
    variant: Variant,
    fitted_on: str,
) -> Params:
    """Ridge least squares of the recorded score on the features, a per-category offset and
    (rank > 0) the bilinear matrices, the ridge on those only; cuts at the recorded levels'
    cumulative shares of the fitted latent score. Deterministic."""
    if unknown := set(variant.drop) - set(FEATURES):
        raise ValueError(f"variant {variant.name!r}: no feature {', '.join(sorted(unknown))}")
    used = [f not in variant.drop for f in FEATURES]
    onehot = np.array([[c == k for k in CATEGORIES] for c in categories], dtype=np.float64)
    blocks = [enc.x[:, used], onehot]
    mean = basis = None
    if variant.rank:
        mean, basis = _principal_axes(enc, variant.rank)
        label, truth, context = ((v - mean) @ basis for v in (enc.label, enc.truth, enc.context))
        n = len(label)
        blocks += [
            (label[:, :, None] * truth[:, None, :]).reshape(n, -1),
            (label[:, :, None] * context[:, None, :]).reshape(n, -1),
        ]
    design = np.hstack(blocks)
    y = np.asarray(scores, dtype=np.float64)
    n_plain = sum(used) + len(CATEGORIES)
    if variant.rank:
        ridge = np.r_[np.zeros(n_plain), np.full(design.shape[1] - n_plain, variant.ridge)]
        # least squares on the normal equations: a feature that never varies (a small fit)
        # leaves them singular, and lstsq then takes the smallest solution as above
        coef = np.linalg.lstsq(design.T @ design + np.diag(ridge), design.T @ y, rcond=None)[0]
    else:
        coef = np.linalg.lstsq(design, y, rcond=None)[0]
    plain = iter(coef[: sum(used)].tolist())
    weights = {f: round(next(plain), 6) if u else 0.0 for f, u in zip(FEATURES, used, strict=True)}
    offsets = {
        c: round(float(v), 6) for c, v in zip(CATEGORIES, coef[sum(used) : n_plain], strict=True)
    }
    bilinear = None
    if variant.rank:
        assert mean is not None and basis is not None
        r = variant.rank
        lt, lc = coef[n_plain : n_plain + r * r], coef[n_plain + r * r :]
        bilinear = Bilinear(
            rank=r,
            dim=len(mean),
            mean=_pack(mean),
            basis=_pack(basis),
            label_truth=_pack(lt.reshape(r, r)),
            label_context=_pack(lc.reshape(r, r)),
        )
    params = Params(
        version="2",
        variant=variant,
        weights=weights,
        category_offsets=offsets,  # type: ignore[arg-type]
        cuts=[0.0] * (len(LEVELS) - 1),
        fitted_on=fitted_on,
        bilinear=bilinear,
    )
    latent = params.latent(enc, categories)  # from the figures as the file keeps them
    shares = np.cumsum([np.mean(y == v) for v in LEVELS[:-1]])
    params.cuts = [round(float(c), 6) for c in np.quantile(latent, shares)]
    return params


def fit(
    items: Sequence[JudgeItem],
    scores: Sequence[float],
    encode: Encode,
    fitted_on: str,
    variant: Variant = SHIPPED,
) -> Params:
    """:func:`fit_encoded` on the pairs' features."""
    return fit_encoded(
        features(items, encode), [it.category for it in items], scores, variant, fitted_on
    )


HEADER = """\
# The offline judge's figures (memprobe/protocol/offline_judge.py), fitted on the recorded
# verdicts of the paper's judge in the authors' MemProbe release (CC BY 4.0; credit: the
# MemProbe authors, docs/release-format.md). `measured`: the figures on users the fit never
# saw. `bilinear`: float32 arrays, base64. Refit (and measure) from a release checkout:
#   memprobe offline-judge fit --release RELEASE_DIR --users 1-25
# Measure again, or rerun the variant search (docs/fidelity.md):
#   memprobe offline-judge measure --release RELEASE_DIR --users 26-50 --n 200
#   memprobe offline-judge variants --release RELEASE_DIR
"""


def params_yaml(params: Params) -> str:
    return HEADER + yaml.safe_dump(params.model_dump(), sort_keys=False, width=100)
