"""The ``llm`` block: the run's backend, its endpoint and roles, its rate limit."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from pydantic import Field, create_model, field_validator, model_validator

from memprobe.config.base import KeyedError, Strict, endpoint_url
from memprobe.registry import RegistryError, backends
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
    (memprobe/workflow/cluster.py) so that the shares of all nodes add up to the limit"""
    provider_signals: bool = True
    """slow down on the provider's `Retry-After` and `x-ratelimit-remaining-*` headers"""
    state_dir: str | None = None
    """where the shared buckets live (unset: `rate_limit/` beside `llm.cache_dir`)"""


class LLMSettings(Strict):
    """``llm``: the run's backend, its endpoint and the roles' settings over it; each backend
    with settings of its own (its ``Backend.settings``) has them under ``llm.<backend>``."""

    backend: str
    """`openai` (any OpenAI-compatible endpoint), `local` (the run's llama.cpp server) or `fake`
    (schema-valid replies, for tests and dry runs); a plugin's, by its entry point's name"""
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
    max_stand_in_share: float = Field(default=0.5, ge=0, le=1)
    """the share of a stage's calls that may end in a stand-in (re-asks spent): past it the
    run stops before its tables (an endpoint that answers garbage); 1 never stops"""
    backoff_s: float = Field(default=1.0, ge=0)
    """the first retry's wait (doubling; a Retry-After wins)"""
    concurrency: int = Field(default=4, ge=1, description="parallel calls inside one job")
    cache_dir: str = ".cache/llm"
    """the content-addressed response cache"""
    roles: dict[Role, RoleOverride] = Field(default_factory=dict)
    """per-role endpoint settings over the defaults above (roles: `memprobe.vocabulary.ROLES`)"""
    rate_limit: RateLimit = Field(default_factory=RateLimit)
    """the endpoint's requests and tokens per minute, one budget for every job of the run"""

    _url = field_validator("base_url")(endpoint_url)

    if TYPE_CHECKING:  # the backends' own blocks (llm_settings_model): llm.local, ...

        def __getattr__(self, name: str) -> Any: ...

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
    def _base_url_where_needed(self) -> LLMSettings:
        if backends.load(self.backend).needs_base_url and not self.base_url:
            missing = [r for r in ROLES if not (self.roles.get(r) and self.roles[r].base_url)]
            if missing:
                raise ValueError(
                    f"llm.base_url: required for backend {self.backend!r} "
                    "(e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1)"
                )
        return self


@cache
def llm_settings_model() -> type[LLMSettings]:
    """The ``llm`` model of the backends registered here: a block per backend with settings."""
    fields: dict[str, Any] = {}
    for name in backends.names():
        model = backends.load(name).settings
        if model is None:
            continue
        if name in LLMSettings.model_fields:
            raise RegistryError(
                f"{backends.targets()[name][1]}: its settings would be llm.{name}, a key of the "
                "llm block itself; rename the backend"
            )
        fields[name] = (model, Field(default_factory=model))
    return create_model("LLMSettings", __base__=LLMSettings, __doc__=LLMSettings.__doc__, **fields)


def with_backend_settings(value: Any) -> Any:
    """``llm`` validated by the model that holds the registered backends' blocks."""
    return value if isinstance(value, LLMSettings) else llm_settings_model().model_validate(value)
