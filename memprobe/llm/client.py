"""The one LLM client every stage uses.

- Roles map to endpoints (config ``llm`` + ``llm.roles`` overrides) through the run's backend;
  each endpoint is served by one provider per job (``memprobe.llm.providers``).
- Structured output: a pydantic model per JSON role, sent as ``response_format`` json_schema
  (schema name = role), validated on return, re-asked a bounded number of times.
- Transport retries with exponential backoff on 429/5xx/timeouts, honouring Retry-After.
  A delivered reply that is empty, not JSON, or breaks the schema is re-sampled with the
  identical request (``llm.resample_invalid`` times, never cached) before a re-ask with feedback:
  transient garbage from an endpoint then converges to the reply a clean run would have got,
  while a model that keeps answering wrongly still gets told what was wrong.
- When the re-asks are spent, ``json()`` hands what it got (:class:`Exhausted`) to the stage's
  ``stand_in`` function, whose deterministic stand-in the stage records; without one it fails.
- A job's ``attempt`` moves every request's seed (``seed + sample + ATTEMPT_STRIDE *
  attempt``): the attempt after a failed one draws new samples where nothing is cached, while
  whatever an earlier attempt got is replayed (a call looks up attempts ``attempt`` .. 0).
- A content-addressed response cache (``memprobe.llm.cache``) and a usage ledger
  (``memprobe.llm.ledger``). API keys are read from the environment at call time and never enter a
  cache key, a ledger row, a log line or an error message.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from memprobe.config.schema import Config, role_settings
from memprobe.llm import cpu_cost, providers, rate_limit
from memprobe.llm.cache import ResponseCache, request_key
from memprobe.llm.ledger import Ledger
from memprobe.llm.providers import (
    Endpoint,
    InvalidReply,
    LLMError,
    Provider,
    ProviderError,
    Reply,
    endpoint_for,
    is_loopback,
    provider,
    redact,
)
from memprobe.llm.rate_limit import RateLimiter
from memprobe.llm.salvage import Exhausted, problem_of, strip_fence

__all__ = ["LLM", "LLMError", "Reply", "client_for", "is_loopback", "redact"]

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
R = TypeVar("R")
log = logging.getLogger("memprobe")

Paid = list[str]  # the cache keys a structured chain paid for: dropped if the chain fails


def _short(err: BaseException) -> str:
    return f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"


ATTEMPT_STRIDE = 1000  # seed offset per job attempt: far above any sample index


# Transient by HTTP semantics; every other 4xx fails the same way on a resend.
RETRY_STATUS = frozenset({408, 409, 429})
MAX_TOKENS_RAISES = 2  # a structured reply cut at max_tokens is asked again at 2x, then 4x
# Finish reasons of a reply that is no answer, whatever its content: the endpoint failed while
# generating it, or filtered it (OpenAI, Azure, vLLM's "abort"). Asked again like a transport
# failure; "length" is a reply cut at its bound, kept for free text (Table 5 counts it).
UNFINISHED = frozenset({"error", "content_filter", "abort"})


def _retryable(status: int) -> bool:
    return status in RETRY_STATUS or status >= 500


class LLM:
    """A client bound to one role, one endpoint (through its provider), one cache and one
    ledger."""

    def __init__(
        self,
        role: str,
        *,
        backend: str,
        base_url: str,
        model: str,
        api_key_env: str | None,
        temperature: float,
        max_tokens: int | None,
        seed: int,
        cache: ResponseCache | None,
        ledger: Ledger,
        timeout_s: float = 120.0,
        max_attempts: int = 5,
        max_reasks: int = 2,
        backoff_s: float = 1.0,
        concurrency: int = 4,
        resample_invalid: int = 2,
        cache_identity: str | None = None,
        attempt: int = 0,
        uds: str | None = None,
        limiter: RateLimiter | None = None,
    ) -> None:
        self.role = role
        self.backend = backend
        self.base_url = base_url
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        self.cache = cache
        self.ledger = ledger
        self.max_attempts = max_attempts
        self.max_reasks = max_reasks
        self.backoff_s = backoff_s
        self.concurrency = concurrency
        self.resample_invalid = resample_invalid
        self.attempt = attempt  # the job's attempt (memprobe/workflow/attempts.py)
        self._api_key_env = api_key_env
        self.endpoint = Endpoint(
            backend, base_url, cache_identity or base_url, api_key_env, timeout_s, uds
        )
        self.cache_endpoint = self.endpoint.identity  # the endpoint's identity in cache keys
        self.provider: Provider = provider(self.endpoint)  # shared by the job's roles on it
        self._schemas: dict[type[BaseModel], dict[str, Any]] = {}
        self.limiter = limiter  # the run's rate limit of this endpoint (llm.rate_limit)
        self._waits = threading.local()  # seconds this thread's call spent waiting for it

    # -- transport ------------------------------------------------------------------------
    @property
    def client(self) -> object:
        """What the provider sends through (an ``openai`` client), built on first use: once
        per job and endpoint."""
        try:
            return self.provider.connect()
        except ProviderError as err:
            raise LLMError(f"role {self.role}: {err}") from None

    def _request(
        self,
        messages: list[dict[str, str]],
        schema: type[BaseModel] | None,
        sample: int,
        attempt: int = 0,
        stop: list[str] | None = None,
    ) -> dict[str, Any]:
        req: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "seed": self.seed + sample + ATTEMPT_STRIDE * attempt,
        }
        if self.max_tokens:
            req[self._limit_field()] = self.max_tokens
        if stop:
            req["stop"] = list(stop)
        if schema is not None:
            req["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": self.role,
                    "schema": self._schema(schema),
                    "strict": False,
                },
            }
        return req

    def _schema(self, schema: type[BaseModel]) -> dict[str, Any]:
        # Built once per schema and client: pydantic rebuilds the JSON schema on every call.
        if schema not in self._schemas:
            self._schemas[schema] = schema.model_json_schema()
        return self._schemas[schema]

    def _with_retries(
        self,
        req: dict[str, Any],
        where: str,
        key: str = "",
        reask: int = 0,
        validate: Callable[[str], Any] | None = None,
    ) -> Reply:
        """One finished reply for ``req``: transport faults are retried (``max_attempts``),
        invalid replies re-sampled (``resample_invalid``), both with the identical request.
        A structured reply cut at max_tokens is returned unvalidated: ``_with_token_limit``
        raises the limit.
        """
        status_errors = providers.status_errors()
        retried: tuple[type[BaseException], ...] = (
            *providers.transport_errors(),
            InvalidReply,
            ValueError,
        )
        last: BaseException | None = None
        attempt = invalid = 0
        while True:
            attempt += 1
            try:
                reply = self._one_request(req, key, reask)
            except status_errors as err:
                if not _retryable(getattr(err, "status_code", 0)):  # a resend fails the same way
                    raise LLMError(
                        f"role {self.role}{where}: endpoint rejected the request: {self._safe(err)}"
                    ) from None
                last = err
            except retried as err:
                last = err
            else:
                if validate is None or reply.finish_reason == "length":
                    return reply
                if invalid >= self.resample_invalid:
                    return reply
                try:
                    validate(reply.content)
                    return reply
                except ValueError as err:
                    # Paid for but unusable: recorded, never cached, asked again unchanged.
                    invalid += 1
                    attempt -= 1  # a delivered reply is not a transport failure
                    self._record(key, reply, 0.0, cached=False, reask=reask, status="invalid")
                    log.warning(
                        "role %s%s: invalid reply (%s); re-sampling %d/%d",
                        self.role, where, problem_of(err), invalid, self.resample_invalid,
                    )  # fmt: skip
                    continue
            if attempt >= self.max_attempts:
                break
            wait = self._delay(last, attempt)
            log.warning(
                "role %s%s: attempt %d/%d failed (%s); retrying in %.1fs",
                self.role, where, attempt, self.max_attempts, self._safe(last), wait,
            )  # fmt: skip
            time.sleep(wait)
        raise LLMError(
            f"role {self.role}{where}: no reply from {redact(self.base_url)} after "
            f"{self.max_attempts} attempt(s): {self._safe(last) if last else 'unknown error'}"
        )

    def _one_request(self, req: dict[str, Any], key: str, reask: int) -> Reply:
        """One request, inside the run's rate limit; a delivered reply without content is on
        the bill, then an error."""
        embeddings = "input" in req  # LLM.embed's request; every other one is a chat completion
        send = self.provider.embed if embeddings else self.provider.complete
        limiter = self.limiter
        if limiter is None:
            reply = send(req)
        else:
            taken, waited = limiter.acquire(req)
            try:
                reply = send(req, limiter.observe)
            except providers.status_errors() as err:
                limiter.observe(err.response.headers, err.status_code)  # type: ignore[attr-defined]
                raise
            finally:
                limiter.landed()
            waited += limiter.settle(taken, reply.prompt_tokens, reply.completion_tokens)
            self._waits.s = getattr(self._waits, "s", 0.0) + waited
        if reply.finish_reason in UNFINISHED:
            # Billed, never cached (a replay would hand every later run the broken text).
            self._record(key, reply, 0.0, cached=False, reask=reask, status="unfinished")
            raise InvalidReply(f"the reply did not finish (finish_reason {reply.finish_reason})")
        if not reply.content:
            # Paid for (a reasoning model can spend all of max_tokens thinking): billed, retried.
            self._record(key, reply, 0.0, cached=False, reask=reask, status="empty")
            raise InvalidReply(f"empty reply content (finish_reason {reply.finish_reason or '?'})")
        return reply

    def _safe(self, err: BaseException) -> str:
        return redact(_short(err), os.environ.get(self._api_key_env or ""))

    def _record(
        self, key: str, reply: Reply, latency: float, *, cached: bool, reask: int, status="ok"
    ) -> None:
        self.ledger.record(
            role=self.role,
            model=self.model,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            latency_s=latency,
            cached=cached,
            reask=reask,
            key=key,
            status=status,
            finish_reason=reply.finish_reason,
        )

    def _delay(self, err: BaseException | None, attempt: int) -> float:
        if isinstance(err, providers.status_errors()):
            headers = getattr(err, "response").headers  # noqa: B009  an APIStatusError's
            for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
                if not headers.get(name):
                    continue
                try:
                    wait = float(headers[name]) / scale
                except ValueError:
                    break  # an HTTP-date Retry-After: fall back to our own backoff
                if math.isfinite(wait) and wait >= 0:  # "-1" or "nan": our own backoff
                    return min(wait, 60.0)
                break
        return min(self.backoff_s * 2 ** (attempt - 1), 30.0)

    @cpu_cost.counted
    def _through_cache(
        self,
        req: dict[str, Any],
        schema: type[BaseModel] | None,
        sample: int,
        where: str,
        reask: int,
        paid: Paid | None = None,
    ) -> tuple[str, str]:
        """The reply's content and how it came: ``paid`` or ``replayed``.

        ``req`` carries this attempt's seed. What this job's earlier attempts got for the same
        request is replayed (newest first); only a request no attempt has a reply for is paid.
        """
        key = self._key(req, sample)
        replayed = self._replay(key, reask)
        for earlier in range(self.attempt - 1, -1, -1) if "seed" in req else ():
            if replayed is not None:
                break
            seed = req["seed"] - ATTEMPT_STRIDE * (self.attempt - earlier)
            replayed = self._replay(self._key({**req, "seed": seed}, sample), reask)
        if replayed is not None:
            return replayed, "replayed"
        self.client  # noqa: B018  built before the clock starts
        if self.cache is None:
            return self._with_token_limit(req, key, where, reask, schema, paid), "paid"
        # A parallel job sending the same request holds its lock until the reply is cached:
        # wait for it and replay, don't pay twice.
        asked = time.monotonic()
        with self.cache.inflight(key, self.endpoint.timeout_s):
            # A replay after a wait records the wait as its latency: this job's time on the
            # call, which the benchmark's critical path counts like a paid call's.
            replayed = self._replay(key, reask, waited=time.monotonic() - asked)
            if replayed is not None:
                return replayed, "replayed"
            return self._with_token_limit(req, key, where, reask, schema, paid), "paid"

    def _with_token_limit(
        self,
        req: dict[str, Any],
        key: str,
        where: str,
        reask: int,
        schema: type[BaseModel] | None,
        paid: Paid | None,
    ) -> str:
        start = time.monotonic()
        self._waits.s = 0.0
        validate = _validator(schema) if schema is not None else None
        reply = self._with_retries(req, where, key, reask, validate)
        raises = 0
        while validate is not None and reply.finish_reason == "length":
            # A structured reply cut at max_tokens is broken JSON: ask again with a higher
            # limit; the reply is cached under the original request's key.
            spent = time.monotonic() - start
            self._record(key, reply, spent, cached=False, reask=reask, status="cut")
            field = self._limit_field()
            limit = req.get(field)
            if not limit or raises == MAX_TOKENS_RAISES:
                raise LLMError(
                    f"role {self.role}{where}: the structured reply was cut at max_tokens="
                    f"{limit or '(unset: the server default)'} (finish_reason length); raise "
                    f"llm.max_tokens or llm.roles.{self.role}.max_tokens"
                )
            raises += 1
            req = {**req, field: limit * 2}
            reply = self._with_retries(req, where, key, reask, validate)
        # The call's own time: a wait for the rate limit is the run's pace, not the endpoint's.
        latency = time.monotonic() - start - self._waits.s
        # Cache first, ledger second: a kill between the two loses a ledger row, never pays
        # twice for a reply that a rerun can replay. A failed write is still on the bill.
        try:
            if self.cache is not None:
                self.cache.put(key, reply._asdict())
                if paid is not None:
                    paid.append(key)
        except (OSError, UnicodeError) as err:
            raise LLMError(
                f"role {self.role}{where}: a paid reply could not be written to the response "
                f"cache {getattr(self.cache, 'root', '')} ({type(err).__name__}: {err}); it is "
                "on the ledger"
            ) from None
        finally:
            self._record(key, reply, latency, cached=False, reask=reask)
        return reply.content

    def _key(self, req: dict[str, Any], sample: int) -> str:
        return request_key({"base_url": self.cache_endpoint, "sample": sample, **req})

    def _limit_field(self) -> str:
        reasoning = re.match(r"^(gpt-5|o[134])", self.model)
        return "max_completion_tokens" if reasoning else "max_tokens"

    def _replay(self, key: str, reask: int, waited: float = 0.0) -> str | None:
        hit = self.cache.get(key) if self.cache else None
        if hit is None:
            return None
        reply = Reply(
            hit["content"],
            hit.get("prompt_tokens", 0),
            hit.get("completion_tokens", 0),
            hit.get("finish_reason", ""),
        )
        latency = round(waited, 3) if waited >= 0.001 else 0.0
        self._record(key, reply, latency, cached=True, reask=reask)
        return reply.content

    # -- public API -----------------------------------------------------------------------
    def text(
        self,
        messages: list[dict[str, str]],
        *,
        sample: int = 0,
        where: str = "",
        stop: list[str] | None = None,
    ) -> str:
        """A free-text reply; ``stop``: sequences at which the endpoint ends it (not included)."""
        req = self._request(messages, None, sample, self.attempt, stop)
        return self._through_cache(req, None, sample, _where(where), 0).strip()

    def embed(
        self, texts: list[str], *, dimensions: int | None = None, where: str = ""
    ) -> list[list[float]]:
        """One embedding per text from the endpoint's ``/embeddings``: cached, retried and on
        the ledger like every chat call (the client of :meth:`embedder`)."""
        req: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if dimensions:
            req["dimensions"] = dimensions
        return json.loads(self._through_cache(req, None, 0, _where(where), 0))

    def embedder(self, model: str) -> LLM:
        """An embeddings client for ``model`` on this client's endpoint: the same key (and
        plain-http rule), cache, ledger (role ``embedder``), timeouts and retries."""
        twin = copy.copy(self)
        twin.role, twin.model, twin._schemas = "embedder", model, {}
        return twin

    def json(
        self,
        messages: list[dict[str, str]],
        schema: type[M],
        *,
        check: Callable[[M], None] | None = None,
        sample: int = 0,
        where: str = "",
        stand_in: Callable[[Exhausted], M] | None = None,
    ) -> M:
        """Ask for a reply validating against ``schema`` (and ``check``), re-asking on failure.

        The replies of a chain that succeeded stay cached, so a rerun replays the same chain.
        When the re-asks are spent, ``stand_in`` (the stage's deterministic stand-in) gets what
        the chain got and its value is returned; the chain stays cached, so a replay stands in
        the same way. Without ``stand_in`` the chain's replies are dropped, so a rerun asks
        again instead of failing the same way for ever, and the call fails.
        """
        paid: Paid = []
        try:
            return self._reask_chain(messages, schema, check, sample, where, paid, stand_in)
        except Exception:
            # Failed however it ended (no valid reply, a cut reply, a rejected request, retries
            # spent): its earlier paid steps must not replay on the rerun.
            if self.cache is not None:
                for key in paid:
                    self.cache.discard(key)
            raise

    def _reask_chain(
        self,
        messages: list[dict[str, str]],
        schema: type[M],
        check: Callable[[M], None] | None,
        sample: int,
        where: str,
        paid: Paid,
        stand_in: Callable[[Exhausted], M] | None,
    ) -> M:
        convo = list(messages)
        loc = _where(where)
        raw = problem = ""
        spent = Exhausted(self.role, where, "")
        for reask in range(self.max_reasks + 1):
            req = self._request(convo, schema, sample, self.attempt)
            raw = self._through_cache(req, schema, sample, loc, reask, paid)
            spent.replies.append(raw)
            try:
                value = schema.model_validate(json.loads(strip_fence(raw)))
                if check is not None:
                    check(value)
            except (json.JSONDecodeError, ValidationError, ValueError) as err:
                problem = problem_of(err)
                convo = [
                    *convo,
                    {"role": "assistant", "content": raw},
                    {
                        "role": "user",
                        "content": f"That reply is not acceptable: {problem}. "
                        "Answer again with only the corrected JSON object.",
                    },
                ]
                continue
            return value
        secret = os.environ.get(self._api_key_env or "")
        if stand_in is not None:
            spent.problem = problem
            log.warning(
                "%s",
                redact(
                    f"role {self.role}{loc}: no valid reply after {self.max_reasks + 1} tries "
                    f"(last problem: {problem}); using the stage's stand-in",
                    secret,
                ),
            )
            return stand_in(spent)
        raise LLMError(
            redact(
                f"role {self.role}{loc}: no valid reply after {self.max_reasks + 1} tries; "
                f"last problem: {problem}; raw reply: {raw[:300]!r}",
                secret,
            )
        )

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """Run independent calls concurrently (bounded by ``llm.concurrency``), keep order."""
        items = list(items)
        if self.concurrency <= 1 or len(items) <= 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(items))) as pool:
            return list(pool.map(fn, items))


def _validator(schema: type[BaseModel]) -> Callable[[str], Any]:
    def validate(content: str) -> Any:
        return schema.model_validate(json.loads(strip_fence(content)))

    return validate


def _where(where: str) -> str:
    return f" ({where})" if where else ""


def client_for(
    role: str,
    cfg: Config,
    *,
    ledger_path: str | os.PathLike[str] | None = None,
    job: str = "",
    attempt: int = 0,
    endpoint: Endpoint | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> LLM:
    """Build the client of one role from the validated config (``attempt``: the job's).

    ``endpoint`` and ``overrides`` (model, temperature, max_tokens) send the role to a model
    a system serves itself (Mem-T's policy, on the writer's cache and ledger): the same
    retries, re-asks, concurrency and rate limiter as every other client.
    """
    cpu_cost.client_built()
    s = role_settings(cfg, role) | dict(overrides or {})
    if endpoint is None:
        try:
            endpoint = endpoint_for(cfg, s)
        except ProviderError as err:
            raise LLMError(f"role {role}: {err}") from None
    return LLM(
        role,
        backend=endpoint.backend,
        base_url=endpoint.base_url,
        model=s["model"],
        api_key_env=endpoint.api_key_env,
        temperature=s["temperature"],
        max_tokens=s["max_tokens"],
        seed=cfg.seed,
        cache=ResponseCache(cfg.llm.cache_dir),
        ledger=Ledger.shared(ledger_path, job=job),
        timeout_s=endpoint.timeout_s,
        max_attempts=cfg.llm.max_attempts,
        max_reasks=cfg.llm.max_reasks,
        backoff_s=cfg.llm.backoff_s,
        concurrency=cfg.llm.concurrency,
        resample_invalid=cfg.llm.resample_invalid,
        cache_identity=endpoint.identity,
        attempt=attempt,
        uds=endpoint.uds,
        limiter=rate_limit.for_endpoint(cfg, role, endpoint, s["base_url"]),
    )
