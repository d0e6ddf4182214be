"""Judge calibration: score known pairs with the run's judge before trusting its B.

An LLM judge is only as good as the model behind it: a small one can give 1.0 (or 0.0) to
everything and every B cell would still look like a finding. Each run asks its own judge (same
form, prompt file, schema and role settings as the ``judge`` rule) to score calibration pairs
and compares its scores with theirs: exact agreement, agreement within one level, mean
difference (bias) and quadratic-weighted kappa over the five levels. The pairs are the
hand-written anchors of ``config/judge_calibration.yaml`` (``judge.calibration.source:
anchors``) or, the yardstick, pairs the paper's judge scored in the authors' release
(``source: release``: a seeded draw, equal per recorded level, from ``judge.calibration.users``).
Below ``judge.min_kappa`` or above ``judge.max_bias`` the judge fails: every B cell is flagged
(``on_fail: warn``) or the run stops before any rollout (``stop``).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from memprobe.protocol.judge import Grader, JudgeItem
from memprobe.spec import records, sheets
from memprobe.spec.rubric import LEVELS, RUBRIC, Level
from memprobe.vocabulary import CATEGORIES, Category

# What a label can be; the degenerate ones are what a weak slot-filler writes.
Kind = Literal[
    "verbatim",
    "paraphrase",
    "close",
    "partial",
    "weak",
    "opposite",
    "unrelated",
    "unknown",
    "category_name",
    "dimension_name",
    "axis_question",
    "recorded",  # a pair the paper's judge scored (source: release)
]
KINDS: tuple[str, ...] = Kind.__args__  # type: ignore[attr-defined]


class CalibrationError(ValueError):
    """A bad anchors or calibration file, phrased as one line naming it."""


class Anchor(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    category: Category
    dimension: str
    explanation: str
    truth: str
    label: str
    kind: Kind
    score: Level
    tolerance: float = Field(default=0.0, ge=0.0, le=0.5)
    # source: release: where the paper's judge scored the pair.
    user: str = ""
    run: str = ""

    def item(self) -> JudgeItem:
        """The pair as a judge sees it."""
        return JudgeItem(
            category=self.category,
            dimension=self.dimension,
            explanation=self.explanation,
            truth=self.truth,
            label=self.label,
            where=f"calibration pair {self.id}",
        )

    def reference(self, judged: float) -> float:
        """The accepted level nearest to ``judged`` (``score`` when tolerance is 0)."""
        return min(max(judged, self.score - self.tolerance), self.score + self.tolerance)


class Anchors(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[Anchor] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> Anchors:
        ids = [a.id for a in self.items]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"duplicate id(s) {', '.join(dup)}")
        return self


def load_anchors(path: str | Path) -> Anchors:
    try:
        return records.load_yaml(path, Anchors, "anchors file")
    except records.RecordError as err:
        raise CalibrationError(str(err)) from None


class Reply(BaseModel):
    """One calibration pair as the judge scored it (``expected``: the anchor's level, or the
    paper's judge's recorded score)."""

    id: str
    user: str
    run: str
    category: str
    dimension: str
    kind: str
    truth: str
    label: str
    expected: float
    tolerance: float
    judged: float
    reference: float
    reason: str


def score_anchors(anchors: Anchors, grade: Grader) -> list[Reply]:
    """Grade every pair exactly as the judge rule grades a label (a stand-in reply, 0.0,
    counts against the judge; the grader lists it)."""
    replies = grade([a.item() for a in anchors.items])
    return [
        Reply(
            id=a.id,
            user=a.user,
            run=a.run,
            category=a.category,
            dimension=a.dimension,
            kind=a.kind,
            truth=a.truth,
            label=a.label,
            expected=a.score,
            tolerance=a.tolerance,
            judged=float(r.score),
            reference=a.reference(float(r.score)),
            reason=r.reason,
        )
        for a, r in zip(anchors.items, replies, strict=True)
    ]


class Summary(BaseModel):
    n: int
    exact: float = Field(description="share judged at an accepted level")
    within_one: float = Field(description="share within one rubric level of an accepted one")
    bias: float = Field(description="mean of judged - accepted level")
    kappa: float = Field(description="quadratic-weighted kappa over the five levels")
    # confusion[i][j]: anchors whose accepted level is LEVELS[i] that the judge gave LEVELS[j]
    confusion: list[list[int]]


def _index(level: float) -> int:
    return LEVELS.index(min(LEVELS, key=lambda v: abs(v - level)))


def quadratic_kappa(confusion: list[list[int]]) -> float:
    """Cohen's kappa with quadratic weights; 0 when either side never varies."""
    k = len(confusion)
    n = sum(map(sum, confusion))
    rows = [sum(r) for r in confusion]
    cols = [sum(confusion[i][j] for i in range(k)) for j in range(k)]
    observed = expected = 0.0
    for i in range(k):
        for j in range(k):
            w = (i - j) ** 2 / (k - 1) ** 2
            observed += w * confusion[i][j]
            expected += w * rows[i] * cols[j] / n
    return 0.0 if expected == 0 else 1.0 - observed / expected


def summarize(replies: list[Reply]) -> Summary:
    return agreement([r.reference for r in replies], [r.judged for r in replies])


def agreement(reference: list[float], judged: list[float]) -> Summary:
    """How ``judged`` agrees with ``reference``, pair by pair, on the rubric's levels."""
    n = len(reference)
    confusion = [[0] * len(LEVELS) for _ in LEVELS]
    for ref, got in zip(reference, judged, strict=True):
        confusion[_index(ref)][_index(got)] += 1
    diffs = [got - ref for ref, got in zip(reference, judged, strict=True)]
    return Summary(
        n=n,
        exact=sum(d == 0 for d in diffs) / n,
        within_one=sum(abs(d) <= RUBRIC.step for d in diffs) / n,
        bias=sum(diffs) / n,
        kappa=quadratic_kappa(confusion),
        confusion=confusion,
    )


def verdict(s: Summary, min_kappa: float, max_bias: float) -> str | None:
    """None when the judge passes; else the flag every B cell carries."""
    if s.kappa >= min_kappa and abs(s.bias) <= max_bias:
        return None
    return f"judge failed calibration: κ {s.kappa:.2f}, bias {s.bias:+.2f}"


STOP_REPLIES = "judge_calibration_stop.csv"  # in the run's logs folder


def stop_if_failed(cfg, pairs: Anchors, prompt: str, pool: str) -> None:
    """``judge.calibration.on_fail: stop``: grade the calibration pairs now (before any job);
    raise CalibrationError with the run's one line when the judge fails. Its replies go to
    STOP_REPLIES, never to the rule's outputs (a stale verdict there would outlive a fix)."""
    from memprobe.llm.client import LLMError, client_for
    from memprobe.protocol import judge_form

    def llm():
        return client_for(
            "judge",
            cfg,
            ledger_path=Path(cfg.run_dir) / "usage" / "judge_calibration" / "onstart.csv",
            job="judge_calibration/onstart",
        )

    try:  # a stand-in reply (0.0) counts against the judge; only the verdict is kept here
        replies = score_anchors(pairs, judge_form.grader(cfg, llm, prompt, pool, []))
    except (LLMError, records.RecordError) as err:
        raise CalibrationError(f"judge calibration: {err}") from None
    s = summarize(replies)
    note = verdict(s, cfg.judge.min_kappa, cfg.judge.max_bias)
    if note:
        from memprobe.spec.records import write_atomic

        stop_replies = Path(cfg.logs_dir) / STOP_REPLIES
        write_atomic(stop_replies, replies_csv(replies))
        raise CalibrationError(
            f"{note} on {s.n} pairs (replies: {stop_replies}); "
            "judge.calibration.on_fail is stop: no job started"
        )


def warn_at_end(path: str, settings) -> None:
    """The run's closing line when its judge failed (``settings``: the config's ``judge``)."""
    try:
        note = verdict(read_summary(path), settings.min_kappa, settings.max_bias)
    except CalibrationError:
        return  # no calibration in this run (a partial target)
    if note:
        print(f"memprobe: warning: {note} ({path}); every B cell is flagged", file=sys.stderr)


def closing_lines(degenerate: str, cross_check: str | None) -> list[str]:
    """The run's own last lines: the share of slot-fill labels that only name their slot, and
    (``judge.cross_check``) how many B cells the two judges disagree on. Files not written by
    this run (a partial target) give no line."""
    lines = []
    rows = _rows(degenerate)
    if rows:
        bad = sum(int(r["degenerate"]) for r in rows)
        total = sum(int(r["n_labels"]) for r in rows)
        share = f" ({bad / total:.0%})" if total else ""
        lines.append(
            f"memprobe: {bad} of {total} slot-fill labels{share} only name their slot "
            f"(category, dimension or question) instead of a value ({degenerate})"
        )
    checked = _rows(cross_check) if cross_check else []
    if checked:
        off = sum(r["flagged"] == "True" for r in checked)
        lines.append(
            f"memprobe: judge cross-check: the offline judge disagrees on {off} of "
            f"{len(checked)} B cells by more than the margin ({cross_check})"
        )
    return lines


def _rows(path: str) -> list[dict[str, str]]:
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))
    except FileNotFoundError:
        return []


# -- files ----------------------------------------------------------------------------------
def _level_name(v: float) -> str:
    return f"{v:g}"


CONFUSION_COLUMNS = [
    f"accepted_{_level_name(a)}_judged_{_level_name(j)}" for a in LEVELS for j in LEVELS
]
SUMMARY_COLUMNS = ["n", "exact", "within_one", "bias", "kappa", *CONFUSION_COLUMNS]
REPLY_COLUMNS = list(Reply.model_fields)


def summary_csv(s: Summary) -> str:
    row = {
        "n": s.n,
        "exact": round(s.exact, 4),
        "within_one": round(s.within_one, 4),
        "bias": round(s.bias, 4),
        "kappa": round(s.kappa, 4),
    }
    row |= dict(zip(CONFUSION_COLUMNS, (c for r in s.confusion for c in r), strict=True))
    return _csv([row], SUMMARY_COLUMNS)


def replies_csv(replies: list[Reply]) -> str:
    return _csv([r.model_dump() for r in replies], REPLY_COLUMNS)


def _csv(rows: list[dict], columns: list[str]) -> str:
    return sheets.csv_text(rows, columns)  # a judge's reason never reads as a formula


def read_summary(path: str | Path) -> Summary:
    """The summary a ``judge_calibration`` job wrote."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            row = next(csv.DictReader(fh))
        cells = [int(row[c]) for c in CONFUSION_COLUMNS]
        k = len(LEVELS)
        return Summary(
            n=int(row["n"]),
            exact=float(row["exact"]),
            within_one=float(row["within_one"]),
            bias=float(row["bias"]),
            kappa=float(row["kappa"]),
            confusion=[cells[i * k : (i + 1) * k] for i in range(k)],
        )
    except FileNotFoundError:
        raise CalibrationError(f"{path}: calibration file not found") from None
    except (StopIteration, KeyError, ValueError):
        raise CalibrationError(
            f"{path}: expected one row with columns {', '.join(SUMMARY_COLUMNS[:5])}, ..."
        ) from None


def coverage_gaps(anchors: Anchors) -> list[str]:
    """Categories, rubric levels and label kinds that no anchor covers."""
    have_cats = {a.category for a in anchors.items}
    have_levels = {a.score for a in anchors.items}
    have_kinds = {a.kind for a in anchors.items}
    return (
        [f"category {c}" for c in CATEGORIES if c not in have_cats]
        + [f"level {v:g}" for v in LEVELS if v not in have_levels]
        + [f"kind {k}" for k in KINDS if k not in have_kinds and k != "recorded"]
    )
