"""The one LLM client every stage uses.

- Roles map to endpoints (config ``llm`` + ``llm.roles`` overrides); every backend speaks the
  OpenAI chat-completions API through the ``openai`` package.
- Structured output: a pydantic model per JSON role, sent as ``response_format`` json_schema
  (schema name = role), validated on return, re-asked a bounded number of times.
- Transport retries with exponential backoff on 429/5xx/timeouts, honouring Retry-After.
  A delivered reply that is empty, not JSON, or breaks the schema is re-sampled with the
  identical request (``llm.resample_invalid`` times, never cached) before a re-ask with feedback:
  transient garbage from an endpoint then converges to the reply a clean run would have got,
  while a model that keeps answering wrongly still gets told what was wrong.
- A content-addressed response cache (``memprobe.cache``) and a usage ledger
  (``memprobe.ledger``). API keys are read from the environment at call time and never enter a
  cache key, a ledger row, a log line or an error message.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from memprobe.cache import ResponseCache, request_key
from memprobe.config import Config, role_settings
from memprobe.fake_responder import completion_body, fake_content
from memprobe.ledger import Ledger

if TYPE_CHECKING:
    import httpx
    import openai

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
R = TypeVar("R")
log = logging.getLogger("memprobe")

LOCAL_SERVER_FILE = "local_server.json"  # written by the local backend's launcher


class LLMError(RuntimeError):
    """A call that could not produce a valid reply within its budget."""


def _fake_transport() -> httpx.MockTransport:
    import httpx

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        return httpx.Response(200, json=completion_body(body, fake_content(body)))

    return httpx.MockTransport(handler)


def _local_base_url(cfg: Config) -> str:
    return _local_endpoint(cfg)[0]


def _local_endpoint(cfg: Config) -> tuple[str, str]:
    """The run's llama.cpp server (memprobe/local_server.py) and a stable cache identity.

    The server's port changes every run, so cache keys use the served model's sha256 instead.
    """
    state = Path(cfg.llm.cache_dir).parent / LOCAL_SERVER_FILE
    env = os.environ.get("MEMPROBE_LOCAL_BASE_URL")
    if env:
        return env, f"local-gguf:{os.environ.get('MEMPROBE_LOCAL_MODEL_ID') or env}"
    try:
        data = json.loads(state.read_text())
        return data["base_url"], f"local-gguf:{data.get('model_sha256') or data['base_url']}"
    except (FileNotFoundError, KeyError, json.JSONDecodeError):
        raise LLMError(
            "llm.backend 'local': no local model server is running "
            "(start the run with `snakemake`, which launches it, or `memprobe local-server`)"
        ) from None


def _strip_fence(text: str) -> str:
    text = text.strip()
    match = re.match(r"^```(?:json)?\s*(.*?)\s*```$", text, re.S)
    return match.group(1) if match else text


def _short(err: BaseException) -> str:
    return f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"


_BEARER = re.compile(r"(?i)(bearer\s+|api[_-]?key[\"'=:\s]+)[^\s\"',}]+")


def redact(text: str, *secrets: str | None) -> str:
    """Blank out secrets (and anything that looks like a bearer token) in an error text."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return _BEARER.sub(lambda m: m.group(1) + "***", text)


class InvalidReply(ValueError):
    """A delivered reply that does not parse or validate (raised by ``_send``'s validator)."""


class LLM:
    """A client bound to one role, one endpoint, one cache and one ledger."""

    def __init__(
        self,
        role: str,
        *,
        backend: str,
        base_url: str,
        model: str,
        api_key_env: str,
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
        self.cache_endpoint = base_url  # the endpoint's identity in cache keys
        self._api_key_env = api_key_env
        self._timeout_s = timeout_s
        self._client: openai.OpenAI | None = None

    # -- transport ------------------------------------------------------------------------
    @property
    def client(self) -> openai.OpenAI:
        # openai and httpx are imported on first use (~1 s of start-up): a job whose calls
        # are all cached or skipped, and the table jobs, never pay for them.
        import httpx
        import openai

        if self._client is None:
            # The key is read here, at use, and held only by the openai client object.
            key = os.environ.get(self._api_key_env) or "no-key"
            if self.backend == "local":
                key = "no-key"  # our own loopback server: never hand it a real API key
            kwargs: dict[str, Any] = {}
            if self.backend == "fake":
                kwargs["http_client"] = httpx.Client(transport=_fake_transport())
            self._client = openai.OpenAI(
                base_url=self.base_url,
                api_key=key,
                max_retries=0,  # retries are ours: they must honour Retry-After and be logged
                timeout=self._timeout_s,
                **kwargs,
            )
        return self._client

    def _request(
        self, messages: list[dict[str, str]], schema: type[BaseModel] | None, sample: int
    ) -> dict[str, Any]:
        req: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "seed": self.seed + sample,
        }
        if self.max_tokens:
            reasoning = re.match(r"^(gpt-5|o[134])", self.model)
            req["max_completion_tokens" if reasoning else "max_tokens"] = self.max_tokens
        if schema is not None:
            req["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": self.role,
                    "schema": schema.model_json_schema(),
                    "strict": False,
                },
            }
        return req

    def _send(
        self,
        req: dict[str, Any],
        where: str,
        key: str = "",
        reask: int = 0,
        validate: Callable[[str], Any] | None = None,
    ) -> tuple[str, int, int]:
        """One finished reply for ``req``: transport faults are retried (``max_attempts``),
        invalid replies re-sampled (``resample_invalid``), both with the identical request."""
        import httpx
        import openai

        last: BaseException | None = None
        attempt = invalid = 0
        while True:
            attempt += 1
            try:
                resp = self.client.chat.completions.create(**req)
                if not hasattr(resp, "choices"):  # a 200 whose body was not a completion
                    raise InvalidReply("the endpoint's reply is not a chat completion")
                content = resp.choices[0].message.content if resp.choices else None
                if not content:
                    raise InvalidReply("empty reply content")
                usage = resp.usage
                p_tok = usage.prompt_tokens if usage else 0
                c_tok = usage.completion_tokens if usage else 0
            except (openai.BadRequestError, openai.AuthenticationError) as err:
                # Not transient: a retry would fail the same way.
                raise LLMError(
                    f"role {self.role}{where}: endpoint rejected the request: {self._safe(err)}"
                ) from None
            except (openai.APIError, httpx.HTTPError, InvalidReply, ValueError) as err:
                last = err
                if attempt >= self.max_attempts:
                    break
                wait = self._delay(err, attempt)
                log.warning(
                    "role %s%s: attempt %d/%d failed (%s); retrying in %.1fs",
                    self.role, where, attempt, self.max_attempts, self._safe(err), wait,
                )  # fmt: skip
                time.sleep(wait)
                continue
            if validate is not None and invalid < self.resample_invalid:
                try:
                    validate(content)
                except ValueError as err:
                    # Paid for but unusable: recorded, never cached, asked again unchanged.
                    invalid += 1
                    attempt -= 1  # a delivered reply is not a transport failure
                    self._record(key, p_tok, c_tok, 0.0, cached=False, reask=reask, ok=False)
                    log.warning(
                        "role %s%s: invalid reply (%s); re-sampling %d/%d",
                        self.role, where, _problem(err), invalid, self.resample_invalid,
                    )  # fmt: skip
                    continue
            return content, p_tok, c_tok
        raise LLMError(
            f"role {self.role}{where}: no reply from {self.base_url} after "
            f"{self.max_attempts} attempt(s): {self._safe(last) if last else 'unknown error'}"
        )

    def _safe(self, err: BaseException) -> str:
        return redact(_short(err), os.environ.get(self._api_key_env))

    def _record(
        self, key: str, p_tok: int, c_tok: int, latency: float, *, cached: bool, reask: int, ok=True
    ) -> None:
        self.ledger.record(
            role=self.role,
            model=self.model,
            prompt_tokens=p_tok,
            completion_tokens=c_tok,
            latency_s=latency,
            cached=cached,
            reask=reask,
            key=key,
            status="ok" if ok else "invalid",
        )

    def _delay(self, err: BaseException, attempt: int) -> float:
        import openai

        if isinstance(err, openai.APIStatusError):
            headers = err.response.headers
            try:
                if headers.get("retry-after-ms"):
                    return min(float(headers["retry-after-ms"]) / 1000, 60.0)
                if headers.get("retry-after"):
                    return min(float(headers["retry-after"]), 60.0)
            except ValueError:
                pass  # an HTTP-date Retry-After: fall back to our own backoff
        return min(self.backoff_s * 2 ** (attempt - 1), 30.0)

    def _call(
        self,
        messages: list[dict[str, str]],
        schema: type[BaseModel] | None,
        sample: int,
        where: str,
        reask: int,
    ) -> str:
        req = self._request(messages, schema, sample)
        key = request_key({"base_url": self.cache_endpoint, "sample": sample, **req})
        replayed = self._replay(key, reask)
        if replayed is not None:
            return replayed
        self.client  # noqa: B018  built (openai imported) before the clock starts
        if self.cache is None:
            return self._pay(req, key, where, reask, schema)
        # A parallel job sending the same request holds its lock until the reply is cached:
        # wait for it and replay, don't pay twice.
        asked = time.monotonic()
        with self.cache.inflight(key):
            # A replay after a wait records the wait as its latency: this job's time on the
            # call, which the benchmark's critical path counts like a paid call's.
            replayed = self._replay(key, reask, waited=time.monotonic() - asked)
            if replayed is not None:
                return replayed
            return self._pay(req, key, where, reask, schema)

    def _pay(
        self,
        req: dict[str, Any],
        key: str,
        where: str,
        reask: int,
        schema: type[BaseModel] | None,
    ) -> str:
        start = time.monotonic()
        validate = _validator(schema) if schema is not None else None
        content, p_tok, c_tok = self._send(req, where, key, reask, validate)
        latency = time.monotonic() - start
        # Cache first, ledger second: a kill between the two loses a ledger row, never pays
        # twice for a reply that a rerun can replay.
        if self.cache:
            self.cache.put(
                key, {"content": content, "prompt_tokens": p_tok, "completion_tokens": c_tok}
            )
        self._record(key, p_tok, c_tok, latency, cached=False, reask=reask)
        return content

    def _replay(self, key: str, reask: int, waited: float = 0.0) -> str | None:
        hit = self.cache.get(key) if self.cache else None
        if hit is None:
            return None
        self._record(
            key,
            hit.get("prompt_tokens", 0),
            hit.get("completion_tokens", 0),
            round(waited, 3) if waited >= 0.001 else 0.0,
            cached=True,
            reask=reask,
        )
        return hit["content"]

    # -- public API -----------------------------------------------------------------------
    def text(self, messages: list[dict[str, str]], *, sample: int = 0, where: str = "") -> str:
        return self._call(messages, None, sample, _where(where), 0).strip()

    def json(
        self,
        messages: list[dict[str, str]],
        schema: type[M],
        *,
        check: Callable[[M], None] | None = None,
        sample: int = 0,
        where: str = "",
    ) -> M:
        """Ask for a reply validating against ``schema`` (and ``check``), re-asking on failure."""
        convo = list(messages)
        loc = _where(where)
        raw = ""
        for reask in range(self.max_reasks + 1):
            raw = self._call(convo, schema, sample, loc, reask)
            try:
                value = schema.model_validate(json.loads(_strip_fence(raw)))
                if check is not None:
                    check(value)
                return value
            except (json.JSONDecodeError, ValidationError, ValueError) as err:
                problem = _problem(err)
                convo = [
                    *convo,
                    {"role": "assistant", "content": raw},
                    {
                        "role": "user",
                        "content": f"That reply is not acceptable: {problem}. "
                        "Answer again with only the corrected JSON object.",
                    },
                ]
        raise LLMError(
            redact(
                f"role {self.role}{loc}: no valid reply after {self.max_reasks + 1} tries; "
                f"last problem: {problem}; raw reply: {raw[:300]!r}",
                os.environ.get(self._api_key_env),
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
        return schema.model_validate(json.loads(_strip_fence(content)))

    return validate


def _where(where: str) -> str:
    return f" ({where})" if where else ""


def _problem(err: BaseException) -> str:
    if isinstance(err, ValidationError):
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "reply"
        return f"{loc}: {first['msg']}"
    if isinstance(err, json.JSONDecodeError):
        return f"not valid JSON ({err.msg})"
    return str(err)


def client_for(
    role: str,
    cfg: Config,
    *,
    ledger_path: str | os.PathLike[str] | None = None,
    job: str = "",
) -> LLM:
    """Build the client of one role from the validated config."""
    s = role_settings(cfg, role)
    backend = cfg.llm.backend
    cache_endpoint = None
    if backend == "fake":
        base_url = "http://fake.invalid/v1"
    elif backend == "local" and not s["base_url"]:
        base_url, cache_endpoint = _local_endpoint(cfg)
    else:
        base_url = s["base_url"]
    llm = LLM(
        role,
        backend=backend,
        base_url=base_url,
        model=s["model"],
        api_key_env=s["api_key_env"],
        temperature=s["temperature"],
        max_tokens=s["max_tokens"],
        seed=cfg.seed,
        cache=ResponseCache(cfg.llm.cache_dir),
        ledger=Ledger(ledger_path, job=job),
        timeout_s=cfg.llm.timeout_s,
        max_attempts=cfg.llm.max_attempts,
        max_reasks=cfg.llm.max_reasks,
        backoff_s=cfg.llm.backoff_s,
        concurrency=cfg.llm.concurrency,
        resample_invalid=cfg.llm.resample_invalid,
    )
    if cache_endpoint:
        llm.cache_endpoint = cache_endpoint
    return llm
