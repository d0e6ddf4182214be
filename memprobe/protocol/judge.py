"""Metric B, second half: grade each slot-fill label against its target (rule ``judge``).

The judge sees the target and its explanation; a grader is the judge role's model
(``llm_grader``) or the offline judge (memprobe/protocol/offline_judge.py), which the run's
``judge.form`` picks (memprobe/protocol/judge_form.py). A label that only names its slot can be
scored as "unknown" (``judge.degenerate_as_unknown``); the record keeps the category means.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

from pydantic import BaseModel, Field

from memprobe.llm.client import LLM
from memprobe.llm.salvage import Exhausted, last_lenient
from memprobe.protocol.slotfill import is_unknown
from memprobe.spec.prompts import render
from memprobe.spec.records import (
    Bank,
    Judge,
    JudgeEntry,
    SlotFill,
    SlotFillEntry,
    StandIn,
)
from memprobe.spec.rubric import RUBRIC, Level
from memprobe.vocabulary import CATEGORIES

log = logging.getLogger("memprobe")


class JudgeReply(BaseModel):
    # The reason first, and required: a grammar-constrained local model writes the fields in
    # schema order, so it compares the values before it commits to a score (issue 18).
    reason: str = Field(max_length=500)
    score: Level


def judge_stand_in(spent: Exhausted) -> tuple[JudgeReply, StandIn]:
    """The judge's verdict when the re-asks ran out: the latest reply with its reason cut at a
    sentence end (its score stands), else 0.0, the rubric's score for a label it could not
    credit (the release's parse-failure score), marked as touching B."""
    fixed = last_lenient(spent.replies, JudgeReply)
    if fixed is not None:
        value, cut = fixed
        return value, spent.stand_in("judge", f"cut {', '.join(cut)}")
    reason = f"stand-in: no valid judge reply ({spent.problem})"[:500]
    return JudgeReply(reason=reason, score=0.0), spent.stand_in("judge", "score 0.0", ("B",))


# -- judge -------------------------------------------------------------------------------
def category_means(details: list[JudgeEntry]) -> tuple[dict[str, float | None], float]:
    """Per-category mean scores and the category-balanced overall (mean of present cats)."""
    per: dict[str, float | None] = {}
    for c in CATEGORIES:
        scores = [d.score for d in details if d.category == c]
        per[c] = sum(scores) / len(scores) if scores else None
    present = [v for v in per.values() if v is not None]
    return per, (sum(present) / len(present) if present else 0.0)


class JudgeItem(NamedTuple):
    """One label to grade, with what every judge form sees."""

    category: str
    dimension: str
    explanation: str
    truth: str
    label: str
    where: str = ""  # for error messages: user, system, mode, dimension


# A judge form: grades a batch of labels (the LLM asks one call per label, the offline
# scorer encodes the batch at once). The judge rule and the calibration use the same one.
Grader = Callable[[Sequence[JudgeItem]], list[JudgeReply]]


def ask_judge(
    llm: LLM,
    prompt: str,
    *,
    dimension: str,
    explanation: str,
    truth: str,
    label: str,
    where: str,
    stand_ins: list[StandIn],
) -> JudgeReply:
    """One judge call: the judge rule and the calibration ask exactly this way (a reply whose
    re-asks ran out gets ``judge_stand_in``'s stand-in, listed in ``stand_ins``)."""

    def stand_in(spent: Exhausted) -> JudgeReply:
        reply, note = judge_stand_in(spent)
        stand_ins.append(note)
        return reply

    messages = render(
        prompt,
        scale=RUBRIC.scale_text(),
        levels=RUBRIC.levels_text(),
        dimension=dimension,
        explanation=explanation,
        truth=truth,
        label=label,
    )
    return llm.json(messages, JudgeReply, where=where, stand_in=stand_in)


def llm_grader(llm: LLM, prompt: str, stand_ins: list[StandIn] | None = None) -> Grader:
    """The LLM judge: one call per label (``llm.map`` runs them concurrently). A reply whose
    re-asks ran out gets ``ask_judge``'s stand-in, listed in ``stand_ins`` (when
    given), in the order of the items."""

    def grade(items: Sequence[JudgeItem]) -> list[JudgeReply]:
        per_item: list[list[StandIn]] = [[] for _ in items]  # per item: map() uses threads

        def one(i: int) -> JudgeReply:
            it = items[i]
            return ask_judge(
                llm,
                prompt,
                dimension=it.dimension,
                explanation=it.explanation,
                truth=it.truth,
                label=it.label,
                where=it.where,
                stand_ins=per_item[i],
            )

        replies = llm.map(one, range(len(items)))
        if stand_ins is not None:
            stand_ins.extend(r for each in per_item for r in each)
        return replies

    return grade


# -- degenerate labels -------------------------------------------------------------------
def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


_CATEGORY_NAMES = {_norm(c) for c in CATEGORIES} | {_norm(c.split("_")[0]) for c in CATEGORIES}


def degenerate_kind(label: str, dimension: str, axis: str | None) -> str | None:
    """What a slot-fill label is when it names the slot instead of filling it, else None.

    ``empty``, ``category_name`` (any category, e.g. "Episodic Memory"), ``dimension_name``
    (its own dimension, underscores or not), ``axis_question`` (the pool's question for it).
    "unknown" is not degenerate: it is the protocol's answer for no evidence.
    """
    n = _norm(label)
    if not n:
        return "empty"
    if n in _CATEGORY_NAMES:
        return "category_name"
    if n == _norm(dimension):
        return "dimension_name"
    if axis and n == _norm(axis):
        return "axis_question"
    return None


def judge_user(
    slotfill: SlotFill,
    bank: Bank,
    grade: Grader,
    judge_unknown: bool = False,
    degenerate_axes: dict[str, str] | None = None,
    second_opinion: Grader | None = None,
    stand_ins: list[StandIn] | None = None,
) -> Judge:
    """Score every slot-fill label with ``grade``. With ``degenerate_axes`` (dimension -> axis
    question; the ``judge.degenerate_as_unknown`` option) a degenerate label is scored as
    "unknown". ``second_opinion`` (``judge.cross_check``) also grades every label, each entry
    keeping its score beside the judge's. ``stand_ins``: the list ``grade`` records its
    stand-ins in (``llm_grader``), kept in the record."""
    truth = {e.dimension: e for e in bank.entries}

    def item(s: SlotFillEntry) -> JudgeItem:
        e = truth[s.dimension]
        return JudgeItem(
            category=e.category,
            dimension=e.dimension,
            explanation=e.explanation,
            truth=e.short,
            label=s.label,
            where=f"user {slotfill.user_id}, system {slotfill.system}, {slotfill.mode}, "
            f"{e.dimension}",
        )

    def without_call(s: SlotFillEntry) -> tuple[float, str] | None:
        kind = (
            degenerate_kind(s.label, s.dimension, degenerate_axes.get(s.dimension))
            if degenerate_axes is not None
            else None
        )
        if kind:
            return RUBRIC.unknown_score, f"label is a {kind}: scored as 'unknown' (no call)"
        if is_unknown(s.label) and not judge_unknown:
            score = RUBRIC.unknown_score
            return score, f"label is 'unknown': {score:g} by the rubric (no call)"
        return None

    fixed = [without_call(s) for s in slotfill.entries]
    asked = iter(grade([item(s) for s, f in zip(slotfill.entries, fixed, strict=True) if not f]))
    verdicts = [f or (float((r := next(asked)).score), r.reason) for f in fixed]
    seconds = (
        [float(r.score) for r in second_opinion([item(s) for s in slotfill.entries])]
        if second_opinion
        else [None] * len(verdicts)
    )
    details = [
        JudgeEntry(
            category=truth[s.dimension].category,
            dimension=s.dimension,
            explanation=truth[s.dimension].explanation,
            ground_truth=truth[s.dimension].short,
            predicted=s.label,
            slot_fill_reason=s.reason,
            score=score,
            judge_reason=reason,
            scoring_mode=slotfill.mode,
            second_opinion=second,
        )
        for s, (score, reason), second in zip(slotfill.entries, verdicts, seconds, strict=True)
    ]
    return judge_record(slotfill, details, stand_ins)


def judge_record(
    slotfill: SlotFill, details: list[JudgeEntry], stand_ins: list[StandIn] | None = None
) -> Judge:
    """The judge record of a slot-fill: its scored entries and their category means."""
    per, overall = category_means(details)
    return Judge(
        user_id=slotfill.user_id,
        system=slotfill.system,
        mode=slotfill.mode,
        overflow=slotfill.overflow,
        overflow_strategy=slotfill.overflow_strategy,
        per_category=per,
        overall=overall,
        details=details,
        recoveries=stand_ins or [],
    )
