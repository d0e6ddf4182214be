"""LLM backends behind one interface: a provider turns one chat-completions request into a reply.

Every backend speaks the OpenAI chat-completions API, sent through the ``openai`` package's
client. A ``Backend`` says where a role's endpoint is, what the response cache keys its replies
on and which provider sends them, and what the run needs to know about it (its settings, rate
limit, preflight, server, capacity); the registry (memprobe/registry/backends.py) names each
one and imports it on first use, so this module knows none of them:

| backend | endpoint | cache identity | where |
|---|---|---|---|
| ``openai`` | ``llm.base_url`` (or the role's override) | the URL | llm/openai_backend.py |
| ``local`` | the run's llama.cpp server | the GGUF's sha256 | serving/local_server.py |
| ``fake`` | in-process, the fake responder | the fake URL | testing/fake_backend.py |

(The memt system serves its own policy, an OpenAI-compatible vLLM endpoint keyed on the
checkpoint's digest: agents/memt.py.)

``Endpoint`` says where; ``provider(endpoint)`` gives the job's one provider for it: every
role on the same endpoint shares one HTTP client and its connection pool, so a job builds a
client (with its TLS context) once, not once per role, and reuses its connections across
calls. Retries, validation, the cache and the ledger are the caller's (memprobe/llm/client.py):
a provider only sends.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, cast
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel

from memprobe.config.schema import Config
from memprobe.llm import cpu_cost
from memprobe.registry import backends

if TYPE_CHECKING:
    import httpx2
    import openai

_SURROGATE = re.compile("[\ud800-\udfff]")


class LLMError(RuntimeError):
    """A call that could not produce a valid reply within its budget."""


class ProviderError(LLMError):
    """An endpoint that cannot be used as configured (no server, a key over plain http)."""


class InvalidReply(ValueError):
    """A delivered reply that is not a usable completion (or does not validate)."""


class Reply(NamedTuple):
    content: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str


@dataclass(frozen=True)
class Endpoint:
    """Where a role's requests go, and what the cache keys their replies on."""

    backend: str  # its name in the registry (memprobe/registry/backends.py)
    base_url: str
    identity: str  # the endpoint in cache keys: its URL, or the served weights
    api_key_env: str | None = None
    timeout_s: float = 120.0
    uds: str | None = None  # a Unix socket that reaches base_url (the served Mem-T)


Observe = Callable[[Mapping[str, str], int], None]  # a response's headers and status


class Provider(Protocol):
    endpoint: Endpoint

    def connect(self) -> object:
        """Build what sending needs (an HTTP client), once per job and endpoint, and return it:
        called before a paid call's clock starts. ``ProviderError`` where it cannot be used."""
        ...

    def complete(self, req: dict[str, Any], observe: Observe | None = None) -> Reply:
        """Send one chat-completions request: ``status_errors()`` for an HTTP error status,
        ``transport_errors()`` for no answer, ``InvalidReply``/``ValueError`` for a bad body.
        ``observe`` sees a delivered reply's headers (the rate limiter reads them)."""
        ...

    def embed(self, req: dict[str, Any], observe: Observe | None = None) -> Reply:
        """Send one embeddings request; the reply's content is the vectors as a JSON list (in
        input order), its prompt tokens the endpoint's usage. Errors and ``observe`` as for
        ``complete``."""
        ...

    def close(self) -> None:
        """Close what ``connect`` built (its kept-alive connections)."""
        ...


# A credential after its label: Authorization schemes (Bearer, and Basic with its base64), and
# key=, token=, secret=, password= as in headers, JSON and query strings.
_BEARER = re.compile(
    r"(?i)(bearer\s+|basic\s+(?=[A-Za-z0-9+/]{8,}=*)"
    r"|(?:api[_-]?key|token|secret|password)[\"'=:\s]+)[^\s\"',}&]+"
)
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@")


def redact(text: str, *secrets: str | None) -> str:
    """Blank out secrets, bearer tokens and URL credentials (``user:pass@``) in a text."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    text = _URL_USERINFO.sub(lambda m: m.group(1) + "***@", text)
    return _BEARER.sub(lambda m: m.group(1) + "***", text)


def is_loopback(url: str) -> bool:
    """Whether ``url``'s host is this machine: a loopback IP address, or exactly ``localhost``.

    Never a DNS name that merely starts like one (``127.attacker.example``,
    ``127.0.0.1.nip.io``): a key may go there over plain http, and proxies are skipped."""
    host = urlsplit(url).hostname or ""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def open_direct(req: urllib.request.Request | str, timeout: float) -> Any:
    """``urlopen`` for a loopback server: never through HTTP(S)_PROXY."""
    return _DIRECT.open(req, timeout=timeout)


def _clean(content: str) -> str:
    """A lone surrogate (an emoji cut at max_tokens) cannot be encoded: replace it."""
    return _SURROGATE.sub("\ufffd", content)


def status_errors() -> tuple[type[Exception], ...]:
    """Errors that carry an HTTP status (the caller retries 408/409/429/5xx)."""
    import openai

    return (openai.APIStatusError,)


def transport_errors() -> tuple[type[Exception], ...]:
    """A request that got no usable HTTP answer (refused, timed out, cut short)."""
    import httpx2
    import openai

    return (httpx2.HTTPError, openai.APIError)


class OpenAICompatible:
    """An endpoint speaking OpenAI chat completions: one ``openai`` client per job and endpoint.

    Requests go through the openai package's own client (its URL handling, bearer auth, status
    errors and HTTP library), but through its generic POST, not ``chat.completions.create``:
    the request already is the JSON body, and create() would walk it (the json_schema too)
    against openai's typed params and build pydantic objects from the reply, about two thirds
    of a structured call's CPU. The same body goes on the wire either way.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        client: openai.OpenAI | None = None,
        transport: httpx2.BaseTransport | None = None,
    ) -> None:
        self.endpoint = endpoint
        self._client = client  # given by hand: tests inject one with a mock transport
        self._transport = transport  # None: the network (the fake backend answers in-process)
        self._lock = threading.Lock()

    @property
    def client(self) -> openai.OpenAI:
        # openai and httpx2 are imported on first use: a job whose calls are all cached or
        # skipped, and the table jobs, never pay for them.
        if self._client is None:
            with self._lock:  # a job's threads share it: build it once
                if self._client is None:
                    cpu = time.thread_time()
                    self._client = self._build()
                    if cpu_cost.enabled():  # start-up work, not the cost of the first call
                        cpu_cost.add_call("client", time.thread_time() - cpu)
        return self._client

    def connect(self) -> openai.OpenAI:
        return self.client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def _build(self) -> openai.OpenAI:
        import openai

        ep = self.endpoint
        # The key is read here, at use, and held only by the openai client object. An
        # endpoint without api_key_env sends none: a key goes only where it was configured.
        key = os.environ.get(ep.api_key_env) if ep.api_key_env else None
        if key and urlsplit(ep.base_url).scheme != "https" and not is_loopback(ep.base_url):
            raise ProviderError(
                f"refusing to send {ep.api_key_env} over plain http to "
                f"{redact(ep.base_url)} (use https, or api_key_env: '' for no key)"
            )
        return openai.OpenAI(
            base_url=ep.base_url,
            api_key=key or "no-key",
            max_retries=0,  # retries are the caller's: they honour Retry-After and are logged
            timeout=ep.timeout_s,
            http_client=_http_client(ep, self._transport),
        )

    def complete(self, req: dict[str, Any], observe: Observe | None = None) -> Reply:
        import httpx2

        resp = self.client.post(
            "/chat/completions", cast_to=httpx2.Response, body=req, options=_BEARER_AUTH
        )
        if observe is not None:
            observe(resp.headers, resp.status_code)
        body = resp.json()  # a 200 whose body is not JSON: ValueError, retried by the caller
        choices = body.get("choices") if isinstance(body, dict) else None
        if not isinstance(choices, list):  # a 200 whose body was not a completion
            raise InvalidReply("the endpoint's reply is not a chat completion")
        choice = _mapping(choices[0] if choices else None)
        message, usage = _mapping(choice.get("message")), _mapping(body.get("usage"))
        content = message.get("content")
        return Reply(
            _clean(content if isinstance(content, str) else ""),
            _count(usage.get("prompt_tokens")),
            _count(usage.get("completion_tokens")),
            str(choice.get("finish_reason") or ""),
        )

    def embed(self, req: dict[str, Any], observe: Observe | None = None) -> Reply:
        import httpx2

        resp = self.client.post(
            "/embeddings", cast_to=httpx2.Response, body=req, options=_BEARER_AUTH
        )
        if observe is not None:
            observe(resp.headers, resp.status_code)
        body = _mapping(resp.json())
        rows = body.get("data")
        texts = req["input"]
        if not isinstance(rows, list) or len(rows) != len(texts):
            raise InvalidReply(f"the endpoint's reply holds no {len(texts)} embeddings")
        rows = sorted(map(_mapping, rows), key=lambda r: _count(r.get("index")))
        vectors = [r.get("embedding") for r in rows]
        if not all(isinstance(v, list) and v and _numbers(v) for v in vectors):
            raise InvalidReply("an embedding in the endpoint's reply is not a list of numbers")
        usage = _mapping(body.get("usage"))
        return Reply(json.dumps(vectors), _count(usage.get("prompt_tokens")), 0, "")


def _numbers(values: list[Any]) -> bool:
    return all(isinstance(x, int | float) and not isinstance(x, bool) for x in values)


_BEARER_AUTH: Any = {"security": {"bearer_auth": True}}  # what create() asks of the client


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


# -- the backends -------------------------------------------------------------------------------
class Served(NamedTuple):
    """A role answered by a model the run serves itself (the ``local`` backend's server)."""

    context_tokens: int  # the context each of its requests gets
    context_key: str  # the config key that sets it, for the slot-fill budget's error
    max_tokens: int | None  # its own reply bound for the role (None: the role's, or llm's)


class Capacity(NamedTuple):
    """What a server the run starts serves well at once: LLM jobs (each then takes that share
    of the ``llm_slots``) and requests in flight (the estimate's parallel streams)."""

    jobs: int
    requests: int


class Backend(Protocol):
    """One ``llm.backend``: where a role's requests go, what sends them, and what the run, its
    config, its preflight and its estimate need to know about it. Nothing outside a backend's
    own module asks for it by name: they ask it these (``BackendBase`` has the defaults)."""

    name: str
    # Its settings model, validated under ``llm.<name>`` (None: it has none). A reply depends
    # on them only through ``identity`` and ``served`` (the role identity of every LLM rule);
    # ``runtime_settings`` are those that change how it serves, never what (they rerun nothing).
    settings: type[BaseModel] | None
    runtime_settings: tuple[str, ...]
    needs_base_url: bool  # every role needs an endpoint URL (``llm.base_url`` or its own)
    rate_limited: bool  # a provider's limit applies: ``llm.rate_limit`` paces its requests
    answers_served_models: bool  # a stand-in that answers a system's own served model too
    assumed_latency_s: float  # seconds per call the estimate assumes when no ledger says
    # The run serves it on the loopback of the host that runs Snakemake: jobs that an executor
    # runs on other hosts cannot reach it, so such a run stops at DAG load (dag_load.py).
    loopback_only: bool

    def endpoint(self, cfg: Config, settings: dict[str, Any]) -> Endpoint:
        """A role's endpoint, from its effective settings (``config.role_settings``), when a
        job first builds its client: ``ProviderError`` where it cannot be reached."""
        ...

    def identity(self, cfg: Config, base_url: str | None) -> str:
        """The endpoint as the response cache keys it, when the DAG loads (no server needs to
        run yet): a rule's config slice holds it, so a new endpoint reruns its jobs. Without
        the run's port or a credential."""
        ...

    def provider(self, endpoint: Endpoint) -> Provider:
        """What sends the requests of ``endpoint`` (one per job and endpoint)."""
        ...

    def served(self, cfg: Config, role: str) -> Served | None:
        """The model the run serves ``role`` itself, if it does (None: an endpoint elsewhere)."""
        ...

    def capacity(self, cfg: Config) -> Capacity | None:
        """What the run's own server serves well at once (None: no server of the run's)."""
        ...

    def check(self, cfg: Config) -> list[str]:
        """Problems found when the DAG loads, one line each, without a request (the files the
        config names); the run stops on the first."""
        ...

    def preflight(self, cfg: Config) -> list[str]:
        """Problems found before the first job, one line each: unset keys, an endpoint that
        does not answer (memprobe/workflow/preflight.py)."""
        ...

    def key_variables(self, cfg: Config) -> list[str]:
        """The environment variables its jobs read keys from (a cluster passes them on)."""
        ...

    def start(self, cfg: Config, log_dir: str, cluster: bool) -> None:
        """Start what the run's jobs reach (its server), before the first job; ``cluster``:
        the jobs run on other hosts. ``ProviderError`` (one line) where it cannot."""
        ...

    def stop(self, cfg: Config) -> None:
        """Stop what ``start`` started (the run ended, or failed)."""
        ...


class BackendBase:
    """The defaults of a ``Backend``: no settings, an endpoint elsewhere that no provider's
    limit paces, nothing to check, start or stop. A backend subclasses it and sets what
    differs (a plugin's too: it then keeps working when the interface grows)."""

    name = ""
    settings: type[BaseModel] | None = None
    runtime_settings: tuple[str, ...] = ()
    needs_base_url = False
    rate_limited = False
    answers_served_models = False
    assumed_latency_s = 4.0  # a hosted mini model answering a few-thousand-token prompt
    loopback_only = False

    def served(self, cfg: Config, role: str) -> Served | None:
        return None

    def capacity(self, cfg: Config) -> Capacity | None:
        return None

    def check(self, cfg: Config) -> list[str]:
        return []

    def preflight(self, cfg: Config) -> list[str]:
        return []

    def key_variables(self, cfg: Config) -> list[str]:
        return []

    def start(self, cfg: Config, log_dir: str, cluster: bool) -> None:
        return None

    def stop(self, cfg: Config) -> None:
        return None


def backend(name: str) -> Backend:
    """The backend registered as ``name`` (memprobe/registry/backends.py)."""
    return cast(Backend, backends.load(name))


def without_credentials(url: str) -> str:
    """scheme://host[:port]/path: no user:password, no query (a key can hide in either)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


_PROVIDERS: dict[Endpoint, Provider] = {}
_PROVIDERS_LOCK = threading.Lock()


def provider(endpoint: Endpoint) -> Provider:
    """This process's (this job's) provider of ``endpoint``, built on first use."""
    with _PROVIDERS_LOCK:
        if endpoint not in _PROVIDERS:
            _PROVIDERS[endpoint] = backend(endpoint.backend).provider(endpoint)
        return _PROVIDERS[endpoint]


def forget_providers() -> None:
    """Close and drop this process's providers. A job never needs it (its process ends); the
    test suite runs many jobs in one process, and a later server on a port an earlier one used
    must not be reached through the earlier one's kept-alive connections (which its handler
    threads still answer after it closed)."""
    with _PROVIDERS_LOCK:
        for held in _PROVIDERS.values():
            held.close()
        _PROVIDERS.clear()


def endpoint_for(cfg: Config, settings: dict[str, Any]) -> Endpoint:
    """The endpoint of one role, from its effective settings (``config.role_settings``)."""
    return backend(cfg.llm.backend).endpoint(cfg, settings)


# -- the transport ----------------------------------------------------------------------------
def _http_client(endpoint: Endpoint, transport: httpx2.BaseTransport | None) -> httpx2.Client:
    """The transport of one client: a total deadline per call; proxies never for loopback
    (nor for a Unix socket). ``transport``: an in-memory one (the fake backend), or None."""
    from memprobe.llm import deadline

    ep = endpoint
    return deadline.http_client(
        ep.timeout_s,
        trust_env=not (ep.uds or is_loopback(ep.base_url)),  # proxies never see local traffic
        transport=transport,
        uds=ep.uds,
    )
