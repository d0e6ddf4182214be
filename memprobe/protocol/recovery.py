"""Metric B: reconstruct each hidden target from memory (slot-fill), then grade it (judge).

dump_all gives the slot-filler the whole serialized store; retrieve gives it the system's own
top-k items for a fixed user-agnostic query. The slot-filler never sees the target or its
explanation; the judge sees both. dump_all is budget-aware: a store larger than the slot-fill
context is flagged (``overflow: flag``, the paper's dagger) or mapped over chunks that fit and
reduced (``overflow: chunked``); it is never silently scored as "unknown".
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from pydantic import BaseModel, Field

from memprobe.llm.client import LLM, Exhausted
from memprobe.llm.salvage import last_lenient
from memprobe.spec.prompts import render
from memprobe.spec.records import (
    Bank,
    Judge,
    JudgeEntry,
    Metric,
    Recovery,
    Retrieved,
    RetrievedQuery,
    SlotFill,
    SlotFillEntry,
)
from memprobe.spec.rubric import RUBRIC, Level
from memprobe.spec.taxonomy import retrieve_query
from memprobe.vocabulary import CATEGORIES

log = logging.getLogger("memprobe")

UNKNOWN = "unknown"
PROMPT_OVERHEAD_TOKENS = 600  # the slot-fill template around the memory JSON
REPLY_TOKENS = 200


class SlotReply(BaseModel):
    label: str = Field(max_length=200)
    reason: str = Field(default="", max_length=500)


class JudgeReply(BaseModel):
    # The reason first, and required: a grammar-constrained local model writes the fields in
    # schema order, so it compares the values before it commits to a score (issue 18).
    reason: str = Field(max_length=500)
    score: Level


def slot_stand_in(spent: Exhausted) -> tuple[SlotReply, Recovery]:
    """The slot-fill answer when the re-asks ran out: the latest reply with over-long fields
    cut at a sentence end, else "unknown" with the reason (the protocol's answer for no
    usable evidence; the judge scores it 0). A cut label or a stand-in "unknown" may score
    other than a valid reply would have, so B is marked; a cut reason moves nothing."""
    fixed = last_lenient(spent.replies, SlotReply)
    if fixed is not None:
        value, cut = fixed
        touches: list[Metric] = ["B"] if "label" in cut else []
        return value, spent.recovery("slotfill", f"cut {', '.join(cut)}", touches)
    reason = f"stand-in: no valid slot-fill reply ({spent.problem})"[:500]
    return SlotReply(label=UNKNOWN, reason=reason), spent.recovery("slotfill", "unknown", ("B",))


def judge_stand_in(spent: Exhausted) -> tuple[JudgeReply, Recovery]:
    """The judge's verdict when the re-asks ran out: the latest reply with its reason cut at a
    sentence end (its score stands), else 0.0, the rubric's score for a label it could not
    credit (the release's parse-failure score), marked as touching B."""
    fixed = last_lenient(spent.replies, JudgeReply)
    if fixed is not None:
        value, cut = fixed
        return value, spent.recovery("judge", f"cut {', '.join(cut)}")
    reason = f"stand-in: no valid judge reply ({spent.problem})"[:500]
    return JudgeReply(reason=reason, score=0.0), spent.recovery("judge", "score 0.0", ("B",))


def serialize(items: list[dict[str, Any]]) -> str:
    return json.dumps(items, ensure_ascii=False, indent=2)


def count_tokens(text: str) -> int:
    """A conservative token estimate (~4 chars per token for English JSON)."""
    return (len(text) + 3) // 4


def is_unknown(label: str) -> bool:
    return label.strip().strip(".").lower() in ("", UNKNOWN)


def memory_budget(context_tokens: int) -> int:
    """Tokens left for the memory JSON once the slot-fill template and the reply are counted."""
    return context_tokens - PROMPT_OVERHEAD_TOKENS - REPLY_TOKENS


def store_overflows(memories: list[dict[str, Any]], context_tokens: int) -> tuple[bool, int]:
    """Whether the serialized store exceeds the slot-fill context, and its token estimate."""
    tokens = count_tokens(serialize(memories))
    return tokens > memory_budget(context_tokens), tokens


# -- probe (retrieve mode input) ---------------------------------------------------------
def probe(system, bank: Bank, guides: dict[str, str], k: int, user_id: str) -> Retrieved:
    queries = []
    for e in bank.entries:
        q = retrieve_query(e.dimension, e.category, guides)
        queries.append(
            RetrievedQuery(
                category=e.category, dimension=e.dimension, query=q, items=system.search(q, k)
            )
        )
    return Retrieved(user_id=user_id, system=system.name, k=k, queries=queries)


# -- slot-fill ---------------------------------------------------------------------------
def split_item(item: dict[str, Any], budget_tokens: int) -> list[dict[str, Any]]:
    """One item whose own serialization is over the budget, as consecutive parts that each fit:
    its JSON text cut into pieces, so no word of it is dropped (a truncation would be)."""
    text = json.dumps(item, ensure_ascii=False)
    parts: list[dict[str, Any]] = []
    start = 0
    while start < len(text):
        size = len(text) - start
        # Shrink until the part fits: escaping makes a piece's serialized length vary.
        while (
            size > 1
            and count_tokens(serialize([_part(len(parts), text[start : start + size])]))
            > budget_tokens
        ):
            size = size * 3 // 4
        parts.append(_part(len(parts), text[start : start + size]))
        start += size
    return parts


def _part(i: int, text: str) -> dict[str, Any]:
    return {"split_item_part": i + 1, "text": text}


def chunk_items(items: list[dict[str, Any]], budget_tokens: int) -> list[list[dict[str, Any]]]:
    """Split the store into consecutive chunks whose serialization fits the budget; an item
    over the budget on its own is split into parts first (``split_item``)."""
    chunks: list[list[dict[str, Any]]] = []
    cur: list[dict[str, Any]] = []
    fitted: list[dict[str, Any]] = []
    for item in items:
        over = count_tokens(serialize([item])) > budget_tokens
        fitted.extend(split_item(item, budget_tokens) if over else [item])
    for item in fitted:
        if cur and count_tokens(serialize([*cur, item])) > budget_tokens:
            chunks.append(cur)
            cur = []
        cur.append(item)
    if cur:
        chunks.append(cur)
    return chunks


def slotfill_user(
    *,
    user_id: str,
    system: str,
    mode: str,
    bank: Bank,
    guides: dict[str, str],
    llm: LLM,
    prompt: str,
    memories: list[dict[str, Any]] | None = None,
    retrieved: Retrieved | None = None,
    context_tokens: int = 128_000,
    overflow: str = "flag",
) -> SlotFill:
    budget = memory_budget(context_tokens)
    by_dim = {q.dimension: q.items for q in retrieved.queries} if retrieved else {}
    store_text = serialize(memories or [])
    tokens = count_tokens(store_text) if mode == "dump_all" else 0
    over = mode == "dump_all" and tokens > budget

    recovered: dict[str, list[Recovery]] = {}  # per dimension: map() runs them in threads

    def ask(category: str, dimension: str, memory_text: str, where: str) -> SlotReply:
        def stand_in(spent: Exhausted) -> SlotReply:
            reply, recovery = slot_stand_in(spent)
            recovered.setdefault(dimension, []).append(recovery)
            return reply

        return llm.json(
            render(
                prompt,
                memory=memory_text,
                category=category,
                guide=guides[category],
                dimension=dimension,
            ),
            SlotReply,
            where=where,
            recover=stand_in,
        )

    def one(e) -> SlotFillEntry:
        where = f"user {user_id}, system {system}, {mode}, {e.dimension}"
        items = memories if mode == "dump_all" else by_dim.get(e.dimension, [])
        if not items:
            # Nothing to read: the protocol's answer is "unknown", no call needed.
            return SlotFillEntry(
                category=e.category,
                dimension=e.dimension,
                label=UNKNOWN,
                reason="empty memory",
                called=False,
            )
        if not over:
            text = store_text if mode == "dump_all" else serialize(items)
            r = ask(e.category, e.dimension, text, where)
            label = UNKNOWN if is_unknown(r.label) else r.label.strip()
            return SlotFillEntry(
                category=e.category, dimension=e.dimension, label=label, reason=r.reason
            )
        if overflow == "flag":
            return SlotFillEntry(
                category=e.category,
                dimension=e.dimension,
                label=UNKNOWN,
                reason=f"overflow: store is ~{tokens} tokens, context {context_tokens}",
                called=False,
            )
        return chunked(e, items, where)

    def chunked(e, items, where) -> SlotFillEntry:
        found: list[dict[str, Any]] = []
        for i, part in enumerate(chunk_items(items, budget)):
            r = ask(e.category, e.dimension, serialize(part), f"{where}, chunk {i + 1}")
            if not is_unknown(r.label):
                found.append({"label": r.label.strip(), "reason": r.reason})
        if not found:
            return SlotFillEntry(
                category=e.category,
                dimension=e.dimension,
                label=UNKNOWN,
                reason="no chunk held evidence",
            )
        if len(found) == 1:
            return SlotFillEntry(category=e.category, dimension=e.dimension, **found[0])
        # Reduce: slot-fill once more over the per-chunk answers.
        r = ask(e.category, e.dimension, serialize(found), f"{where}, reduce")
        label = UNKNOWN if is_unknown(r.label) else r.label.strip()
        return SlotFillEntry(
            category=e.category, dimension=e.dimension, label=label, reason=r.reason
        )

    entries = llm.map(one, bank.entries)
    if over:
        log.warning(
            "slotfill %s %s: store ~%d tokens exceeds the %d-token context (%s)",
            system,
            user_id,
            tokens,
            context_tokens,
            overflow,
        )
    return SlotFill(
        user_id=user_id,
        system=system,
        mode=mode,
        overflow=over,
        overflow_strategy=overflow if over else None,  # type: ignore[arg-type]
        memory_tokens=tokens,
        entries=entries,
        recoveries=[r for e in bank.entries for r in recovered.get(e.dimension, [])],
    )


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
    recoveries: list[Recovery],
) -> JudgeReply:
    """One judge call: the judge rule and the calibration ask exactly this way (a reply whose
    re-asks ran out is recovered by ``judge_stand_in`` and listed in ``recoveries``)."""

    def stand_in(spent: Exhausted) -> JudgeReply:
        reply, recovery = judge_stand_in(spent)
        recoveries.append(recovery)
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
    return llm.json(messages, JudgeReply, where=where, recover=stand_in)


def llm_grader(llm: LLM, prompt: str, recoveries: list[Recovery] | None = None) -> Grader:
    """The LLM judge: one call per label (``llm.map`` runs them concurrently). A reply whose
    re-asks ran out is recovered as ``ask_judge`` recovers it and listed in ``recoveries`` (when
    given), in the order of the items."""

    def grade(items: Sequence[JudgeItem]) -> list[JudgeReply]:
        recovered: list[list[Recovery]] = [[] for _ in items]  # per item: map() uses threads

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
                recoveries=recovered[i],
            )

        replies = llm.map(one, range(len(items)))
        if recoveries is not None:
            recoveries.extend(r for each in recovered for r in each)
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


def pool_axes(pool) -> dict[str, str]:
    """Dimension name -> axis question, for every dimension of a taxonomy.Pool."""
    return {d.name: d.axis for c in pool.categories.values() for d in c.dimensions}


def judge_user(
    slotfill: SlotFill,
    bank: Bank,
    grade: Grader,
    judge_unknown: bool = False,
    degenerate_axes: dict[str, str] | None = None,
    second_opinion: Grader | None = None,
    recoveries: list[Recovery] | None = None,
) -> Judge:
    """Score every slot-fill label with ``grade``. With ``degenerate_axes`` (dimension -> axis
    question; the ``judge.degenerate_as_unknown`` option) a degenerate label is scored as
    "unknown". ``second_opinion`` (``judge.cross_check``) also grades every label, each entry
    keeping its score beside the judge's. ``recoveries``: the list ``grade`` records its
    recovered replies in (``llm_grader``), kept in the record."""
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
    return judge_record(slotfill, details, recoveries)


def judge_record(
    slotfill: SlotFill, details: list[JudgeEntry], recoveries: list[Recovery] | None = None
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
        recoveries=recoveries or [],
    )
