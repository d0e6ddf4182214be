"""``memprobe fake-endpoint``: a deterministic OpenAI-compatible server on loopback.

Answers ``POST /v1/chat/completions`` with schema-valid replies
(``memprobe.testing.fake_responder``), ``POST /v1/embeddings`` with a vector per text (each
request kept in ``server.embedding_requests``) and ``GET /v1/models``. A script file can pin replies
per schema name, in order, e.g.
``{"critic": [{"verdict": "fishing", ...}, ...]}``, for tests of control flow; or by what the
request says: ``{"judge": {"when": [[["text", ...], reply], ...], "else": reply}}`` answers the
first reply whose texts all occur in the request's messages (``else``: every other request).

A fault spec (``--faults``, :class:`Faults`) makes the server misbehave at seeded rates, the way
real endpoints do: 429 with Retry-After, 500, a held connection (client timeout), a body cut
short, a 200 whose body is not JSON, reply content that is not JSON, JSON that breaks the
schema, empty content. Whether attempt n of a request is faulted depends only on the seed, the
request and n, so a run's faults do not depend on thread scheduling. Limits (``--limits``,
:class:`Limits`) make it a rate-limited provider: requests and tokens per minute, with its
rate-limit headers and 429s.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from memprobe.serving.json_http import QuietJSONHandler
from memprobe.testing.background import serve_until_interrupted
from memprobe.testing.fake_responder import (
    Outcomes,
    completion_body,
    embedding_body,
    fake_content,
    request_digest,
)

FAULT_KINDS = (
    "rate_limit",  # 429 with a Retry-After header
    "server_error",  # 500
    "timeout",  # hold the connection past the client's timeout
    "truncated",  # Content-Length promises more bytes than are sent
    "malformed",  # a 200 whose body is not JSON
    "bad_content",  # valid completion, message content is cut-off JSON
    "schema_invalid",  # valid JSON content that breaks the requested schema
    "empty",  # valid completion with empty content
)
# Faults that only make sense when the client asked for JSON; text requests get "empty".
_JSON_ONLY = ("bad_content", "schema_invalid")


class Faults:
    """Seeded fault injection: ``rates`` per kind (their sum is the share of faulted attempts)."""

    def __init__(
        self,
        rates: dict[str, float] | None = None,
        *,
        seed: int = 0,
        hold_s: float = 3.0,
        retry_after: float = 1.0,
        poison: str | None = None,
    ) -> None:
        rates = dict(rates or {})
        unknown = sorted(set(rates) - set(FAULT_KINDS))
        if unknown:
            raise ValueError(
                f"faults: unknown kind(s) {unknown}; expected {', '.join(FAULT_KINDS)}"
            )
        if any(r < 0 for r in rates.values()) or sum(rates.values()) > 1:
            raise ValueError("faults: rates must be >= 0 and sum to at most 1")
        self.rates = {k: rates.get(k, 0.0) for k in FAULT_KINDS}
        self.seed = seed
        self.hold_s = hold_s
        self.retry_after = retry_after
        self.poison = poison  # requests containing this text always get a 500
        self.injected: Counter[str] = Counter()
        self.requests = 0
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()

    @classmethod
    def parse(cls, spec: str) -> Faults:
        """``all=0.2,seed=3,hold_s=2`` or ``rate_limit=0.05,timeout=0.02,...``.

        ``all=X`` spreads X evenly over every kind; named kinds override it.
        """
        rates: dict[str, float] = {}
        opts: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in spec.split(","))):
            name, sep, value = part.partition("=")
            if not sep:
                raise ValueError(f"faults: {part!r} is not NAME=VALUE")
            try:
                if name == "all":
                    rates |= {k: float(value) / len(FAULT_KINDS) for k in FAULT_KINDS}
                elif name == "seed":
                    opts["seed"] = int(value)
                elif name in ("hold_s", "retry_after"):
                    opts[name] = float(value)
                elif name == "poison":
                    opts["poison"] = value
                else:
                    rates[name] = float(value)
            except ValueError:
                raise ValueError(f"faults: {name}: expected a number, got {value!r}") from None
        return cls(rates, **opts)

    def pick(self, body: dict[str, Any], raw: bytes) -> str | None:
        """The fault for this attempt of this request, or None."""
        digest = request_digest(body)
        with self._lock:
            self.requests += 1
            attempt = self._seen[digest]
            self._seen[digest] += 1
        if self.poison and self.poison.encode() in raw:
            kind: str | None = "server_error"
        else:
            basis = f"{self.seed}:{digest}:{attempt}".encode()
            u = int(hashlib.sha256(basis).hexdigest()[:15], 16) / 16**15
            kind = None
            for name in FAULT_KINDS:
                u -= self.rates[name]
                if u < 0:
                    kind = name
                    break
            if kind in _JSON_ONLY and not body.get("response_format"):
                kind = "empty"
        if kind:
            with self._lock:
                self.injected[kind] += 1
        return kind


class Limits:
    """A provider's rate limit: requests and tokens per ``window_s``, as buckets that refill
    continuously (``rpm`` requests, ``tpm`` tokens per window; full at the start), the way
    OpenAI-compatible APIs describe theirs. Every completion carries ``x-ratelimit-limit-*``,
    ``x-ratelimit-remaining-*`` and ``x-ratelimit-reset-*`` (seconds until the bucket is full
    again, e.g. ``1.5s``); a request past either gets a 429 with ``Retry-After`` (seconds until
    it would fit) and takes nothing. A request's tokens are its usage, counted on arrival.
    """

    def __init__(self, rpm: int | None = None, tpm: int | None = None, window_s: float = 60.0):
        if (rpm is not None and rpm < 1) or (tpm is not None and tpm < 1) or window_s <= 0:
            raise ValueError("limits: rpm and tpm must be >= 1, window_s > 0")
        self.rpm, self.tpm, self.window_s = rpm, tpm, window_s
        self.level = {"requests": float(rpm or 0), "tokens": float(tpm or 0)}
        self.log: list[tuple[float, int]] = []  # (time, tokens) of every admitted request
        self.rejected = 0
        self._last = time.monotonic()
        self._lock = threading.Lock()

    @classmethod
    def parse(cls, spec: str) -> Limits:
        """``rpm=600,tpm=200000,window_s=60``."""
        opts: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in spec.split(","))):
            name, sep, value = part.partition("=")
            if not sep or name not in ("rpm", "tpm", "window_s"):
                raise ValueError(f"limits: {part!r} is not rpm=N, tpm=N or window_s=S")
            try:
                opts[name] = float(value) if name == "window_s" else int(value)
            except ValueError:
                raise ValueError(f"limits: {name}: expected a number, got {value!r}") from None
        return cls(**opts)

    def _limits(self) -> dict[str, int]:
        return {k: n for k, n in (("requests", self.rpm), ("tokens", self.tpm)) if n}

    def admit(self, tokens: int) -> tuple[bool, dict[str, str]]:
        """Whether a request of ``tokens`` is within the limits now, and the headers to send."""
        with self._lock:
            now = time.monotonic()
            limits = self._limits()
            for kind, limit in limits.items():  # refill since the last request
                rate = limit / self.window_s
                self.level[kind] = min(limit, self.level[kind] + (now - self._last) * rate)
            self._last = now
            need = {"requests": 1, "tokens": tokens}
            short = {k: need[k] - self.level[k] for k in limits if self.level[k] < need[k]}
            if not short:
                for kind in limits:
                    self.level[kind] -= need[kind]
                self.log.append((time.time(), tokens))
            else:
                self.rejected += 1
            headers: dict[str, str] = {}
            for kind, limit in limits.items():
                left = self.level[kind]
                full_in = (limit - left) * self.window_s / limit
                headers |= _limit_headers(kind, limit, int(left), full_in)
            if short:
                wait = max(n * self.window_s / limits[k] for k, n in short.items())
                headers["Retry-After"] = f"{max(0.001, wait):.3f}"
            return not short, headers


def _limit_headers(kind: str, limit: int, left: int, reset: float) -> dict[str, str]:
    return {
        f"x-ratelimit-limit-{kind}": str(limit),
        f"x-ratelimit-remaining-{kind}": str(max(0, left)),
        f"x-ratelimit-reset-{kind}": f"{max(0.0, reset):.3f}s",
    }


class Gate:
    """Answer the first ``after`` completion requests, then hold every later one until
    ``release`` is set, and hang up unanswered: a test's kill point that depends on how many
    calls were paid, never on a clock. ``held`` is set once a request is being held."""

    def __init__(self, after: int) -> None:
        self.after = after
        self.admitted = 0
        self.held = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()

    def admit(self) -> bool:
        with self._lock:
            if self.admitted < self.after:
                self.admitted += 1
                return True
        self.held.set()
        self.release.wait()
        return False


class Script:
    """Replies pinned per json_schema name, consumed in order, or chosen by the request's text
    (a ``when``/``else`` rule, never consumed); then the generated ones."""

    def __init__(self, path: str | None) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str, list[Any]] = {}
        self._rules: dict[str, dict[str, Any]] = {}
        if path:
            for name, value in json.loads(Path(path).read_text()).items():
                if isinstance(value, dict):
                    self._rules[name] = value
                else:
                    self._queues[name] = list(value)

    def next(self, name: str, text: str = "") -> Any | None:
        rule = self._rules.get(name)
        if rule is not None:
            for needles, reply in rule.get("when", []):
                if all(n in text for n in needles):
                    return reply
            return rule.get("else")
        with self._lock:
            queue = self._queues.get(name)
            return queue.pop(0) if queue else None


def make_server(
    host: str = "127.0.0.1",
    port: int = 0,
    script: str | None = None,
    faults: Faults | None = None,
    latency: float = 0.0,
    limits: Limits | None = None,
    outcomes: Outcomes | None = None,
):
    pinned = Script(script)

    class Handler(QuietJSONHandler):
        protocol_version = "HTTP/1.1"

        def _send(
            self,
            code: int,
            payload: dict[str, Any] | bytes,
            headers: dict[str, str] | None = None,
            cut: bool = False,
        ) -> None:
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            if cut:  # promise len(data) bytes, send half, hang up
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(data)

        def _faulty(self, kind: str, body: dict[str, Any], content: str) -> None:
            faults: Faults = self.server.faults  # type: ignore[attr-defined]
            err = {"error": {"message": f"injected fault: {kind}", "type": kind}}
            if kind == "rate_limit":
                self._send(429, err, {"Retry-After": f"{faults.retry_after:g}"})
            elif kind == "server_error":
                self._send(500, err)
            elif kind == "timeout":
                time.sleep(faults.hold_s)
                try:
                    self._send(200, completion_body(body, content))
                except OSError:
                    pass  # the client gave up long ago
            elif kind == "truncated":
                self._send(200, json.dumps(completion_body(body, content)).encode(), cut=True)
            elif kind == "malformed":
                self._send(200, json.dumps(completion_body(body, content)).encode()[:-7])
            elif kind == "bad_content":
                self._send(200, completion_body(body, content[: max(1, len(content) // 2)]))
            elif kind == "schema_invalid":
                self._send(200, completion_body(body, json.dumps({"injected_fault": 1})))
            else:  # empty
                self._send(200, completion_body(body, ""))

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
            elif self.path.rstrip("/").endswith("/health"):
                self._send(200, {"status": "ok"})
            elif self.path.rstrip("/").endswith("/rate-limit-stats"):
                # What the limits did (benchmarks/rate_limit_bench.py): admitted, answered 429.
                limits = self.server.limits  # type: ignore[attr-defined]
                admitted, rejected = (len(limits.log), limits.rejected) if limits else (0, 0)
                self._send(200, {"admitted": admitted, "rejected": rejected})
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self._send(400, {"error": {"message": "invalid JSON body"}})
                return
            if self.path.rstrip("/").endswith("/embeddings"):
                self.server.embedding_requests.append(body)  # type: ignore[attr-defined]
                self._send(200, embedding_body(body))
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": "not found"}})
                return
            gate = self.server.gate  # type: ignore[attr-defined]
            if gate is not None and not gate.admit():
                self.close_connection = True
                return
            fmt = body.get("response_format") or {}
            name = (fmt.get("json_schema") or {}).get("name", "")
            # Which bearer tokens arrived: lets a test prove a sentinel key was really sent.
            self.server.auth_seen.add(self.headers.get("Authorization", ""))  # type: ignore[attr-defined]
            limits: Limits | None = self.server.limits  # type: ignore[attr-defined]
            generated = fake_content(body, outcomes)
            limit_headers: dict[str, str] = {}
            if limits is not None:
                usage = completion_body(body, generated)["usage"]
                ok, limit_headers = limits.admit(usage["total_tokens"])
                if not ok:
                    err = {"error": {"message": "rate limit reached", "type": "requests"}}
                    self._send(429, err, limit_headers)
                    return
            # A fixed per-call latency, like a hosted model (benchmarks/): each request sleeps
            # in its own handler thread, so concurrency stays unlimited.
            if self.server.latency > 0:  # type: ignore[attr-defined]
                time.sleep(self.server.latency)  # type: ignore[attr-defined]
            faults = self.server.faults  # type: ignore[attr-defined]
            kind = faults.pick(body, raw) if faults else None
            if kind:  # a faulted attempt never consumes a pinned reply
                self._faulty(kind, body, generated)
                return
            text = "\n".join(str(m.get("content") or "") for m in body.get("messages", []))
            reply = pinned.next(name, text) if name else None
            content = json.dumps(reply) if reply is not None else generated
            self._send(200, completion_body(body, content), limit_headers)

    server = ThreadingHTTPServer((host, port), Handler)
    # Attributes the handler reads off its server; tests may swap faults on a live server.
    server.faults = faults  # type: ignore[attr-defined]
    server.latency = latency  # type: ignore[attr-defined]
    server.limits = limits  # type: ignore[attr-defined]
    server.auth_seen = set()  # type: ignore[attr-defined]
    server.embedding_requests = []  # type: ignore[attr-defined]  # bodies of POST /embeddings
    # A Gate: tests hold requests after N.
    server.gate = None  # type: ignore[attr-defined]
    return server


def serve(
    host: str,
    port: int,
    script: str | None = None,
    faults: Faults | None = None,
    latency: float = 0.0,
    limits: Limits | None = None,
    outcomes: Outcomes | None = None,
) -> None:
    server = make_server(host, port, script, faults, latency, limits, outcomes)
    serve_until_interrupted(server, "fake endpoint")
