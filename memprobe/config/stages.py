"""The blocks of the protocol's stages: slot-fill, the judge, the users' generation, the
simulator, the prompt files each stage reads, and the release's quirks (``compat``)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from memprobe.config.base import Strict


class Compat(Strict):
    """Switches that reproduce the authors' release quirks (docs/release-format.md §8).

    Every switch defaults to the corrected behaviour.
    """

    longctx_drop_final_reply: bool = False
    """release quirk: longctx_full does not store a task's last reply"""
    retrieve_attribution_empty_transcript: bool = False
    """release quirk: retrieve-mode attribution reads an empty transcript"""
    judge_unknown_labels: bool = False
    """release behaviour: call the judge for "unknown" labels too (by default they score 0 without a
    call)"""
    # memt search: the release returned items in ReAct discovery order (scores were None).
    memt_discovery_order: bool = False
    """release quirk: memt's top-k in ReAct discovery order, not by similarity"""
    # amem search: the release's index kept each note's text as written; neighbour updates
    # never reached it.
    amem_stale_index: bool = False
    """release quirk: amem searches each note's text as filed (neighbour updates never indexed)"""


DEFAULT_CONTEXT_TOKENS = 128_000


class SlotFill(Strict):
    # The dump_all budget. Unset: the context the slotfill role's model is served with
    # (backend local: llm.local.context_tokens), else 128,000. A store over it is flagged (the
    # paper's dagger) without a request, so it must never exceed what the endpoint serves.
    context_tokens: int | None = Field(default=None, ge=256)
    """dump_all budget of the slot-filler (unset: 128000, or `llm.local.context_tokens` on backend
    local, which it may not exceed)"""
    overflow: Literal["flag", "chunked"] = "flag"
    """a store over budget: `flag` (the paper's †) or `chunked` (map over chunks, then reduce)"""


def parse_users(spec: str) -> set[int]:
    """``"26-50"`` or ``"1-10,15"`` -> user numbers; ValueError naming the bad part."""
    out: set[int] = set()
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m or (m[2] and int(m[2]) < int(m[1])):
            raise ValueError(
                f"{spec!r}: expected user numbers or ranges, e.g. '26-50' or '1-10,15'"
            )
        out.update(range(int(m[1]), int(m[2] or m[1]) + 1))
    return out


class JudgeCalibration(Strict):
    """What the judge is checked against before its B counts (memprobe/protocol/calibration.py).

    ``source: anchors`` scores the hand-written anchors of config/judge_calibration.yaml;
    ``source: release`` scores ``n`` pairs the paper's judge scored in the authors' release
    (``release_dir``, default the run's ``release_dir``), drawn with the run's seed from
    ``users``, ``n / 5`` per recorded level (docs/release-format.md §2.8).
    """

    on_fail: Literal["warn", "stop"] = "warn"
    """a judge below `min_kappa` or above `max_bias` on its calibration pairs: `warn` (flag every
    B cell) or `stop` (end the run before any rollout); `judge.calibration: stop` is short for it"""
    source: Literal["anchors", "release"] = "anchors"
    """the calibration pairs: `anchors` (config/judge_calibration.yaml) or `release` (pairs the
    paper's judge scored in the authors' release)"""
    release_dir: str | None = None
    """the release checkout for `source: release` (unset: the run's `release_dir`)"""
    n: int = Field(default=200, ge=5)
    """pairs drawn with the run's seed for `source: release`, n/5 per recorded level"""
    users: str = "26-50"
    """the release users they are drawn from (the offline judge was fitted on 1-25)"""

    @field_validator("n")
    @classmethod
    def _equal_per_level(cls, v: int) -> int:
        if v % 5:
            raise ValueError(f"{v}: expected a multiple of 5 (equal pairs per rubric level)")
        return v

    @field_validator("users")
    @classmethod
    def _users(cls, v: str) -> str:
        parse_users(v)
        return v


class JudgeSettings(Strict):
    """How the run judges recovery and how far it trusts its judge.

    ``form: llm`` asks the judge role's model; ``form: scorer`` grades with the offline judge
    fitted on the paper's judge (memprobe/protocol/offline_judge.py, figures in ``scorer``).
    Before its B numbers count, the judge is calibrated (``calibration``). Below ``min_kappa``
    or above ``max_bias`` it fails: ``on_fail: warn`` flags every B cell, ``stop`` ends the run
    after the calibration, before any rollout. ``cross_check`` (an LLM judge only) also grades
    every label with the offline judge and flags the B cells where the two means differ by more
    than ``cross_check_margin``.
    """

    form: Literal["llm", "scorer"] = "llm"
    """who grades a label: `llm` (the judge role's model, prompts/recovery_judge.md) or `scorer`
    (the offline judge fitted on the paper's judge, no model; the default run's)"""
    scorer: str = "config/offline_judge.yaml"
    """the offline judge's figures (refit: `memprobe offline-judge fit`)"""
    calibration: JudgeCalibration = Field(default_factory=JudgeCalibration)
    min_kappa: float = Field(default=0.6, ge=-1.0, le=1.0)
    """least quadratic-weighted κ on the calibration pairs"""
    max_bias: float = Field(default=0.15, ge=0.0, le=1.0)
    """largest |mean score difference| on the calibration pairs"""
    # Score a slot-fill label that names the slot (category, dimension, axis question) as
    # "unknown" instead of asking the judge: a protocol difference (docs/fidelity.md).
    degenerate_as_unknown: bool = False
    """score a slot-fill label that names its slot (category, dimension, axis question) as "unknown"
    without a judge call (a protocol difference)"""
    cross_check: bool = False
    """an LLM judge's run also grades every label with the offline judge and flags the B cells
    where the two differ by more than the margin (`judge_cross_check.csv`)"""
    cross_check_margin: float = Field(default=0.1, gt=0.0, le=1.0)
    """that margin, on a B cell's mean score"""

    @field_validator("calibration", mode="before")
    @classmethod
    def _on_fail_shorthand(cls, v: Any) -> Any:
        # `judge.calibration: stop` (the earlier form) still means on_fail: stop.
        return {"on_fail": v} if isinstance(v, str) else v

    @model_validator(mode="after")
    def _cross_check_needs_llm(self) -> JudgeSettings:
        if self.cross_check and self.form != "llm":
            raise ValueError("cross_check: the offline judge would check itself; needs form: llm")
        return self


class TaskGen(Strict):
    max_edits: int = Field(default=3, ge=0, description="editor rounds before a task is marked")
    leak_threshold: float = Field(default=0.5, ge=0, le=1)
    """share of a target's words in its task that flags a leak"""


class BankGen(Strict):
    """How the pool is shown to the bank generator.

    The paper shows the whole category pool with each axis and sample values. A small local
    model cannot read ~1,700 tokens of pool and copies the sample values, or the axis question
    itself, into its answers, so the default local config shows a seeded sample of candidate
    names without axes or sample values.
    """

    # ours: config/dimension_pool.yaml; release: the release's dimension_pool.json, read from
    # the release checkout (release_dir + release.pool_file) when the run starts, never copied.
    pool: Literal["ours", "release"] = "ours"
    """`ours` (config/dimension_pool.yaml) or `release` (the release's dimension_pool.json)"""
    pool_sample: int | None = Field(
        default=None, ge=1, description="candidates shown per category (None: the whole pool)"
    )
    show_examples: bool = True
    """show the pool's sample values to the bank generator"""
    show_axes: bool = True
    """show each pool dimension's axis question to the bank generator"""
    persona: Literal["release", "ours"] = "ours"
    """the persona the bank generator sees: `release` (what the release's bank call saw: age,
    gender, place, occupation, the values sentence, the attitude without its details,
    interests, stories) or `ours` (the whole persona: also name, age group, values type, the
    attitude's details and coping)"""


class SimulatorSettings(Strict):
    """The user simulator's reply (its prompt: ``prompts.user_simulator``)."""

    # The release set no cap (its longest A-Mem simulator turn ran to 3,302 characters); ours
    # keeps a small local model from rambling until max_tokens. None: no cap.
    max_reply_chars: int | None = Field(default=1500, ge=1)
    """cap on a simulated user's message, in characters (unset: none, as the release)"""


# The protocol stages whose prompt file the config picks (prompts/<name>.md).
PROMPT_STAGES = (
    "persona_narrative",
    "bank_select",
    "task_write",
    "task_critic",
    "task_edit",
    "user_simulator",
    "assistant_system",
    "preference_judge",
    "slotfill",
    "recovery_judge",
    "attribution_oracle",
    "attribution_disclosure",
    "attribution_subclass",
)
_PROMPT_NAME = r"^[a-z][a-z0-9_]*$"


class PromptFiles(Strict):
    """Which prompt file each stage reads: ``prompts/<value>.md``, by default the stage's own.

    Our wording lives in prompts/<stage>.md; config/paper.yaml points the stages whose rules
    follow the release at prompts/<stage>_paper.md (docs/fidelity.md says why per stage).
    """

    persona_narrative: str = Field(default="persona_narrative", pattern=_PROMPT_NAME)
    """the persona narrative stage's prompt: `prompts/<value>.md`"""
    bank_select: str = Field(default="bank_select", pattern=_PROMPT_NAME)
    """the bank select stage's prompt: `prompts/<value>.md`"""
    task_write: str = Field(default="task_write", pattern=_PROMPT_NAME)
    """the task write stage's prompt: `prompts/<value>.md`"""
    task_critic: str = Field(default="task_critic", pattern=_PROMPT_NAME)
    """the task critic stage's prompt: `prompts/<value>.md`"""
    task_edit: str = Field(default="task_edit", pattern=_PROMPT_NAME)
    """the task edit stage's prompt: `prompts/<value>.md`"""
    user_simulator: str = Field(default="user_simulator", pattern=_PROMPT_NAME)
    """the user simulator stage's prompt: `prompts/<value>.md`"""
    assistant_system: str = Field(default="assistant_system", pattern=_PROMPT_NAME)
    """the assistant system stage's prompt: `prompts/<value>.md`"""
    preference_judge: str = Field(default="preference_judge", pattern=_PROMPT_NAME)
    """the preference judge stage's prompt: `prompts/<value>.md`"""
    slotfill: str = Field(default="slotfill", pattern=_PROMPT_NAME)
    """the slotfill stage's prompt: `prompts/<value>.md`"""
    recovery_judge: str = Field(default="recovery_judge", pattern=_PROMPT_NAME)
    """the recovery judge stage's prompt: `prompts/<value>.md`"""
    attribution_oracle: str = Field(default="attribution_oracle", pattern=_PROMPT_NAME)
    """the attribution oracle stage's prompt: `prompts/<value>.md`"""
    attribution_disclosure: str = Field(default="attribution_disclosure", pattern=_PROMPT_NAME)
    """the attribution disclosure stage's prompt: `prompts/<value>.md`"""
    attribution_subclass: str = Field(default="attribution_subclass", pattern=_PROMPT_NAME)
    """the attribution subclass stage's prompt: `prompts/<value>.md`"""
