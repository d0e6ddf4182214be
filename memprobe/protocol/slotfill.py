"""Metric B, first half: reconstruct each hidden target from memory (slot-fill; rule
``slotfill``).

dump_all gives the slot-filler the whole serialized store; retrieve gives it the system's own
top-k items for a fixed user-agnostic query (rule ``probe``). The slot-filler never sees the
target or its explanation. dump_all is budget-aware: a store larger than the slot-fill context
is flagged (``overflow: flag``, the paper's dagger) or mapped over chunks that fit and reduced
(``overflow: chunked``); it is never silently scored as "unknown".
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pydantic import BaseModel, Field

from memprobe.llm.client import LLM
from memprobe.llm.salvage import Exhausted, last_lenient
from memprobe.spec.prompts import render
from memprobe.spec.records import (
    Bank,
    Metric,
    Retrieved,
    SlotFill,
    SlotFillEntry,
    StandIn,
)

log = logging.getLogger("memprobe")

UNKNOWN = "unknown"
PROMPT_OVERHEAD_TOKENS = 600  # the slot-fill template around the memory JSON
REPLY_TOKENS = 200


class SlotReply(BaseModel):
    label: str = Field(max_length=200)
    reason: str = Field(default="", max_length=500)


def slot_stand_in(spent: Exhausted) -> tuple[SlotReply, StandIn]:
    """The slot-fill answer when the re-asks ran out: the latest reply with over-long fields
    cut at a sentence end, else "unknown" with the reason (the protocol's answer for no
    usable evidence; the judge scores it 0). A cut label or a stand-in "unknown" may score
    other than a valid reply would have, so B is marked; a cut reason moves nothing."""
    fixed = last_lenient(spent.replies, SlotReply)
    if fixed is not None:
        value, cut = fixed
        touches: list[Metric] = ["B"] if "label" in cut else []
        return value, spent.stand_in("slotfill", f"cut {', '.join(cut)}", touches)
    reason = f"stand-in: no valid slot-fill reply ({spent.problem})"[:500]
    return SlotReply(label=UNKNOWN, reason=reason), spent.stand_in("slotfill", "unknown", ("B",))


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

    stand_ins: dict[str, list[StandIn]] = {}  # per dimension: map() runs them in threads

    def ask(category: str, dimension: str, memory_text: str, where: str) -> SlotReply:
        def stand_in(spent: Exhausted) -> SlotReply:
            reply, note = slot_stand_in(spent)
            stand_ins.setdefault(dimension, []).append(note)
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
            stand_in=stand_in,
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
        recoveries=[r for e in bank.entries for r in stand_ins.get(e.dimension, [])],
    )
