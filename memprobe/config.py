"""The run configuration: one validated pydantic model, checked when the DAG loads.

Snakemake merges every ``--configfile`` and ``--config`` into one dict; ``load_config`` turns
that dict into a :class:`Config` or raises :class:`ConfigError` with a one-line message that
names the offending key and what was expected.
"""

from __future__ import annotations

import copy
import os
import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from memprobe.registry import RegistryError, backends
from memprobe.registry import systems as registry
from memprobe.vocabulary import CATEGORIES, MODES, ROLES, Category, Mode, Role

# Sampling temperatures per role: the release's (docs/release-format.md §4) except "writer",
# whose temperature belongs to each system (``system_settings.<system>.writer``: A-Mem ran at
# 1.0, mem0 at 0.0); 0.0 here is only the fallback for a system that sets none.
DEFAULT_TEMPERATURE: dict[str, float] = {
    "generator": 0.8,  # persona narrative and bank (the release's profile and bank calls)
    "task_writer": 0.7,  # the release's task generator
    "critic": 0.0,
    "editor": 0.5,
    "simulator": 0.85,
    "assistant": 0.7,
    "writer": 0.0,
    "preference": 0.0,
    "slotfill": 0.0,
    "judge": 0.0,
    "oracle": 0.0,
    "disclosure": 0.0,
}


# The paper's protocol as config keys (MemProbe §3; docs/release-format.md §3-4, with our fixes;
# docs/fidelity.md row by row). A config that declares ``protocol: paper`` must hold every one
# of them after Snakemake's merge, so neither a layer underneath (config/config.yaml's
# small-model settings) nor a ``--config`` can change one silently.
PAPER_PROTOCOL: dict[str, Any] = {
    "seed": 0,
    "n_users": 50,
    "dims_per_category": dict(zip(CATEGORIES, (7, 7, 7, 5, 5), strict=True)),
    "systems": ["nomem", "longctx_full", "amem", "mem0", "memt"],
    "modes": list(MODES),
    "top_k": 5,
    "max_turns": 25,
    "bank.pool_sample": None,
    "bank.show_examples": True,
    "bank.show_axes": True,
    "tasks.max_edits": 3,
    "simulator.max_reply_chars": None,
    "slotfill.context_tokens": 245_000,
    "slotfill.overflow": "flag",
    "judge.form": "llm",
    "judge.degenerate_as_unknown": False,
    "compat.longctx_drop_final_reply": False,
    "compat.retrieve_attribution_empty_transcript": False,
    "compat.judge_unknown_labels": False,
    "compat.memt_discovery_order": False,
    "compat.amem_stale_index": False,
    "prompts.bank_select": "bank_select_paper",
    "prompts.task_write": "task_write_paper",
    "prompts.task_critic": "task_critic_paper",
    "prompts.task_edit": "task_edit_paper",
    "prompts.user_simulator": "user_simulator_paper",
    "prompts.preference_judge": "preference_judge_paper",
    "prompts.slotfill": "slotfill_paper",
    "llm.model": "gpt-5.4-mini",
    "llm.max_tokens": 8192,
    "llm.local.assistant_max_tokens": None,
    "system_settings.longctx_full.tailor": False,
    "system_settings.amem.writer.temperature": 1.0,
    "system_settings.amem.item_shape": "release",
    "system_settings.mem0.writer.model": "gpt-4o-mini",
    "system_settings.mem0.writer.temperature": 0.0,
    "system_settings.mem0.writer.max_tokens": 2000,
    "system_settings.mem0.embedder": "openai",
    "system_settings.mem0.hybrid_search": True,
    "memt.temperature": 0.7,
    "memt.max_tool_steps": 6,
    "memt.embedder": "BAAI/bge-m3",
    "memt.embedder_max_seq_length": None,
    "memt.profile_sources": "turns",
    "memt.embed_source": True,
    "memt.stop_at_tool_call": True,
    "memt.observation_sources": True,
}
# config/release-compat.yaml: the paper's protocol with the release's own choices where we
# fixed something (every compat switch on, one unchecked edit).
RELEASE_COMPAT_PROTOCOL: dict[str, Any] = PAPER_PROTOCOL | {
    "tasks.max_edits": 1,
    "compat.longctx_drop_final_reply": True,
    "compat.retrieve_attribution_empty_transcript": True,
    "compat.judge_unknown_labels": True,
    "compat.memt_discovery_order": True,
    "compat.amem_stale_index": True,
}
PROTOCOLS: dict[str, dict[str, Any]] = {
    "paper": PAPER_PROTOCOL,
    "release_compat": RELEASE_COMPAT_PROTOCOL,
}


class ConfigError(ValueError):
    """A configuration problem, phrased as one line naming the key."""


class KeyedError(ValueError):
    """A whole-config check that fails on one key (``key``, dotted): the error names the
    layer that set it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


class _Strict(BaseModel):
    # A field's docstring is its description: docs/configuration.md is generated from them.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, use_attribute_docstrings=True)


def _endpoint_url(v: str | None) -> str | None:
    """An OpenAI-compatible endpoint is an http(s) URL with a host (never file://, etc.)."""
    if v is None:
        return v
    parts = urlsplit(v)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected an http:// or https:// URL with a host, got {v!r}")
    return v


# Flags of memt.vllm_args that would undo what vllm_server sets: a Unix socket in a private
# directory (no TCP port), the run's key.
_VLLM_RESERVED = ("--host", "--port", "--uds", "--api-key")


class RoleOverride(_Strict):
    """Per-role endpoint settings; anything unset falls back to the ``llm`` defaults."""

    base_url: str | None = None
    """the role's own endpoint; a role with its own endpoint sends only its own key"""
    model: str | None = None
    """the role's model"""
    api_key_env: str | None = None
    """the variable holding the role's key"""
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    """the role's temperature (unset: the release's for that role; the writer's is per system, under
    `system_settings`)"""
    max_tokens: int | None = Field(default=None, ge=1)
    """the role's reply bound"""

    _url = field_validator("base_url")(_endpoint_url)


class LocalModel(_Strict):
    """The embedded llama.cpp server used by ``backend: local`` (memprobe/serving/local_server.py).

    ``package`` names a pinned PyPI model pack (``pip install -e '.[model]'``); ``model_path``
    serves any other GGUF instead, checked against ``sha256`` when that is set.
    """

    package: Literal["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"] = "qwen2.5-coder-0.5b"
    """a pinned PyPI model pack: `qwen2.5-coder-0.5b` (extra `model`) or `qwen2.5-coder-1.5b` (extra
    `model-1-5b`)"""
    model_path: str | None = None
    """serve this GGUF instead of the package's"""
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-fA-F]{64}$")
    """`model_path`'s checksum, checked before any job"""
    threads: int = Field(default=2, ge=1)
    """llama.cpp threads"""
    context_tokens: int = Field(default=4096, ge=512, description="context per server slot")
    parallel: int = Field(default=1, ge=1, description="server slots (concurrent requests)")

    @property
    def jobs_at_once(self) -> int:
        """LLM jobs the server serves at once: a slot pair each (a conversation's two sides).
        More jobs slow every request, past ``llm.timeout_s`` (docs/performance.md)."""
        return max(1, self.parallel // 2)

    assistant_max_tokens: int | None = Field(default=None, ge=1)
    """the assistant's reply bound when this server answers (unset: `llm.max_tokens`): a small
    model that loops spends its whole bound on one reply (docs/performance.md)"""
    cache_reuse: int = Field(default=256, ge=0)
    """reuse the cached chunks of a slot's last prompt that moved, when at least this many
    tokens long (llama.cpp's `--cache-reuse`; 0: only the common prefix is reused)"""
    startup_timeout_s: float = Field(default=300.0, gt=0)
    """how long the model may take to load"""
    spin_count: int = Field(default=0, ge=0)
    """how long llama.cpp's threads spin before they sleep when waiting for each other
    (GOMP_SPINCOUNT); 0: they sleep at once (OMP_WAIT_POLICY=PASSIVE). On 2 quiet cores 10000
    decodes 40% faster, beside one busy process 35% slower (docs/performance.md)"""


class RateLimitValues(_Strict):
    """An endpoint's limits as its provider states them (None: not limited)."""

    requests_per_minute: int | None = Field(default=None, ge=1)
    """requests per minute the provider allows (unset: not limited)"""
    tokens_per_minute: int | None = Field(default=None, ge=1)
    """prompt + completion tokens per minute the provider allows (unset: not limited)"""


class RateLimit(RateLimitValues):
    """The run-wide limit of the default endpoint, and of roles with their own endpoint
    (memprobe/llm/rate_limit.py; docs/cluster.md for a cluster)."""

    roles: dict[Role, RateLimitValues] = Field(default_factory=dict)
    """per-role limits, for a role with its own `base_url`"""
    share: float = Field(default=1.0, gt=0, le=1)
    """this machine's share of every limit: 1 on one machine; the cluster executors set it
    (rules/common.smk) so that the shares of all nodes add up to the limit"""
    provider_signals: bool = True
    """slow down on the provider's `Retry-After` and `x-ratelimit-remaining-*` headers"""
    state_dir: str | None = None
    """where the shared buckets live (unset: `rate_limit/` beside `llm.cache_dir`)"""


class Price(_Strict):
    """USD per million tokens of one model."""

    input: float = Field(ge=0)
    """USD per million prompt tokens"""
    output: float = Field(ge=0)
    """USD per million completion tokens"""


class Progress(_Strict):
    """The run's progress line (memprobe/report/progress.py)."""

    interval_s: float = Field(default=60.0, ge=0)
    """seconds between progress lines (0: only the summary at the end)"""
    prices: dict[str, Price] = Field(default_factory=dict)
    """USD per million input/output tokens per model, for the money so far"""


class LLMSettings(_Strict):
    backend: str
    """`openai` (any OpenAI-compatible endpoint), `local` (the run's llama.cpp server) or `fake`
    (schema-valid replies, for tests and dry runs)"""
    base_url: str | None = None
    """the endpoint (required for `openai` unless every role sets its own)"""
    model: str = "gpt-5.4-mini"
    """the model name sent to the endpoint"""
    api_key_env: str = "OPENAI_API_KEY"
    """the variable the key is read from at call time (never stored)"""
    max_tokens: int | None = Field(default=None, ge=1)
    """reply bound per call (unset: the server's)"""
    timeout_s: float = Field(default=120.0, gt=0)
    """total time one request may take"""
    max_attempts: int = Field(default=5, ge=1, description="transport tries per request")
    max_reasks: int = Field(default=2, ge=0, description="re-asks after an invalid reply")
    resample_invalid: int = Field(
        default=2, ge=0, description="identical re-sends of an empty/non-JSON/off-schema reply"
    )
    backoff_s: float = Field(default=1.0, ge=0)
    """the first retry's wait (doubling; a Retry-After wins)"""
    concurrency: int = Field(default=4, ge=1, description="parallel calls inside one job")
    cache_dir: str = ".cache/llm"
    """the content-addressed response cache"""
    roles: dict[Role, RoleOverride] = Field(default_factory=dict)
    """per-role endpoint settings over the defaults above (roles: `memprobe.vocabulary.ROLES`)"""
    local: LocalModel = Field(default_factory=LocalModel)
    rate_limit: RateLimit = Field(default_factory=RateLimit)
    """the endpoint's requests and tokens per minute, one budget for every job of the run"""

    _url = field_validator("base_url")(_endpoint_url)

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, v: str) -> str:
        if v not in backends.names():
            raise ValueError(backends.unknown(v))
        return v

    @model_validator(mode="after")
    def _role_limits_need_own_endpoint(self) -> LLMSettings:
        for role in self.rate_limit.roles:
            over = self.roles.get(role)
            if not (over and over.base_url and over.base_url != self.base_url):
                raise KeyedError(
                    f"llm.rate_limit.roles.{role}",
                    f"rate_limit.roles.{role}: role {role} has no endpoint of its own "
                    f"(llm.roles.{role}.base_url); the default endpoint's limit is "
                    "llm.rate_limit.requests_per_minute / tokens_per_minute",
                )
        return self

    @model_validator(mode="after")
    def _openai_needs_base_url(self) -> LLMSettings:
        if self.backend == "openai" and not self.base_url:
            missing = [r for r in ROLES if not (self.roles.get(r) and self.roles[r].base_url)]
            if missing:
                raise ValueError(
                    "llm.base_url: required for backend 'openai' "
                    "(e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1)"
                )
        return self


class Compat(_Strict):
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


class SlotFill(_Strict):
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


class JudgeCalibration(_Strict):
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


class JudgeSettings(_Strict):
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


class TaskGen(_Strict):
    max_edits: int = Field(default=3, ge=0, description="editor rounds before a task is marked")
    leak_threshold: float = Field(default=0.5, ge=0, le=1)
    """share of a target's words in its task that flags a leak"""


class BankGen(_Strict):
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


class SimulatorSettings(_Strict):
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


class PromptFiles(_Strict):
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


class MemT(_Strict):
    """Mem-T (the memt system): where its policy model is served and how its store behaves.

    Either ``endpoint`` (an OpenAI-compatible server already running Mem-T) or ``serve: true``
    with ``model_path``, in which case the memt jobs start ``vllm serve`` themselves
    (memprobe/serving/vllm_server.py) from the separate env ``envs/vllm.yaml``.
    """

    endpoint: str | None = None
    """a running Mem-T server (OpenAI-compatible)"""
    serve: bool = False
    """each memt job starts `vllm serve` on its GPU instead"""
    model_path: str | None = None
    """local Mem-T-4B weights (`memt.serve`)"""
    model: str = Field(default="Mem-T-4B", description="served model name")
    api_key_env: str = "MEMT_API_KEY"
    """the variable holding the Mem-T server's key"""
    temperature: float = Field(default=0.7, ge=0.0, le=2.0)  # the release's hard-coded value
    """Mem-T's sampling temperature (the release's)"""
    # No cap by default: the release sent none, and a formation reply with many tool calls
    # cut at a cap loses its last calls; the server's context still bounds every reply.
    max_tokens: int | None = Field(default=None, ge=1)
    """reply bound per Mem-T call (unset: none, as in the release)"""
    max_tool_steps: int = Field(default=6, ge=1)
    """ReAct steps per search"""
    update_topk: int = Field(default=3, ge=1)
    """similar items shown to an update call"""
    search_topk: int = Field(default=5, ge=1, description="items per search_* tool call")
    embedder: str | None = Field(
        default=None,
        description="sentence-transformers path or name, local (unset: the packaged MiniLM)",
    )
    # None: the embedder's own maximum (bge-m3: 8192 tokens, as the release's Chroma used it).
    embedder_max_seq_length: int | None = Field(default=None, ge=16)
    """tokens the embedder reads per text (unset: the model's own; bge-m3 8192)"""
    # Persona and summary documents: "turns" repeats every source turn after the content, as
    # the release's did; "ids" keeps the ids of their source turns only (a smaller dump).
    profile_sources: Literal["ids", "turns"] = "ids"
    """persona/summary documents: `ids` of their source turns, or every source `turns` (the
    release)"""
    # The vector of a stored item: true embeds its document (content + source block, as the
    # release's Chroma did); false embeds only the distilled content.
    embed_source: bool = False
    """embed each item's document (content + source turns, the release) instead of its content"""
    # ReAct requests stop at the closing tool-call tag (the release's stop sequence).
    stop_at_tool_call: bool = False
    """ReAct requests stop at `</tool_call>` (the release's stop sequence)"""
    # A ReAct tool result shows each item's source turns not shown before in that search (the
    # release's did); false: id and content only.
    observation_sources: bool = False
    """a ReAct tool result shows each item's source turns not shown before (the release)"""
    vllm_bin: str = Field(default="vllm", description="the vllm executable of envs/vllm.yaml")
    vllm_args: list[str] = Field(default_factory=list)
    """extra `vllm serve` flags"""
    startup_timeout_s: float = Field(default=900.0, gt=0)
    """how long the served model may take to be healthy"""
    # SLURM placement of the memt jobs; set here, not per rule, so only memt jobs get a GPU.
    gpu_model: str | None = None
    """SLURM GPU model of the memt jobs (`--gpus=MODEL:1`)"""
    cpus_per_gpu: int | None = Field(default=None, ge=1)
    """SLURM `--cpus-per-gpu` of the memt jobs"""

    _url = field_validator("endpoint")(_endpoint_url)

    @field_validator("vllm_args")
    @classmethod
    def _no_reserved_args(cls, v: list[str]) -> list[str]:
        for arg in v:
            if arg.split("=", 1)[0] in _VLLM_RESERVED:
                raise ValueError(
                    f"{arg.split('=', 1)[0]} is set by memprobe (a Unix socket in a private "
                    "directory, the run's key through VLLM_API_KEY); remove it"
                )
        return v

    @model_validator(mode="after")
    def _serve_needs_model(self) -> MemT:
        if self.serve and not self.model_path:
            raise ValueError("model_path: required when memt.serve is true")
        return self


class WriterSettings(_Strict):
    """One system's ``writer`` role settings, over ``llm.roles.writer`` and the ``llm`` defaults.

    The write path's model is part of the system (the release ran mem0 on gpt-4o-mini and
    A-Mem at temperature 1.0), so it is set with the system, not in the global role table.
    """

    model: str | None = None
    """the write path's model"""
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    """the write path's temperature"""
    max_tokens: int | None = Field(default=None, ge=1)
    """the write path's reply bound"""


class SystemSettings(_Strict):
    """``system_settings``: one block per system that declares a settings model
    (memprobe/registry/systems.py), validated by that model; memt keeps its own ``memt`` block."""

    if TYPE_CHECKING:  # the fields are the registered systems' (system_settings_model)

        def __getattr__(self, name: str) -> Any: ...


@cache
def system_settings_model() -> type[SystemSettings]:
    """The ``system_settings`` model of the systems registered in this environment."""
    fields: dict[str, Any] = {
        name: (s.settings, Field(default_factory=s.settings))
        for name, s in registry.specs().items()
        if s.settings is not None
    }
    return create_model("SystemSettings", __base__=SystemSettings, **fields)


_SYSTEM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


# Under results_dir, next to the runs: the users that runs with the same settings share
# (memprobe/workflow/paths.py). No run may take its name.
SHARED_USERS_DIR = "users"
# The default run has no name: its files go to results_dir and logs/ themselves (PyPSA-Eur's
# empty run name), so `snakemake results/table2.csv` builds it. A named run's folder must be
# none of its entries (memprobe/workflow/run_names.py checks at DAG load).
DEFAULT_RUN = ""


class RunSettings(_Strict):
    """``run``: the run's name (PyPSA-Eur's ``run: name``), which namespaces its files.

    A named run's results, usage ledgers and report go to ``<results_dir>/<name>/``, its logs
    to ``logs/<name>/``; the default run, unnamed, writes into ``<results_dir>/`` and ``logs/``
    (docs/runs.md). Two configs under different names never share a file but the response
    cache and the users generated with the same settings.
    """

    name: str = Field(
        default=DEFAULT_RUN,
        description="the run's folder under results_dir and under logs/; empty: the default "
        "run, in results_dir and logs/ themselves (docs/runs.md)",
    )

    @field_validator("name")
    @classmethod
    def _one_folder(cls, v: str) -> str:
        if v and not _SYSTEM_NAME.fullmatch(v):
            raise ValueError(f"{v!r}: expected one folder name (letters, digits, _ . -)")
        if v == SHARED_USERS_DIR:
            raise ValueError(
                f"{v!r} is the folder of the shared users ({SHARED_USERS_DIR}/); choose another"
            )
        return v


class Users(_Strict):
    source: Literal["generate", "release"] = "generate"
    """`generate` the users, or take the release's banks and tasks (`release`)"""
    release_dir: str | None = None
    """a checkout of the authors' release (`users.source: release`)"""


class Release(_Strict):
    """Reading the authors' release (memprobe/release/importer.py, rules/release.smk,
    config/release.yaml).

    ``users.source: release`` imports banks and tasks only (any system can then be run on the
    release's users); ``import_runs: true`` also imports every run artifact (episodes, memories,
    preference, slot-fill/judge, attribution, the Stage 0 oracle) so the tables rebuild the
    paper's numbers.
    """

    import_runs: bool = False
    """also import the release's run records, so the tables rebuild the paper's"""
    runs: dict[str, str] = Field(
        default_factory=dict, description="system -> release run id (default <system>_pooled_50)"
    )
    bank_file: str = "Deeppersona/data/user_memory_banks_pooled_final.json"
    """the bank file inside the release"""
    tasks_dir: str = "benchmark_data/CustomTasksPooledFinal"
    """the task folder inside the release"""
    pool_file: str = "Deeppersona/data/dimension_pool.json"
    """the dimension pool inside the release (`bank.pool: release`)"""


class RolloutSettings(_Strict):
    """``rollout``: where a rollout's conversations come from.

    ``replay: <release run>`` (with ``users.source: release``) drives each memory system
    through that run's recorded episodes (``history/<run>/``) instead of the simulator and
    the assistant: the same write hooks, no simulator, assistant or preference call
    (memprobe/protocol/simulation.py ``replay``; docs/fidelity.md, "Replay").
    """

    replay: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    """a release run (`history/<run>`) whose recorded conversations every system is replayed
    through instead of the simulator and assistant (`users.source: release`; docs/fidelity.md,
    "Replay")"""


def _default_dims() -> dict[Any, int]:  # keys: the categories (the field's Literal)
    return dict(zip(CATEGORIES, (7, 7, 7, 5, 5), strict=True))


class Config(_Strict):
    seed: int = 0
    """the run's seed (personas, sampling seeds, bootstrap CIs)"""
    n_users: int = Field(ge=1)
    """simulated users, `user_001` on"""
    run: RunSettings = Field(default_factory=RunSettings)
    """the run's name, which namespaces its files (docs/runs.md)"""
    results_dir: str = "results"
    """where every artifact goes"""
    users: Users = Field(default_factory=Users)
    # Top-level alias of users.release_dir, so `--config release_dir=PATH` works.
    release_dir: str | None = None
    """`users.release_dir` as a top-level key, so `--config release_dir=PATH` works"""
    release: Release = Field(default_factory=Release)
    dims_per_category: dict[Category, int] = Field(default_factory=_default_dims)
    """targets per category"""
    systems: list[str] = Field(min_length=1)
    """the memory systems run: `nomem`, `longctx_full`, `amem`, `mem0`, `memt`, plugins"""
    modes: list[Mode] = Field(default_factory=lambda: list(MODES))
    """the access modes scored"""

    @field_validator("modes")
    @classmethod
    def _distinct_modes(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"a mode is listed twice ({v})")
        return v

    top_k: int | list[int] = 5
    """items per search in retrieve mode (a list runs a sweep; the first is the tables')"""
    max_turns: int = Field(default=25, ge=1)
    """turn cap per episode"""
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    """where the conversations come from: `replay: <release run>` replays its recorded episodes"""
    compat: Compat = Field(default_factory=Compat)
    tasks: TaskGen = Field(default_factory=TaskGen)
    bank: BankGen = Field(default_factory=BankGen)
    simulator: SimulatorSettings = Field(default_factory=SimulatorSettings)
    prompts: PromptFiles = Field(default_factory=PromptFiles)
    slotfill: SlotFill = Field(default_factory=SlotFill)
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    memt: MemT = Field(default_factory=MemT)
    system_settings: SerializeAsAny[SystemSettings] = Field(
        default_factory=dict, validate_default=True
    )
    protocol: Literal["paper", "release_compat"] | None = None
    """`paper` or `release_compat`: every key of that protocol must hold its value after the
    merge, `--config` included (config/paper.yaml, config/release-compat.yaml)"""
    llm: LLMSettings
    progress: Progress = Field(default_factory=Progress)
    """the run's progress line: how often, and the prices for its money figure"""

    @field_validator("dims_per_category")
    @classmethod
    def _counts(cls, v: dict[str, int]) -> dict[str, int]:
        for cat, n in v.items():
            if n < 0:
                raise ValueError(f"{cat}: count must be >= 0 (got {n})")
        full = _default_dims() | v
        if sum(full.values()) == 0:
            raise ValueError("at least one dimension is needed")
        return {c: full[c] for c in CATEGORIES}

    @field_validator("systems")
    @classmethod
    def _known_systems(cls, v: list[str], info: ValidationInfo) -> list[str]:
        known = registry.system_names()
        # An import of the release's run records needs the names only, not the systems.
        release = info.data.get("release")
        importing = release is not None and release.import_runs
        for name in v:
            if not _SYSTEM_NAME.fullmatch(name):  # it becomes a path component and a wildcard
                raise ValueError(f"system name {name!r}: expected letters, digits, _ . -")
            if name not in known and not importing:
                raise ValueError(registry.unknown(name))
        if len(set(v)) != len(v):
            raise ValueError("a system is listed twice")
        return v

    @field_validator("system_settings", mode="before")
    @classmethod
    def _own_settings(cls, v: Any) -> SystemSettings:
        # Each system's block is checked by its own model (a plugin's too), under its own key.
        return system_settings_model().model_validate(v)

    @model_validator(mode="before")
    @classmethod
    def _release_dir_alias(cls, raw: Any) -> Any:
        if isinstance(raw, dict) and raw.get("release_dir"):
            users = dict(raw.get("users") or {})
            users["release_dir"] = raw["release_dir"]
            raw = {**raw, "users": users}
        return raw

    @model_validator(mode="after")
    def _release_needs_dir(self) -> Config:
        if self.release.import_runs and self.users.source != "release":
            raise ValueError("release.import_runs: needs users.source: release")
        if self.release.import_runs and len(self.ks) > 1:
            # The sweep's rules probe and score our own stores; imported runs bring only the
            # release's scored retrievals (DAG build would stop on their missing judge files).
            raise ValueError(
                f"top_k: a sweep (top_k: {self.top_k}) needs runs of our own; "
                "release.import_runs imports scored runs only: set one top_k"
            )
        if self.users.source == "release" and not self.users.release_dir:
            raise ValueError(
                "users.release_dir: required when users.source is 'release' "
                "(or pass --config release_dir=PATH)"
            )
        if self.rollout.replay and (self.users.source != "release" or self.release.import_runs):
            raise KeyedError(
                "rollout.replay",
                "rollout.replay: replays the release's recorded conversations: needs "
                "users.source: release (their users, banks and tasks) and runs of our own "
                "(not release.import_runs)",
            )
        if self.bank.pool == "release" and not self.users.release_dir:
            raise KeyedError(
                "bank.pool",
                "bank.pool: 'release' reads the release's dimension pool: set "
                "users.release_dir (or pass --config release_dir=PATH)",
            )
        return self

    def pool_path(self) -> str | None:
        """The release's pool file (``bank.pool: release``); None for our own pool."""
        if self.bank.pool != "release" or not self.users.release_dir:
            return None
        return str(Path(self.users.release_dir) / self.release.pool_file)

    @model_validator(mode="after")
    def _calibration_release(self) -> Config:
        cal = self.judge.calibration
        if cal.source == "release":
            cal.release_dir = cal.release_dir or self.users.release_dir
            if not cal.release_dir:
                raise ValueError(
                    "judge.calibration.release_dir: required when judge.calibration.source "
                    "is 'release' (or pass --config release_dir=PATH)"
                )
        return self

    @model_validator(mode="after")
    def _memt_reachable(self) -> Config:
        serving = self.memt.endpoint or self.memt.serve or self.release.import_runs
        if "memt" in self.systems and not serving:
            raise ValueError(
                "memt: set memt.endpoint (a running Mem-T server) or memt.serve: true "
                "with memt.model_path"
            )
        return self

    def served_context(self, role: str) -> int | None:
        """The context our own server gives ``role`` (None: an endpoint we do not start)."""
        own = self.llm.roles.get(role)  # type: ignore[call-overload]
        if self.llm.backend == "local" and not (own and own.base_url):
            return self.llm.local.context_tokens
        return None

    @model_validator(mode="after")
    def _slotfill_budget(self) -> Config:
        served = self.served_context("slotfill")
        budget = self.slotfill.context_tokens
        if budget is None:
            self.slotfill.context_tokens = served or DEFAULT_CONTEXT_TOKENS
        elif served is not None and budget > served:
            raise ValueError(
                f"slotfill.context_tokens: {budget} is more than the {served} tokens the "
                "slotfill model is served with (llm.local.context_tokens); lower it or unset it"
            )
        return self

    @model_validator(mode="after")
    def _holds_protocol(self) -> Config:
        if self.protocol is None:
            return self
        values = self.model_dump()
        for key, want in PROTOCOLS[self.protocol].items():
            got: Any = values
            for part in key.split("."):
                got = got[part]
            if got != want:
                raise KeyedError(
                    key,
                    f"{key}: is {got!r} but protocol: {self.protocol} needs {want!r} "
                    "(the protocol's config file sets it; another layer or --config changed it)",
                )
        # Role overrides merge in from any layer below and cannot be removed by the paper
        # config: sampling settings of a role are protocol, so none may be overridden.
        for role, over in self.llm.roles.items():
            if over.temperature is not None or over.max_tokens is not None:
                raise ValueError(
                    f"llm.roles.{role}: protocol: paper fixes each role's temperature and "
                    "max_tokens (a per-system writer setting goes under system_settings)"
                )
        return self

    @field_validator("top_k")
    @classmethod
    def _positive_k(cls, v: int | list[int]) -> int | list[int]:
        ks = v if isinstance(v, list) else [v]
        if not ks or any(k < 1 for k in ks):
            raise ValueError(f"every k must be >= 1 (got {v})")
        if len(set(ks)) != len(ks):
            raise ValueError(f"a k is listed twice ({v})")
        return v

    # -- derived values used by the rules -------------------------------------------------
    @property
    def run_dir(self) -> str:
        """Where this run's results, ledgers and report go: results_dir itself for the default
        run, else its folder there (docs/runs.md)."""
        return f"{self.results_dir}/{self.run.name}" if self.run.name else self.results_dir

    @property
    def logs_dir(self) -> str:
        """Where this run's job and server logs go."""
        return f"logs/{self.run.name}" if self.run.name else "logs"

    @property
    def ks(self) -> list[int]:
        return self.top_k if isinstance(self.top_k, list) else [self.top_k]

    @property
    def primary_k(self) -> int:
        """The k that retrieve mode (and every B_retrieve cell) uses."""
        return self.ks[0]

    @property
    def user_ids(self) -> list[str]:
        return [f"user_{i:03d}" for i in range(1, self.n_users + 1)]

    @property
    def n_dims(self) -> int:
        return sum(self.dims_per_category.values())


def _format_error(err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"] if p != "[key]")
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "missing":
        msg = "required key is missing"
    elif first["type"] == "extra_forbidden":
        msg = "unknown key"
    elif first["type"] == "literal_error" and "[key]" in [str(p) for p in first["loc"]]:
        # the allowed keys of this mapping (categories, roles, ...), as pydantic lists them
        expected = first["ctx"]["expected"].replace("'", "")
        msg = f"unknown key; expected one of {expected}"
    return f"{loc}: {msg}" if loc else msg


def _plugins_registered() -> None:
    """Load the systems and backends (built-ins and plugins) first: a plugin that cannot
    register is its own one-line error, not blamed on a config file."""
    try:
        registry.specs()
        backends.targets()
    except RegistryError as err:
        raise ConfigError(str(err)) from None


# Keys that were renamed: the old name stops the run in one line that names the new one.
RENAMED = {"k": "top_k"}  # Snakemake's --config takes only keys of two or more letters


def _no_renamed_key(raw: dict[str, Any], source: str) -> None:
    for old, new in RENAMED.items():
        if old in raw:
            raise ConfigError(
                f"{source}: {old}: renamed {new} (write {new}: {raw[old]}, or --config {new}=...)"
            )


def load_config(raw: dict[str, Any], source: str = "config") -> Config:
    """Validate Snakemake's merged config dict; raise ConfigError with one line."""
    _no_renamed_key(raw, source)
    _plugins_registered()
    try:
        return Config.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(f"{source}: {_format_error(err)}") from None


def set_dotted(tree: dict[str, Any], key: str, value: Any) -> None:
    """``tree[a][b][c] = value`` for ``key`` ``a.b.c``, making the mappings on the way."""
    *parents, leaf = key.split(".")
    for part in parents:
        tree = tree.setdefault(part, {})
    tree[leaf] = value


def snakemake_merge(layers: list[dict[str, Any]]) -> dict[str, Any]:
    """The layers merged exactly as Snakemake merges a workflow's config.

    ``layers[0]`` is the Snakefile's ``configfile:``, the rest are Snakemake's overwrite
    config (each ``--configfile``, then ``--config``), folded together first. Snakemake's own
    ``update_config`` does every step, in its order (``ConfigSettings`` and
    ``Workflow.configfile``), so a case a hand-written merge would decide otherwise (``{}``
    over a scalar keeps the scalar) comes out as the jobs see it.
    """
    from snakemake.utils import update_config

    overwrite: dict[str, Any] = {}
    for layer in layers[1:]:
        update_config(overwrite, copy.deepcopy(layer))
    merged = copy.deepcopy(overwrite)
    if layers:
        update_config(merged, copy.deepcopy(layers[0]))
    update_config(merged, copy.deepcopy(overwrite))
    return merged


def _holds(raw: dict[str, Any], loc: tuple[Any, ...]) -> bool:
    node: Any = raw
    for part in loc:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """One YAML config file as a mapping, or a ConfigError naming the file (and the line).

    Every reader of a config file comes here (the Snakefile, ``memprobe estimate``,
    ``memprobe local-server``): a key twice in one mapping is refused (YAML loaders keep the
    last one silently, so half of a config would be ignored without a word), and so is a key
    that is not a plain value (a list or mapping as a key)."""
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.load(fh, Loader=_strict_loader(str(path))) or {}  # noqa: S506  safe
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        why = " ".join(str(err).split())  # YAML's messages span lines
        raise ConfigError(f"{path}: cannot read a YAML config ({why})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config file must be a mapping of keys")
    return data


def _strict_loader(path: str) -> Any:
    """A SafeLoader that refuses repeated and unhashable mapping keys in ``path``."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def mapping(loader: Loader, node: yaml.MappingNode) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node)
            where = f"{path}: line {key_node.start_mark.line + 1}"
            try:
                repeated = key in seen
            except TypeError:
                raise ConfigError(
                    f"{where}: a key must be a plain value, not a {type(key).__name__}"
                ) from None
            if repeated:
                raise ConfigError(f"{where}: key {key!r} appears twice")
            seen.add(key)
        return loader.construct_mapping(node)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return Loader


def load_layers(layers: list[tuple[str, dict[str, Any]]]) -> Config:
    """Validate config layers (name, mapping) merged as Snakemake merges them
    (``snakemake_merge``: the first is the Snakefile's configfile)."""
    return validate(snakemake_merge([layer for _, layer in layers]), layers)


def validate(raw: dict[str, Any], layers: list[tuple[str, dict[str, Any]]]) -> Config:
    """Validate the merged config ``raw`` (Snakemake's own, at DAG load: the very dict the
    jobs read), blaming an error on the layer that set the offending key.

    A ``--config`` typo is blamed on ``--config``, not on config/config.yaml; a missing key
    or a cross-key rule names them all.
    """
    for name, layer in layers:
        _no_renamed_key(layer, name)
    _plugins_registered()
    try:
        return Config.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        loc = tuple(p for p in first["loc"] if p != "[key]" and not isinstance(p, int))
        cause = (first.get("ctx") or {}).get("error")
        if isinstance(cause, KeyedError):  # a whole-config check that names one key
            loc = tuple(cause.key.split("."))
        setters = [name for name, layer in layers if loc and _holds(layer, loc)]
        source = setters[-1] if setters else " + ".join(name for name, _ in layers)
        raise ConfigError(f"{source}: {_format_error(err)}") from None


# The Snakefile's ``configfile:``: the base every --configfile and --config is layered on.
WORKFLOW_CONFIG = "config/config.yaml"


def load_files(configfiles: list[str], overrides: dict[str, Any] | None = None) -> Config:
    """The run's config as ``snakemake --configfile FILE... --config ...`` builds it, for the
    commands that read it outside Snakemake (``memprobe estimate``, ``local-server``, ...)."""
    files = [WORKFLOW_CONFIG, *(f for f in configfiles if f != WORKFLOW_CONFIG)]
    layers = [(f, read_config_file(f)) for f in files]
    if overrides:
        layers.append(("--config", overrides))
    return load_layers(layers)


def role_settings(cfg: Config, role: str) -> dict[str, Any]:
    """The effective endpoint settings of one role (defaults + per-role override).

    A role sent to its own ``base_url`` sends only its own ``api_key_env``: the default key
    belongs to the default endpoint, and never goes anywhere else.
    """
    over = cfg.llm.roles.get(role) or RoleOverride()  # type: ignore[call-overload]
    own_endpoint = over.base_url is not None and over.base_url != cfg.llm.base_url
    default_key = None if own_endpoint else cfg.llm.api_key_env
    return {
        "base_url": over.base_url or cfg.llm.base_url,
        "model": over.model or cfg.llm.model,
        "api_key_env": over.api_key_env if over.api_key_env is not None else default_key,
        "temperature": (
            over.temperature if over.temperature is not None else DEFAULT_TEMPERATURE[role]
        ),
        "max_tokens": over.max_tokens or local_bound(cfg, role) or cfg.llm.max_tokens,
    }


def local_bound(cfg: Config, role: str) -> int | None:
    """The local server's own reply bound for ``role``, where that server answers it."""
    if role == "assistant" and cfg.served_context(role) is not None:
        return cfg.llm.local.assistant_max_tokens
    return None
