"""Typed records for every artifact, plus atomic JSON I/O.

Every artifact is written through :func:`write_atomic` (temp file in the same folder, fsync,
rename), so a killed job never leaves a torn file that Snakemake would mistake for finished;
the temporary a kill leaves behind is removed by the rerun's write of the same file.
"""

from __future__ import annotations

import glob
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from memprobe.vocabulary import CATEGORIES, EndReason, FeedbackType, Stage

T = TypeVar("T", bound=BaseModel)


def _umask() -> int:
    mask = os.umask(0)  # the only way to read it; restored at once (module import time)
    os.umask(mask)
    return mask


_UMASK = _umask()


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd``: ``os.write`` may write fewer (a full disk, a
    signal); a write that makes no progress is ENOSPC, raised like any other failure."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(28, "No space left on device (a write made no progress)")
        view = view[n:]


class RecordError(ValueError):
    """An artifact or input file that is missing, unreadable or of the wrong shape."""


class Record(BaseModel):
    # NaN/inf are not scores: json.load accepts the bare NaN token, so refuse it here.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


# -- stand-ins for replies whose re-asks ran out -----------------------------------------
# What a stand-in can move: metrics A, B, C, D and the attribution counts.
Metric = Literal["A", "B", "C", "D", "attribution"]


class StandIn(Record):
    """A reply the re-asks could not make valid, and the deterministic stand-in the stage used
    instead (docs/fidelity.md, "Stand-ins")."""

    stage: Stage
    where: str  # the call, named as its error line would name it
    problem: str  # what was still wrong with the last reply
    action: str  # what stood in for a valid reply
    touches: list[Metric] = Field(default_factory=list)  # the numbers resting on the stand-in


class HasStandIns(Record):
    """An artifact that lists its stand-ins (the field keeps its first name, ``recoveries``).
    The list is written last and only when it has entries, so an artifact without any is
    byte-identical to one that predates the field."""

    recoveries: list[StandIn] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _recoveries_last_if_any(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out = handler(self)
        listed = out.pop("recoveries", None)
        if listed:
            out["recoveries"] = listed
        return out


# -- users -------------------------------------------------------------------------------
class Location(Record):
    country: str
    city: str


class Persona(HasStandIns):
    user_id: str
    seed: int
    name: str
    age: int
    age_group: str
    gender: str
    location: Location
    occupation: str
    values_orientation: str
    values: str = ""  # a sentence on what they value (the release's personal_values)
    attitude: str = ""
    coping: str = ""  # how they cope with setbacks (the release's coping_mechanism)
    stories: list[str] = Field(default_factory=list)
    interests: list[str] = Field(default_factory=list)


class BankEntry(Record):
    category: str
    dimension: str
    short: str
    explanation: str

    @field_validator("category")
    @classmethod
    def _known_category(cls, v: str) -> str:
        # Bank files may be hand-made or imported: an unknown category would silently drop
        # the entry from every per-category score.
        if v not in CATEGORIES:
            raise ValueError(f"unknown category {v!r}; expected one of {', '.join(CATEGORIES)}")
        return v


class Bank(HasStandIns):
    user_id: str
    entries: list[BankEntry]

    def by_category(self, category: str) -> list[BankEntry]:
        return [e for e in self.entries if e.category == category]


class CriticVerdict(Record):
    verdict: Literal["neutral", "fishing"]
    inferred_trait: str
    why: str = ""


class Task(Record):
    index: int  # 1-based episode index; episode i targets bank entry i
    task: str
    rationale: str = ""
    target_category: str
    target_dimension: str
    target_short: str
    verdicts: list[CriticVerdict] = Field(default_factory=list)
    revisions: list[str] = Field(default_factory=list)
    status: Literal["neutral", "fishing_budget_spent", "imported"] = "neutral"
    leak_share: float = 0.0
    leak_flag: bool = False


class LeakReport(Record):
    """Per-user summary of the deterministic leak check (content-word overlap with the target)."""

    threshold: float
    mean_share: float
    max_share: float
    flagged: list[int] = Field(default_factory=list)  # task indices over the threshold
    edited: int = 0  # tasks the editor rewrote at least once
    budget_spent: int = 0  # tasks still fishing when the edit budget ran out


class Tasks(HasStandIns):
    user_id: str
    tasks: list[Task]
    leak: LeakReport | None = None  # None where no leak check was run

    def check_follows(self, bank: Bank, source: str) -> None:
        """Tasks follow the bank one to one, in bank order; else a RecordError naming ``source``."""
        if len(self.tasks) != len(bank.entries):
            raise RecordError(
                f"{source}: {len(self.tasks)} tasks for {len(bank.entries)} bank entries"
            )
        for i, (t, e) in enumerate(zip(self.tasks, bank.entries, strict=True)):
            if t.target_dimension != e.dimension:
                raise RecordError(
                    f"{source}: tasks[{i}].target_dimension is {t.target_dimension!r}, "
                    f"bank order expects {e.dimension!r}"
                )


# -- rollout -----------------------------------------------------------------------------


class Turn(Record):
    turn: int
    agent_response: str
    feedback_type: FeedbackType
    user_text: str
    # The memory lines the system showed its reply call at this turn (empty: none, or a system
    # that replays history instead): the transcript shows what memory carried over.
    recalled: list[str] = Field(default_factory=list)


class Episode(Record):
    index: int
    task: str
    target_dimension: str
    end_reason: EndReason
    turns: list[Turn]


class Episodes(HasStandIns):
    user_id: str
    system: str
    episodes: list[Episode]
    # The release run whose recorded conversations these are (``rollout.replay``): the agent
    # replies and user messages are that run's, not this system's. None: our own rollout.
    replay: str | None = None


class Memories(Record):
    user_id: str
    system: str
    num_memories: int
    memories: list[dict[str, Any]]
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> Memories:
        # An imported dump is scored as-is: each item must carry the text the scorers read.
        for i, item in enumerate(self.memories):
            if not isinstance(item.get("content"), str):
                raise ValueError(f"memories.{i}.content: expected a string")
        if self.num_memories != len(self.memories):
            raise ValueError(
                f"num_memories is {self.num_memories} but memories has {len(self.memories)} items"
            )
        return self


# -- preference (metric D) ---------------------------------------------------------------
class PrefScore(Record):
    idx: int
    score: int | Literal["na"]
    reason: str = ""


class PrefTurn(Record):
    turn: int
    score: float | None
    per_pref: list[PrefScore]


class PrefEpisode(Record):
    index: int
    turns: list[PrefTurn]


class Preference(HasStandIns):
    user_id: str
    system: str
    D: float | None
    episodes: list[PrefEpisode]


# -- probes and scoring ------------------------------------------------------------------
class RetrievedQuery(Record):
    category: str
    dimension: str
    query: str
    items: list[dict[str, Any]]


class Retrieved(Record):
    user_id: str
    system: str
    k: int
    queries: list[RetrievedQuery]


class SlotFillEntry(Record):
    category: str
    dimension: str
    label: str
    reason: str
    called: bool = True


class UserRun(HasStandIns):
    """One user's store as scored in one mode: what a slot-fill and its judge record share."""

    user_id: str
    system: str
    mode: str
    overflow: bool = False
    # "flag": overflowing dims were not scored (the paper's dagger); "chunked": scored by chunks.
    overflow_strategy: Literal["flag", "chunked"] | None = None


class SlotFill(UserRun):
    memory_tokens: int = 0
    entries: list[SlotFillEntry]


class JudgeEntry(Record):
    category: str
    dimension: str
    explanation: str
    ground_truth: str
    predicted: str
    slot_fill_reason: str
    score: float
    judge_reason: str
    scoring_mode: str
    # judge.cross_check: the offline judge's score of the same label (None: not asked).
    second_opinion: float | None = None


class Judge(UserRun):
    """Per-user recovery scores; ``flagged`` cells get the tables' dagger."""

    per_category: dict[str, float | None]
    overall: float
    details: list[JudgeEntry]

    @property
    def flagged(self) -> bool:
        """The store overflowed and was not scored (unknown -> 0), as the paper's dagger marks."""
        return self.overflow and self.overflow_strategy != "chunked"


AttributionLabel = Literal[
    "ok",
    "memory_failure",
    "task_design_failure",
    "agent_elicitation_failure",
    "simulator_too_strict",
    "no_targeted_task",
]


class AttributionEntry(Record):
    category: str
    dimension: str
    score: float
    label: AttributionLabel
    ep_index: int | None
    stages: list[dict[str, Any]]


class Attribution(HasStandIns):
    user_id: str
    system: str
    mode: str
    counts: dict[str, int]
    details: list[AttributionEntry]


class OracleVerdict(Record):
    can_invite: bool
    reason: str


class Oracle(HasStandIns):
    user_id: str
    verdicts: dict[str, OracleVerdict]


# -- what a run scored, and who judged it (results/<run>/scored.json) ---------------------
class JudgeIdentity(Record):
    """Who gave a run's scores: another run compared with it names where the judges differ."""

    form: Literal["llm", "scorer"]
    model: str  # the judge role's model; the offline judge's: "offline judge"
    prompt: str  # the prompt file (llm), the figures file (scorer), or the release's own
    digest: str | None = None  # sha256 (12 hex) of that file; None: not a file of ours
    paper: bool = False  # the paper's judge itself (the release's records, imported)


class CalibrationVerdict(Record):
    """A run's judge against its calibration pairs (``judge_calibration.csv``)."""

    source: Literal["anchors", "release"]  # release: the pairs the paper's judge scored
    n: int
    kappa: float
    bias: float
    passed: bool


class Scored(Record):
    """What a run's tables rest on: its users, its (system, mode) pairs and its judge. The
    tables job writes it; a run that compares with this one (``compare.runs``) finds this
    run's scored files and its judge from it, without this run's config."""

    run: str
    users: list[str]
    pairs: list[tuple[str, str]]
    judge: JudgeIdentity
    calibration: CalibrationVerdict | None = None  # None: imported, never calibrated here


# -- I/O ---------------------------------------------------------------------------------
def write_atomic(
    path: str | os.PathLike[str], data: BaseModel | dict | list | str, private: bool = False
) -> None:
    """Write JSON (or text) so that readers see either the old file or the whole new one;
    ``private``: a state file, readable by its owner alone (0600), else the umask's."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, BaseModel):
        text = data.model_dump_json(indent=2)
    elif isinstance(data, str):
        text = data
    else:
        text = json.dumps(data, indent=2, ensure_ascii=False)
    _sweep_stale_temps(path)
    fd, tmp = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.{os.getpid()}-", suffix=".tmp"
    )
    try:
        if not private:
            os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; artifacts follow the umask
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _sweep_stale_temps(path: Path) -> None:
    """Remove the temporaries of ``path`` left by writers that died (a SIGKILL between the
    write and the rename). Snakemake lets one job at a time own an output, so a temporary whose
    process is gone is nobody's; a live process's (this one's threads included) is kept."""
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*-*.tmp"):
        pid = tmp.name[len(path.name) + 2 :].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            tmp.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def inside(root: str | os.PathLike[str], path: str | os.PathLike[str], key: str) -> Path:
    """``path`` resolved, if it lies inside ``root`` (the directory config key ``key`` names);
    else one line. A ".." or a symlink anywhere on the way (a folder, the file itself) must
    not make a read of a checkout reach files elsewhere on the machine: checked on the path
    then read, when it is read."""
    base = Path(root).resolve()
    resolved = Path(path).resolve()
    if not resolved.is_relative_to(base):
        raise RecordError(f"{path} points outside {key} ({base})")
    return resolved


def read_json(path: str | os.PathLike[str]) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise RecordError(f"{path}: file not found") from None
    except json.JSONDecodeError as err:
        raise RecordError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    except UnicodeDecodeError:
        raise RecordError(f"{path}: not UTF-8 text (expected a JSON file)") from None
    except ValueError as err:  # a number past Python's limit (an integer of 4,300+ digits)
        raise RecordError(f"{path}: not a JSON file we read ({str(err).split(':')[0]})") from None
    except RecursionError:
        raise RecordError(f"{path}: JSON nested too deeply to read") from None
    except OSError as err:  # a directory, no permission, an I/O error
        raise RecordError(f"{path}: cannot read ({err.strerror or err})") from None


def first_error(err: ValidationError, top: str = "(top level)") -> str:
    """Pydantic's first error as one line: ``dotted.key: message`` (``top`` for the root)."""
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or top
    return f"{loc}: {first['msg'].removeprefix('Value error, ')}"


def load_yaml(path: str | os.PathLike[str], model: type[T], what: str = "file") -> T:
    """Read and validate a YAML settings file (``what`` names it in the not-found line)."""
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecordError(f"{path}: {what} not found") from None
    except yaml.YAMLError as err:
        raise RecordError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    try:
        return model.model_validate(raw)
    except ValidationError as err:
        raise RecordError(f"{path}: {first_error(err)}") from None


def load(path: str | os.PathLike[str], model: type[T]) -> T:
    """Read and validate one artifact; errors name the file and the offending key."""
    raw = read_json(path)
    try:
        return model.model_validate(raw)
    except ValidationError as err:
        raise RecordError(f"{path}: {first_error(err)}") from None
