"""Read the authors' release and turn its records into our artifact files.

The release layout and formats are described in docs/release-format.md §2:

    <release_dir>/Deeppersona/data/user_memory_banks_pooled_final.json   banks + base profiles
    <release_dir>/benchmark_data/CustomTasksPooledFinal/user_XXX.json     tasks, bank order
    <release_dir>/history/<run>/user_XXX/episode_<i>.json                 transcripts (i = 1..T)
    <release_dir>/pref_judge/<run>/user_XXX/episode_<i>.json              per-pref scores (optional)
    <release_dir>/memory/<run>/user_XXX/memories.json                     get_all_memories() dump
    <release_dir>/output/<run>[_retrieve]/recon_judge/user_XXX.json       slot-fill + judge
    <release_dir>/output/<run>[_retrieve]/attribution/user_XXX.json       Stage 0/1/2 labels
    <release_dir>/output/<run>[_retrieve]/<agent>_<ts>_merged.json        aggregate reports
    <release_dir>/output/_task_design_oracle/user_XXX.json                Stage 0 cache

Where each record is: ``layout``; its format as we read it: ``formats`` (a small pydantic
model per file: one line naming the file and the key where it lacks what we read).
"""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from memprobe.protocol.judge import judge_record
from memprobe.protocol.slotfill import store_overflows
from memprobe.release.formats import (
    RawAttribution,
    RawBankFile,
    RawEpisode,
    RawMemories,
    RawPrefJudge,
    RawReconJudge,
    RawTaskFile,
    RawUser,
)
from memprobe.release.layout import Layout
from memprobe.spec.records import (
    Attribution,
    AttributionEntry,
    Bank,
    BankEntry,
    Episode,
    Episodes,
    JudgeEntry,
    Location,
    Memories,
    Oracle,
    OracleVerdict,
    Persona,
    PrefEpisode,
    Preference,
    PrefScore,
    PrefTurn,
    RecordError,
    Retrieved,
    RetrievedQuery,
    SlotFill,
    SlotFillEntry,
    Task,
    Tasks,
    first_error,
)
from memprobe.spec.records import Judge as JudgeRecord
from memprobe.spec.records import load as load_record
from memprobe.spec.taxonomy import retrieve_query
from memprobe.vocabulary import CATEGORIES


# -- users -------------------------------------------------------------------------------
@cache
def _bank_file(path: str) -> dict[str, RawUser]:
    parsed: RawBankFile = load_record(path, RawBankFile)
    return {u.user_id: u for u in parsed.users}


def raw_user(lay: Layout, user: str) -> RawUser:
    path = lay.bank_file
    users = _bank_file(str(lay.inside(path)))
    if user not in users:
        raise RecordError(f"{path}: users: no user_id {user!r} ({len(users)} users)")
    return users[user]


def bank(lay: Layout, user: str, counts: dict[str, int] | None = None) -> Bank:
    """The user's bank in the release's order (memory_bank key order = CATEGORIES)."""
    path = lay.bank_file
    raw = raw_user(lay, user)
    unknown = [c for c in raw.memory_bank if c not in CATEGORIES]
    if unknown:
        raise RecordError(f"{path}: {user}.memory_bank: unknown category {unknown[0]!r}")
    entries = [
        BankEntry(category=c, dimension=e.dimension, short=e.short, explanation=e.explanation)
        for c in CATEGORIES
        for e in raw.memory_bank.get(c, [])
    ]
    for c in CATEGORIES:
        n = len(raw.memory_bank.get(c, []))
        if counts is not None and n != counts[c]:
            raise RecordError(
                f"{path}: {user}.memory_bank.{c}: {n} entries, dims_per_category expects "
                f"{counts[c]}"
            )
    names = [e.dimension for e in entries]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise RecordError(f"{path}: {user}.memory_bank: dimension {dup!r} appears twice")
    return Bank(user_id=user, entries=entries)


def _stories(text: str) -> list[str]:
    parts = [p.strip() for p in re.split(r"\s*Story \d+:\s*", text) if p.strip()]
    return parts or ([text.strip()] if text.strip() else [])


def persona(lay: Layout, user: str) -> Persona:
    """The release's base_profile as our Persona (the release has no name and no seed)."""
    path = lay.bank_file
    p = raw_user(lay, user).base_profile
    try:
        attitude = p.get("life_attitude") or {}
        story = (p.get("personal_story") or {}).get("personal_story", "")
        return Persona(
            user_id=user,
            seed=0,
            name="",
            age=int(p["age_info"]["age"]),
            age_group=str(p["age_info"]["age_group"]),
            gender=str(p["gender"]),
            location=Location(**p["location"]),
            occupation=str((p.get("career_info") or {}).get("status", "")),
            values_orientation=str((p.get("personal_values") or {}).get("values_orientation", "")),
            attitude=" ".join(
                str(attitude[k])
                for k in ("attitude", "attitude_details", "coping_mechanism")
                if attitude.get(k)
            ),
            stories=_stories(story) if isinstance(story, str) else [str(s) for s in story],
            interests=list((p.get("interests") or {}).get("interests", [])),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise RecordError(f"{path}: {user}.base_profile: missing or bad {err}") from None


def tasks(lay: Layout, user: str, bank_: Bank) -> Tasks:
    path = lay.task_file(user)
    raw: RawTaskFile = lay.load(path, RawTaskFile)
    if raw.user_id != user:
        raise RecordError(f"{path}: user_id is {raw.user_id!r}, expected {user!r}")
    result = Tasks(
        user_id=user,
        tasks=[
            Task(
                index=i,
                task=t.task,
                rationale=t.rationale,
                target_category=t.target_category,
                target_dimension=t.target_dimension,
                target_short=t.target_short,
                revisions=["edited_after_fishing_flag"] if t.pipeline_note else [],
                status="imported",
            )
            for i, t in enumerate(raw.tasks, 1)
        ],
    )
    result.check_follows(bank_, str(path))
    return result


# -- runs --------------------------------------------------------------------------------
def episode(lay: Layout, path: Path, task: Task) -> Episode:
    """One recorded episode (docs/release-format.md §2.5) as our Episode."""
    raw: RawEpisode = lay.load(path, RawEpisode)
    try:  # validated as one record, so an error names its turn (turns.<i>.feedback_type)
        return Episode.model_validate(
            {
                "index": task.index,
                "task": raw.task,
                "target_dimension": task.target_dimension,
                "end_reason": raw.end_reason,
                "turns": [
                    {
                        "turn": r.turn,
                        "agent_response": r.agent_response,
                        "feedback_type": r.user_simulator.feedback_type,
                        "user_text": r.user_simulator.text,
                    }
                    for r in raw.turns
                ],
            }
        )
    except ValidationError as err:
        raise RecordError(f"{path}: {first_error(err)}") from None


def episodes(lay: Layout, system: str, user: str, tasks_: Tasks) -> Episodes:
    eps = [episode(lay, lay.history(system, user, t.index), t) for t in tasks_.tasks]
    return Episodes(user_id=user, system=system, episodes=eps)


def replayable(lay: Layout, path: Path, task: Task) -> Episode:
    """A recorded episode that a replay can drive a memory system through: the task it was
    run on is ours, and its turns are a whole conversation (numbered 1..n, at least one, the
    end reason the last feedback's). One line naming the file otherwise."""
    ep = episode(lay, path, task)
    if ep.task != task.task:
        raise RecordError(
            f"{path}: task: not the task file's task {task.index} ({ep.task[:60]!r} vs "
            f"{task.task[:60]!r})"
        )
    numbers = [t.turn for t in ep.turns]
    if numbers != list(range(1, len(numbers) + 1)):
        raise RecordError(f"{path}: turns: numbered {numbers}, expected 1..{len(numbers)}")
    satisfied = ep.turns[-1].feedback_type == "satisfied" if ep.turns else False
    if not ep.turns or satisfied != (ep.end_reason == "satisfied"):
        last = ep.turns[-1].feedback_type if ep.turns else "no turn"
        raise RecordError(f"{path}: end_reason: {ep.end_reason!r} after {last!r}")
    return ep


def preference(lay: Layout, system: str, user: str, tasks_: Tasks) -> Preference:
    """D from the transcripts' per-turn scores; per-pref detail from pref_judge when present."""
    out = []
    for t in tasks_.tasks:
        raw: RawEpisode = lay.load(lay.history(system, user, t.index), RawEpisode)
        judged = lay.pref_judge(system, user, t.index)
        per_pref: dict[int, list[PrefScore]] = {}
        if judged.is_file():
            pj: RawPrefJudge = lay.load(judged, RawPrefJudge)
            for pt in pj.turns:
                per_pref[pt.turn] = [
                    PrefScore(idx=p.idx, score=p.score, reason=p.reason)  # type: ignore[arg-type]
                    for p in pt.per_pref
                ]
        turns = [
            PrefTurn(
                turn=r.turn,
                score=r.preference_evaluator.score if r.preference_evaluator else None,
                per_pref=per_pref.get(r.turn, []),
            )
            for r in raw.turns
        ]
        out.append(PrefEpisode(index=t.index, turns=turns))
    scores = [t.score for e in out for t in e.turns if t.score is not None]
    d = sum(scores) / len(scores) if scores else None
    return Preference(user_id=user, system=system, D=d, episodes=out)


def memories(lay: Layout, system: str, user: str) -> Memories:
    path = lay.memories(system, user)
    raw: RawMemories = lay.load(path, RawMemories)
    if raw.num_memories != len(raw.memories):
        raise RecordError(
            f"{path}: num_memories is {raw.num_memories} but memories has {len(raw.memories)}"
        )
    return Memories(
        user_id=user,
        system=system,
        num_memories=raw.num_memories,
        memories=raw.memories,
        meta={"source": "release", "run": lay.run_id(system)},
    )


def scores(
    lay: Layout, system: str, mode: str, user: str, bank_: Bank, store: Memories
) -> tuple[SlotFill, JudgeRecord]:
    """The release's slot-fill labels and judge scores as our SlotFill and Judge records.

    Overflow is decided as our own slot-fill decides it: the serialized store against
    ``slotfill.context_tokens``. An overflowing release user was scored "unknown" -> 0, which
    is our ``overflow: flag`` outcome (the paper's dagger).
    """
    path = lay.recon_judge(system, mode, user)
    raw: RawReconJudge = lay.load(path, RawReconJudge)
    order = [e.dimension for e in bank_.entries]
    got = [d.dimension for d in raw.details]
    if got != order:
        raise RecordError(f"{path}: details: dimensions {got} do not follow the bank {order}")
    over, tokens = False, 0
    budget = lay.cfg.slotfill.context_tokens
    assert budget is not None, "set when the config loads (config/schema.py)"
    if mode == "dump_all":
        over, tokens = store_overflows(store.memories, budget)
    slot = SlotFill(
        user_id=user,
        system=system,
        mode=mode,
        overflow=over,
        overflow_strategy="flag" if over else None,
        memory_tokens=tokens,
        entries=[
            SlotFillEntry(
                category=d.category,
                dimension=d.dimension,
                label=d.predicted,
                reason=d.slot_fill_reason,
            )
            for d in raw.details
        ],
    )
    entries = [
        JudgeEntry(**d.model_dump(include=set(JudgeEntry.model_fields))) for d in raw.details
    ]
    return slot, judge_record(slot, entries)


def retrieved(lay: Layout, system: str, user: str, k: int, guides: dict[str, str]) -> Retrieved:
    """The recorded top-k items per query: the ground truth of the release's retrieve mode."""
    path = lay.recon_judge(system, "retrieve", user)
    raw: RawReconJudge = lay.load(path, RawReconJudge)
    queries = []
    for i, d in enumerate(raw.details):
        if d.retrieved_memories is None:
            raise RecordError(f"{path}: details.{i}.retrieved_memories: missing in retrieve mode")
        queries.append(
            RetrievedQuery(
                category=d.category,
                dimension=d.dimension,
                query=retrieve_query(d.dimension, d.category, guides),
                items=d.retrieved_memories,
            )
        )
    return Retrieved(user_id=user, system=system, k=k, queries=queries)


def attribution(lay: Layout, system: str, mode: str, user: str) -> Attribution:
    path = lay.attribution(system, mode, user)
    raw: RawAttribution = lay.load(path, RawAttribution)
    try:
        details = [
            AttributionEntry(
                category=d.category,
                dimension=d.dimension,
                score=d.score,
                label=d.attribution.category,  # type: ignore[arg-type]
                ep_index=d.attribution.ep_index,
                stages=d.attribution.stages,
            )
            for d in raw.details
        ]
    except ValidationError as err:
        first = err.errors()[0]
        raise RecordError(
            f"{path}: attribution label: {first['msg']} (got {first.get('input')!r})"
        ) from None
    counts: dict[str, int] = {}
    for d in details:
        counts[d.label] = counts.get(d.label, 0) + 1
    return Attribution(user_id=user, system=system, mode=mode, counts=counts, details=details)


def oracle(lay: Layout, user: str) -> Oracle:
    path = lay.oracle(user)
    raw = lay.read(path)
    if not isinstance(raw, dict):
        raise RecordError(f"{path}: expected an object keyed by dimension")
    try:
        verdicts = {dim: OracleVerdict.model_validate(v) for dim, v in raw.items()}
    except ValidationError as err:
        raise RecordError(f"{path}: {first_error(err)}") from None
    return Oracle(user_id=user, verdicts=verdicts)


def report_aggregate(lay: Layout, path: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``aggregate`` block of a release report (for cross-checking our tables)."""
    raw = lay.read(path)
    if not isinstance(raw, dict) or "aggregate" not in raw:
        raise RecordError(f"{path}: aggregate: missing")
    return raw["aggregate"]
