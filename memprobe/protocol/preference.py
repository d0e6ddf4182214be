"""Metric D: each reply judged against the user's assistance preferences (1-5 or na).

Runs over a finished transcript, as its own rule, so editing the preference prompt never
reruns a rollout. Like the release, the judge sees the original task and one reply.
"""

from __future__ import annotations

from types import GenericAlias
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, create_model

from memprobe.llm.client import LLM
from memprobe.llm.salvage import Exhausted, cut_at_sentence, objects
from memprobe.spec.prompts import render
from memprobe.spec.records import (
    Bank,
    Episodes,
    PrefEpisode,
    Preference,
    PrefScore,
    PrefTurn,
    StandIn,
)

MAX_REASON_CHARS = 300


class PrefItem(BaseModel):
    idx: int
    score: Literal[1, 2, 3, 4, 5, "na"]
    reason: str = Field(default="", max_length=MAX_REASON_CHARS)


class PrefReply(BaseModel):
    per_pref: list[PrefItem]


def reply_schema(n: int) -> type[PrefReply]:
    """The reply schema for n preferences: idx in 1..n and exactly n entries."""
    idx: Any = Literal[tuple(range(1, n + 1))]  # a type built at run time
    item = create_model("PrefItem", __base__=PrefItem, idx=(idx, ...))
    per_pref: Any = GenericAlias(list, item)
    return create_model(
        "PrefReply",
        __base__=PrefReply,
        per_pref=(per_pref, Field(min_length=n, max_length=n)),
    )


def preference_stand_in(spent: Exhausted, n: int) -> tuple[list[PrefItem], StandIn]:
    """One score per preference when the re-asks ran out: the latest reply's first valid item
    for each idx (its reason cut at a sentence end); a preference it did not score validly is
    "na", which leaves it out of the turn's score as the release's None did for the turn."""
    items: Any = next((o["per_pref"] for o in objects(spent.replies) if "per_pref" in o), [])
    found: dict[int, PrefItem] = {}
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        reason = item.get("reason", "")
        if isinstance(reason, str):
            item = {**item, "reason": cut_at_sentence(reason, MAX_REASON_CHARS)}
        try:
            valid = PrefItem.model_validate(item)
        except ValidationError:
            continue
        if 1 <= valid.idx <= n:
            found.setdefault(valid.idx, valid)
    missing = [i for i in range(1, n + 1) if i not in found]
    stand_in = "stand-in: no valid score in the judge's replies"
    scores = [found.get(i) or PrefItem(idx=i, score="na", reason=stand_in) for i in range(1, n + 1)]
    if missing:
        action = f"na for preference(s) {', '.join(map(str, missing))}"
    else:
        action = "the latest reply's first item per preference"
    return scores, spent.stand_in("preference", action, ("D",) if missing else ())


def turn_score(scores: list[PrefScore]) -> float | None:
    nums = [s.score for s in scores if s.score != "na"]
    return sum(nums) / len(nums) if nums else None


def pooled_d(episodes: list[PrefEpisode]) -> float | None:
    """Turn-weighted pooled mean of all non-None turn scores (docs/release-format.md §3.7)."""
    vals = [t.score for e in episodes for t in e.turns if t.score is not None]
    return sum(vals) / len(vals) if vals else None


def judge_preferences(episodes: Episodes, bank: Bank, llm: LLM, prompt: str) -> Preference:
    prefs = bank.by_category("assistance_preference")
    n = len(prefs)
    pref_text = "\n".join(
        f"{i}. [{p.dimension}] {p.short} — {p.explanation}" for i, p in enumerate(prefs, 1)
    )

    schema = reply_schema(n) if n else PrefReply

    def check(reply: PrefReply) -> None:
        got = sorted(item.idx for item in reply.per_pref)
        if got != list(range(1, n + 1)):
            raise ValueError(f"per_pref must have exactly one entry per idx 1..{n}, got {got}")

    def one(job: tuple[int, str, int, str]) -> tuple[PrefTurn, list[StandIn]]:
        ep_index, task, turn, reply_text = job
        if n == 0:
            return PrefTurn(turn=turn, score=None, per_pref=[]), []
        stand_ins: list[StandIn] = []

        def stand_in(spent: Exhausted) -> PrefReply:
            items, note = preference_stand_in(spent, n)
            stand_ins.append(note)
            return PrefReply(per_pref=items)

        reply = llm.json(
            render(prompt, prefs=pref_text, task=task, reply=reply_text),
            schema,
            check=check,
            where=f"user {episodes.user_id}, system {episodes.system}, "
            f"episode {ep_index}, turn {turn}",
            stand_in=stand_in,
        )
        scores = [
            PrefScore(idx=i.idx, score=i.score, reason=i.reason)
            for i in sorted(reply.per_pref, key=lambda x: x.idx)
        ]
        return PrefTurn(turn=turn, score=turn_score(scores), per_pref=scores), stand_ins

    jobs = [(e.index, e.task, t.turn, t.agent_response) for e in episodes.episodes for t in e.turns]
    done = llm.map(one, jobs)  # in job order, whatever order the calls finished in
    results = iter(turn for turn, _ in done)
    out = [
        PrefEpisode(index=e.index, turns=[next(results) for _ in e.turns])
        for e in episodes.episodes
    ]
    return Preference(
        user_id=episodes.user_id,
        system=episodes.system,
        D=pooled_d(out),
        episodes=out,
        recoveries=[r for _, stand_ins in done for r in stand_ins],
    )
