"""The release's file formats as this code reads them (docs/release-format.md §2): a small
pydantic model per file, extra keys ignored (the release carries leftovers), so a file that
lacks what we read fails in one line naming the file and the key.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memprobe.spec.rubric import Level


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
