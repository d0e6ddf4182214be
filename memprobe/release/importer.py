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

A run id is ``<system>_pooled_50`` (memt: ``memt_memonly_pooled_50``), overridable per system
with ``release.runs``. Every loader validates the raw record with a small pydantic model and
fails with one line naming the file and the key.
"""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memprobe.config.schema import Config
from memprobe.protocol.judge import judge_record
from memprobe.protocol.slotfill import store_overflows
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
    read_json,
)
from memprobe.spec.records import Judge as JudgeRecord
from memprobe.spec.records import load as load_record
from memprobe.spec.rubric import Level
from memprobe.spec.taxonomy import retrieve_query
from memprobe.vocabulary import CATEGORIES

T = TypeVar("T", bound=BaseModel)
DEFAULT_RUN_SUFFIX = "_pooled_50"
# The paper's "memt" is the release's memt_memonly runner (docs/release-format.md §1).
RELEASE_AGENT = {"memt": "memt_memonly"}
ORACLE_DIR = "_task_design_oracle"


# -- raw release formats (extra keys ignored: the release carries leftovers) ---------------
class _Raw(BaseModel):
    model_config = ConfigDict(extra="ignore")


class RawEntry(_Raw):
    dimension: str
    short: str
    explanation: str


class RawUser(_Raw):
    user_id: str
    base_profile: dict[str, Any] = Field(default_factory=dict)
    memory_bank: dict[str, list[RawEntry]]


class RawBankFile(_Raw):
    users: list[RawUser]


class RawTask(_Raw):
    task: str
    rationale: str = ""
    target_category: str
    target_dimension: str
    target_short: str
    pipeline_note: str = ""


class RawTaskFile(_Raw):
    user_id: str
    tasks: list[RawTask]


class RawSimulator(_Raw):
    feedback_type: str
    text: str


class RawPrefEval(_Raw):
    score: float | None = None


class RawTurn(_Raw):
    turn: int
    agent_response: str
    user_simulator: RawSimulator
    preference_evaluator: RawPrefEval | None = None


class RawEpisode(_Raw):
    task: str
    end_reason: str
    turns: list[RawTurn]


class RawPerPref(_Raw):
    idx: int
    score: int | str
    reason: str = ""


class RawPrefJudgeTurn(_Raw):
    turn: int
    score: float | None = None
    per_pref: list[RawPerPref] = Field(default_factory=list)


class RawPrefJudge(_Raw):
    turns: list[RawPrefJudgeTurn]


class RawMemories(_Raw):
    num_memories: int
    memories: list[dict[str, Any]]


class RawDetail(_Raw):
    category: str
    dimension: str
    explanation: str
    ground_truth: str
    predicted: str
    slot_fill_reason: str = ""
    score: Level  # a level of our rubric: a release score off the scale is refused
    judge_reason: str = ""
    scoring_mode: str
    retrieved_memories: list[dict[str, Any]] | None = None


class RawReconJudge(_Raw):
    user_id: str
    per_category: dict[str, float]
    overall: float
    details: list[RawDetail]


class RawAttributionTag(_Raw):
    category: str
    score: float
    stages: list[dict[str, Any]]
    ep_index: int | None = None


class RawAttributionDetail(RawDetail):
    attribution: RawAttributionTag


class RawAttribution(_Raw):
    user_id: str
    details: list[RawAttributionDetail]


# -- layout ------------------------------------------------------------------------------
class Layout:
    """Paths inside a checkout of the release."""

    def __init__(self, cfg: Config) -> None:
        if not cfg.users.release_dir:
            raise RecordError("users.release_dir: not set")
        self.root = Path(cfg.users.release_dir)
        self.cfg = cfg

    # -- every read of the release goes through these, checked when it happens ----------------
    def inside(self, path: str | os.PathLike[str]) -> Path:
        """``path`` resolved, if it lies inside ``users.release_dir``; else one line.

        A configured path with "..", or a symlink anywhere in the checkout (a run folder, a
        pref_judge file, a merged report), must not make the import read files from elsewhere
        on the machine. Checked at read time, on the path then read."""
        root = self.root.resolve()
        resolved = Path(path).resolve()
        if not resolved.is_relative_to(root):
            raise RecordError(f"release: {path} points outside users.release_dir ({root})")
        return resolved

    def load(self, path: str | os.PathLike[str], model: type[T]) -> T:
        return load_record(self.inside(path), model)

    def read(self, path: str | os.PathLike[str]) -> Any:
        return read_json(self.inside(path))

    def run_id(self, system: str) -> str:
        if system in self.cfg.release.runs:
            return self.cfg.release.runs[system]
        return RELEASE_AGENT.get(system, system) + DEFAULT_RUN_SUFFIX

    def output_dir(self, system: str, mode: str) -> Path:
        suffix = "_retrieve" if mode == "retrieve" else ""
        return self.root / "output" / f"{self.run_id(system)}{suffix}"

    @property
    def bank_file(self) -> Path:
        return self.root / self.cfg.release.bank_file

    def task_file(self, user: str) -> Path:
        return self.root / self.cfg.release.tasks_dir / f"{user}.json"

    def history(self, system: str, user: str, index: int) -> Path:
        return self.recorded(self.run_id(system), user, index)

    def recorded(self, run: str, user: str, index: int) -> Path:
        """One recorded episode of a run (``history/<run>/user_XXX/episode_<i>.json``)."""
        return self.root / "history" / run / user / f"episode_{index}.json"

    def pref_judge(self, system: str, user: str, index: int) -> Path:
        return self.root / "pref_judge" / self.run_id(system) / user / f"episode_{index}.json"

    def memories(self, system: str, user: str) -> Path:
        return self.root / "memory" / self.run_id(system) / user / "memories.json"

    def recon_judge(self, system: str, mode: str, user: str) -> Path:
        return self.output_dir(system, mode) / "recon_judge" / f"{user}.json"

    def attribution(self, system: str, mode: str, user: str) -> Path:
        return self.output_dir(system, mode) / "attribution" / f"{user}.json"

    def oracle(self, user: str) -> Path:
        return self.root / "output" / ORACLE_DIR / f"{user}.json"

    def merged_report(self, system: str, mode: str) -> Path | None:
        """The canonical aggregate report: the latest ``*_merged.json`` (names sort by time)."""
        found = sorted(self.output_dir(system, mode).glob("*_merged.json"))
        return found[-1] if found else None

    def user_files(self, user: str) -> list[Path]:
        """Every release file an import of this user's runs reads (pref_judge is optional)."""
        files = [self.oracle(user)]
        for s in self.cfg.systems:
            files.append(self.memories(s, user))
            files += [self.history(s, user, i) for i in range(1, self.cfg.n_dims + 1)]
        for s, m in pairs(self.cfg):
            files += [self.recon_judge(s, m, user), self.attribution(s, m, user)]
        return files


def pairs(cfg: Config) -> list[tuple[str, str]]:
    """(system, mode) pairs the release holds: a mode applies where its output folder exists."""
    lay = Layout(cfg)
    return [
        (s, m)
        for s in cfg.systems
        for m in cfg.modes
        if (lay.output_dir(s, m) / "recon_judge").is_dir()
    ]


def _needed(cfg: Config) -> list[Path]:
    """Every release file the configured import reads."""
    lay = Layout(cfg)
    users = cfg.user_ids
    need = [lay.bank_file, *(lay.task_file(u) for u in users)]
    if cfg.release.import_runs:
        for u in users:
            need += lay.user_files(u)
    return need


def missing_files(cfg: Config) -> list[Path]:
    """Release files the configured import needs that are absent (checked at DAG load)."""
    return [p for p in _needed(cfg) if not p.is_file()]


def check_layout(cfg: Config) -> None:
    """One line naming the first missing file (and how many more), or nothing."""
    if not Path(cfg.users.release_dir or "").is_dir():
        raise RecordError(f"users.release_dir: {cfg.users.release_dir} is not a directory")
    lay = Layout(cfg)
    for path in _needed(cfg):
        lay.inside(path)  # at DAG load too: one line before any job
    if cfg.rollout.replay:
        check_replay(cfg)
    missing = missing_files(cfg)
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise RecordError(f"release: missing {missing[0]}{more}")
    if cfg.release.import_runs and not pairs(cfg):
        raise RecordError(f"release: no output/<run>/recon_judge for systems {cfg.systems}")


def check_replay(cfg: Config) -> None:
    """``rollout.replay``: the run is in the release and holds every episode of every user
    (one line naming the first gap); the episodes themselves are read by the replay jobs."""
    lay, run = Layout(cfg), cfg.rollout.replay
    assert run, "called for a replay only"
    runs = lay.root / "history"
    if not (runs / run).is_dir():
        found = sorted(p.name for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []
        raise RecordError(
            f"rollout.replay: no recorded run {run!r} in {runs} "
            f"(found: {', '.join(found) or 'none'})"
        )
    for user in cfg.user_ids:
        if not (runs / run / user).is_dir():
            raise RecordError(f"rollout.replay: run {run!r} has no {user} ({runs / run / user})")
        for i in range(1, cfg.n_dims + 1):
            path = lay.inside(lay.recorded(run, user, i))  # the job reads it: no symlink out
            if not path.is_file():
                raise RecordError(
                    f"rollout.replay: missing {lay.recorded(run, user, i)} ({user} has "
                    f"{cfg.n_dims} tasks)"
                )


def recorded_system(run: str) -> str:
    """The system whose release run this is (``memt_memonly_pooled_50`` -> memt)."""
    agent = run.removesuffix(DEFAULT_RUN_SUFFIX)
    return next((s for s, a in RELEASE_AGENT.items() if a == agent), agent)


def recorded_turns(cfg: Config) -> float | None:
    """``rollout.replay``: the replayed run's mean turns per episode over the config's users,
    counted in its files; None where they are not all at hand (an estimate before checkout)."""
    run = cfg.rollout.replay
    assert run, "called for a replay only"
    lay = Layout(cfg)
    files = [lay.recorded(run, u, i) for u in cfg.user_ids for i in range(1, cfg.n_dims + 1)]
    if not all(f.is_file() for f in files):
        return None
    return sum(len(lay.load(f, RawEpisode).turns) for f in files) / len(files)


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
