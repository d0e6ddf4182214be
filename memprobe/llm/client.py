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
- A content-addressed response cache (``memprobe.llm.cache``) and a usage ledger
  (``memprobe.llm.ledger``). API keys are read from the environment at call time and never enter a
  cache key, a ledger row, a log line or an error message.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ValidationError

from memprobe.config import Config, role_settings
from memprobe.llm.cache import ResponseCache, request_key
from memprobe.llm.ledger import Ledger
from memprobe.serving import local_server
from memprobe.testing.fake_responder import completion_body, fake_content

if TYPE_CHECKING:
    import httpx2
    import openai

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
R = TypeVar("R")
log = logging.getLogger("memprobe")

LOCAL_SERVER_FILE = "local_server.json"  # written by the local backend's launcher


class LLMError(RuntimeError):
    """A call that could not produce a valid reply within its budget."""


Paid = list[str]  # the cache keys a structured chain paid for: dropped if the chain fails


def _fake_transport() -> httpx2.MockTransport:
    import httpx2

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content or b"{}")
        return httpx2.Response(200, json=completion_body(body, fake_content(body)))

    return httpx2.MockTransport(handler)


def _local_endpoint(cfg: Config) -> tuple[str, str]:
    """The run's llama.cpp server (memprobe/serving/local_server.py) and a stable cache identity.

    The server's port changes every run, so cache keys use the served model's sha256 instead;
    a server given by URL alone has no identity to key a cache on, so it is refused.
    """
    state = Path(cfg.llm.cache_dir).parent / LOCAL_SERVER_FILE
    env = os.environ.get(local_server.BASE_URL_ENV)
    if env:
        model_id = os.environ.get(local_server.MODEL_ID_ENV)
        if not model_id:
            raise LLMError(
                f"{local_server.BASE_URL_ENV} is set without {local_server.MODEL_ID_ENV}: "
                "set it to the sha256 of the served GGUF (the cache is keyed on the weights)"
            )
        return env, f"local-gguf:{model_id}"
    try:
        data = json.loads(state.read_text())
        return data["base_url"], f"local-gguf:{data['model_sha256']}"
    except (FileNotFoundError, KeyError, json.JSONDecodeError):
        raise LLMError(
            "llm.backend 'local': no local model server is running "
            "(start the run with `snakemake`, which launches it, or `memprobe local-server`)"
        ) from None


def _strip_fence(text: str) -> str:
    # String operations, not a regex: `\s*(.*?)\s*` backtracks quadratically on long
    # whitespace replies.
    text = text.strip()
    if len(text) >= 6 and text.startswith("```") and text.endswith("```"):
        inner = text[3:-3]
        return (inner[4:] if inner.startswith("json") else inner).strip()
    return text


def _short(err: BaseException) -> str:
    return f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"


_BEARER = re.compile(r"(?i)(bearer\s+|api[_-]?key[\"'=:\s]+)[^\s\"',}]+")
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@")


def redact(text: str, *secrets: str | None) -> str:
    """Blank out secrets, bearer tokens and URL credentials (``user:pass@``) in a text."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    text = _URL_USERINFO.sub(lambda m: m.group(1) + "***@", text)
    return _BEARER.sub(lambda m: m.group(1) + "***", text)


def is_loopback(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host == "localhost" or host == "::1" or host.startswith("127.")


# Transient by HTTP semantics; every other 4xx fails the same way on a resend.
RETRY_STATUS = frozenset({408, 409, 429})
MAX_TOKENS_RAISES = 2  # a structured reply cut at max_tokens is asked again at 2x, then 4x
_SURROGATE = re.compile("[\ud800-\udfff]")


class Reply(NamedTuple):
    content: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str


def _retryable(status: int) -> bool:
    return status in RETRY_STATUS or status >= 500


def _clean(content: str) -> str:
    """A lone surrogate (an emoji cut at max_tokens) cannot be encoded: replace it."""
    return _SURROGATE.sub("\ufffd", content)


@functools.cache
def _deadline_stream() -> type:
    """A response body stream that gives up once the call's total time is spent: httpx's
    timeouts are per read, so a server dripping bytes would otherwise hold a call (and the
    lock on its key) for ever. Built on first use: httpx2 (openai's HTTP library) is slow
    to import."""
    import httpx2

    class Deadline(httpx2.SyncByteStream):
        def __init__(self, stream: httpx2.SyncByteStream, deadline: float) -> None:
            self._stream = stream
            self._deadline = deadline

        def __iter__(self) -> Iterator[bytes]:
            for chunk in self._stream:
                if time.monotonic() > self._deadline:
                    raise httpx2.ReadTimeout("the reply took longer than llm.timeout_s")
                yield chunk

        def close(self) -> None:
            self._stream.close()

    return Deadline


def _http_client(base_url: str, timeout_s: float, fake: bool) -> httpx2.Client:
    """The transport of one client: a total deadline per call; proxies never for loopback."""
    import openai

    def start(request: httpx2.Request) -> None:
        request.extensions["memprobe_deadline"] = time.monotonic() + timeout_s

    def bound(response: httpx2.Response) -> None:
        deadline = response.request.extensions.get("memprobe_deadline")
        if deadline is not None:
            response.stream = _deadline_stream()(response.stream, deadline)

    kwargs: dict[str, Any] = {"transport": _fake_transport()} if fake else {}
    return openai.DefaultHttpxClient(
        trust_env=not is_loopback(base_url),  # HTTP(S)_PROXY must not see loopback traffic
        event_hooks={"request": [start], "response": [bound]},
        **kwargs,
    )


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
        # openai and httpx2 are imported on first use (~1 s of start-up): a job whose calls
        # are all cached or skipped, and the table jobs, never pay for them.
        import openai

        if self._client is None:
            # The key is read here, at use, and held only by the openai client object. A
            # role without api_key_env sends none: a key goes only where it was configured.
            key = os.environ.get(self._api_key_env) if self._api_key_env else None
            if key and urlsplit(self.base_url).scheme != "https" and not is_loopback(self.base_url):
                raise LLMError(
                    f"role {self.role}: refusing to send {self._api_key_env} over plain http to "
                    f"{redact(self.base_url)} (use https, or api_key_env: '' for no key)"
                )
            self._client = openai.OpenAI(
                base_url=self.base_url,
                api_key=key or "no-key",
                max_retries=0,  # retries are ours: they must honour Retry-After and be logged
                timeout=self._timeout_s,
                http_client=_http_client(self.base_url, self._timeout_s, self.backend == "fake"),
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
            req[self._limit_field()] = self.max_tokens
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
    ) -> Reply:
        """One finished reply for ``req``: transport faults are retried (``max_attempts``),
        invalid replies re-sampled (``resample_invalid``), both with the identical request.
        A structured reply cut at max_tokens is returned unvalidated: ``_pay`` raises the limit.
        """
        import httpx2
        import openai

        last: BaseException | None = None
        attempt = invalid = 0
        while True:
            attempt += 1
            try:
                reply = self._ask(req, key, reask)
            except openai.APIStatusError as err:
                if not _retryable(err.status_code):  # a resend would fail the same way
                    raise LLMError(
                        f"role {self.role}{where}: endpoint rejected the request: {self._safe(err)}"
                    ) from None
                last = err
            except (openai.APIError, httpx2.HTTPError, InvalidReply, ValueError) as err:
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
                        self.role, where, _problem(err), invalid, self.resample_invalid,
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

    def _ask(self, req: dict[str, Any], key: str, reask: int) -> Reply:
        """One request; a delivered reply without content is on the bill, then an error."""
        resp = self.client.chat.completions.create(**req)
        if not hasattr(resp, "choices"):  # a 200 whose body was not a completion
            raise InvalidReply("the endpoint's reply is not a chat completion")
        choice = resp.choices[0] if resp.choices else None
        usage = resp.usage
        reply = Reply(
            _clean((choice.message.content if choice else None) or ""),
            (usage.prompt_tokens if usage else 0) or 0,
            (usage.completion_tokens if usage else 0) or 0,
            (choice.finish_reason if choice else None) or "",
        )
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
        import openai

        if isinstance(err, openai.APIStatusError):
            headers = err.response.headers
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

    def _call(
        self,
        messages: list[dict[str, str]],
        schema: type[BaseModel] | None,
        sample: int,
        where: str,
        reask: int,
        paid: Paid | None = None,
    ) -> str:
        req = self._request(messages, schema, sample)
        key = request_key({"base_url": self.cache_endpoint, "sample": sample, **req})
        replayed = self._replay(key, reask)
        if replayed is not None:
            return replayed
        self.client  # noqa: B018  built (openai imported) before the clock starts
        if self.cache is None:
            return self._pay(req, key, where, reask, schema, paid)
        # A parallel job sending the same request holds its lock until the reply is cached:
        # wait for it and replay, don't pay twice.
        asked = time.monotonic()
        with self.cache.inflight(key):
            # A replay after a wait records the wait as its latency: this job's time on the
            # call, which the benchmark's critical path counts like a paid call's.
            replayed = self._replay(key, reask, waited=time.monotonic() - asked)
            if replayed is not None:
                return replayed
            return self._pay(req, key, where, reask, schema, paid)

    def _pay(
        self,
        req: dict[str, Any],
        key: str,
        where: str,
        reask: int,
        schema: type[BaseModel] | None,
        paid: Paid | None,
    ) -> str:
        start = time.monotonic()
        validate = _validator(schema) if schema is not None else None
        reply = self._send(req, where, key, reask, validate)
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
            reply = self._send(req, where, key, reask, validate)
        latency = time.monotonic() - start
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
        """Ask for a reply validating against ``schema`` (and ``check``), re-asking on failure.

        The replies of a chain that succeeded stay cached, so a rerun replays the same chain;
        those of a chain that failed are dropped, so a rerun asks again instead of failing
        the same way for ever.
        """
        convo = list(messages)
        loc = _where(where)
        raw = ""
        paid: Paid = []
        for reask in range(self.max_reasks + 1):
            raw = self._call(convo, schema, sample, loc, reask, paid)
            try:
                value = schema.model_validate(json.loads(_strip_fence(raw)))
                if check is not None:
                    check(value)
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
                continue
            return value
        if self.cache is not None:
            for key in paid:
                self.cache.discard(key)
        raise LLMError(
            redact(
                f"role {self.role}{loc}: no valid reply after {self.max_reasks + 1} tries; "
                f"last problem: {problem}; raw reply: {raw[:300]!r}",
                os.environ.get(self._api_key_env or ""),
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
        s["api_key_env"] = local_server.KEY_ENV  # the run's own key, never an API key
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
