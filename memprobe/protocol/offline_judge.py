"""The offline judge: a scorer fitted on the paper's judge, for runs without a strong LLM.

It grades a (truth, label) pair from thirteen cheap features: cosines between
all-MiniLM-L6-v2 vectors of the label and of the truth, the bank explanation, both together
and the dimension's name; content-word overlaps; a length ratio; a negation mismatch. A linear
score over them (plus one offset per category) is cut into the rubric's five levels at four
thresholds. The figures live in ``config/offline_judge.yaml``; ``memprobe offline-judge fit``
refits them by least squares on the release's recorded verdicts (users 1-25, the target being
the recorded score) and puts the cuts where the fitted users' recorded levels have the same
shares, so the scorer's levels are spread as the paper's judge spread them.
``memprobe offline-judge measure`` scores held-out users (26-50) against the recorded
verdicts. Judge time is numpy only, milliseconds per pair once the texts are encoded.

A label that only names its slot (a category, the dimension, the axis question, see
``judge.degenerate_kind``) and "unknown" score 0 before any feature is computed: the
release's labels never do that, so no fit could learn it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from memprobe.protocol.judge import Grader, JudgeItem, JudgeReply, degenerate_kind
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
)

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


def _content(text: str) -> set[str]:
    return {_stem(w) for w in _words(text) if w not in _STOP and len(w) > 2}


def _share(part: set[str], whole: set[str]) -> float:
    return len(part & whole) / len(part) if part else 0.0


def _dimension_text(dimension: str) -> str:
    return dimension.replace("_", " ")


def _context(truth: str, explanation: str) -> str:
    return f"{truth}. {explanation}"


def features(items: Sequence[JudgeItem], encode: Encode) -> np.ndarray:
    """One row of :data:`FEATURES` per pair; every distinct text is encoded once."""
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
            ]
        )
    return np.asarray(rows, dtype=np.float64).reshape(len(items), len(FEATURES))


class Params(BaseModel):
    """The fitted figures (config/offline_judge.yaml)."""

    model_config = ConfigDict(extra="forbid")

    version: str
    weights: dict[str, float]  # one per feature, in FEATURES order
    category_offsets: dict[Category, float]
    cuts: list[float] = Field(min_length=len(LEVELS) - 1, max_length=len(LEVELS) - 1)
    fitted_on: str  # what the figures were fitted on, in words

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

    def latent(self, x: np.ndarray, categories: Sequence[str]) -> np.ndarray:
        w = np.array(list(self.weights.values()))
        return x @ w + np.array([self.category_offsets[c] for c in categories])  # type: ignore[index]

    def levels(self, x: np.ndarray, categories: Sequence[str]) -> np.ndarray:
        i = np.searchsorted(np.array(self.cuts), self.latent(x, categories), side="right")
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
    x = features(scored, encode)
    levels = iter(params.levels(x, [it.category for it in scored]).tolist())
    rows = iter(x.tolist())
    out = []
    for i in range(len(items)):
        if i in empty:
            out.append(JudgeReply(reason=f"offline judge: {empty[i]}", score=RUBRIC.unknown_score))
            continue
        level, row = next(levels), dict(zip(FEATURES, next(rows), strict=True))
        out.append(
            JudgeReply(
                reason=f"offline judge: cosine to the truth {row['cos_label_truth']:.2f}, "
                f"to truth and explanation {row['cos_label_context']:.2f}, "
                f"word overlap {row['word_jaccard']:.2f} -> {names[level]}",
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
def fit(
    items: Sequence[JudgeItem], scores: Sequence[float], encode: Encode, fitted_on: str
) -> Params:
    """Least squares of the recorded score on the features and a per-category offset; cuts at
    the recorded levels' cumulative shares of the fitted latent score. Deterministic."""
    x = features(items, encode)
    cats = [it.category for it in items]
    onehot = np.array([[c == k for k in CATEGORIES] for c in cats], dtype=np.float64)
    y = np.asarray(scores, dtype=np.float64)
    coef = np.linalg.lstsq(np.hstack([x, onehot]), y, rcond=None)[0]
    weights = dict(zip(FEATURES, (round(float(v), 6) for v in coef[: len(FEATURES)]), strict=True))
    offsets = {
        c: round(float(v), 6) for c, v in zip(CATEGORIES, coef[len(FEATURES) :], strict=True)
    }
    params = Params(
        version="1",
        weights=weights,
        category_offsets=offsets,  # type: ignore[arg-type]
        cuts=[0.0] * (len(LEVELS) - 1),
        fitted_on=fitted_on,
    )
    latent = params.latent(x, cats)
    shares = np.cumsum([np.mean(y == v) for v in LEVELS[:-1]])
    params.cuts = [round(float(c), 6) for c in np.quantile(latent, shares)]
    return params


HEADER = """\
# The offline judge's figures (memprobe/protocol/offline_judge.py), fitted on the recorded
# verdicts of the paper's judge in the authors' MemProbe release (CC BY 4.0; credit: the
# MemProbe authors, docs/release-format.md). Refit from a release checkout:
#   memprobe offline-judge fit --release RELEASE_DIR --users 1-25
# Measure on users it never saw:
#   memprobe offline-judge measure --release RELEASE_DIR --users 26-50 --n 200
"""


def params_yaml(params: Params) -> str:
    return HEADER + yaml.safe_dump(params.model_dump(), sort_keys=False)
