"""A run-wide rate limit per endpoint (``llm.rate_limit``): requests and tokens per minute,
shared by every job process of a run on one machine.

The budget lives in pyrate-limiter SQLite buckets (one for requests, one for tokens) in one
file per endpoint under ``llm.rate_limit.state_dir``, behind a file lock: every process that
opens the same file draws from the same sliding window. Tokens are only known after the
call, so a request takes its estimate (prompt characters / 4 plus the mean completion so far)
before it is sent and the rest once the usage comes back.

The provider's own signals tighten that budget for every process of the run, through a small
shared pacing file beside the buckets: a 429's Retry-After holds every sender until then; an
``x-ratelimit-remaining-*`` under a tenth of the limit (or under what this process has on the
way) paces every sender at the rate the provider refills (``x-ratelimit-reset-*`` is when it is
full again) until the reset, and too little left for one call holds them for one refill step:
the run slows down before the 429s come.

The state folder is this user's alone (0700, its files 0600, checked for owner:
memprobe/llm/owner_only.py): another local user can neither plant a pace that holds every
call nor hold its locks. A wait for a lock ends at the call's deadline (``llm.timeout_s``): the
request is then sent unpaced (the provider's own 429s still pace it), never held; and no pace
read from the file holds a request for longer than ``MAX_HOLD_S``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memprobe.llm.owner_only import LockTimeout, OwnerLock, open_private, private_dir
from memprobe.registry import backends

if TYPE_CHECKING:
    from memprobe.config.schema import Config
    from memprobe.llm.providers import Endpoint

WINDOW_S = 60.0  # the providers' window: requests and tokens per minute
# The token bucket keeps at most this many rows per window (pyrate-limiter stores one row per
# unit of weight): a unit is tokens_per_minute / TOKEN_ROWS tokens, rounded up.
TOKEN_ROWS = 1000
LOW_WATER = 0.1  # below this share of the limit left, pace what is left until the reset
# Paced a tenth slower than the provider refills: a request that arrives a moment early at
# exactly its rate would find the bucket a hair short.
PACE_MARGIN = 1.1
MAX_HOLD_S = 120.0  # never trust a signal to stop the run for longer than this at once
STATE_KEY = "llm.rate_limit.state_dir"


def node_state_dir() -> str:
    """A cluster node's buckets, on its own disk (file locks do not hold over NFS:
    memprobe/workflow/cluster.py), in a folder of this user's: one fixed name in /tmp would be
    every user's, and the first to make it could stall the others' calls."""
    return f"/tmp/memprobe-rate-limit-{os.getuid()}"


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
log = logging.getLogger("memprobe")


@dataclass(frozen=True)
class Limits:
    """Requests and tokens per window (None: that one is not limited)."""

    requests: int | None = None
    tokens: int | None = None
    window_s: float = WINDOW_S

    def scaled(self, share: float) -> Limits:
        """This machine's (or job's) share of the limits, never below 1."""

        def part(n: int | None) -> int | None:
            return None if n is None else max(1, math.floor(n * share))

        return Limits(part(self.requests), part(self.tokens), self.window_s)


def reset_seconds(value: str | None) -> float | None:
    """An ``x-ratelimit-reset-*`` value: ``1s``, ``6m0s``, ``250ms``, ``0.5`` (seconds)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parts = _DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw:
            try:
                wait = float(raw) / scale
            except ValueError:
                return None  # an HTTP date: the caller's own backoff
            return wait if math.isfinite(wait) and wait >= 0 else None
    return None


def _count(headers: Mapping[str, str], name: str) -> int | None:
    try:
        return int(float(headers.get(name) or ""))
    except ValueError:
        return None


def estimate_prompt_tokens(req: dict[str, Any]) -> int:
    """About four characters a token, as the usage of most tokenizers comes out on English."""
    chars = sum(len(str(m.get("content") or "")) for m in req.get("messages", []))
    chars += sum(len(str(t)) for t in req.get("input", []))  # an embeddings request
    return max(1, chars // 4)


class RateLimiter:
    """The limit of one endpoint, shared through files under ``state_dir``."""

    def __init__(
        self,
        limits: Limits,
        state_dir: str | Path,
        identity: str,
        signals: bool = True,
        timeout_s: float = 120.0,
    ) -> None:
        self.limits = limits
        self.signals = signals
        root = private_dir(state_dir, STATE_KEY)
        name = hashlib.sha256(identity.encode()).hexdigest()[:16]  # no URL or secret in a name
        self._pace_path = root / f"{name}.pace.json"
        # Each thread takes the OS lock itself (OwnerLock), so the job's threads exclude each
        # other as its processes do; no wait for it outlasts the call's deadline.
        self._pace_lock = OwnerLock(f"{self._pace_path}.lock", timeout_s, STATE_KEY)
        self._lock = threading.Lock()
        self._completion_mean = 0.0
        self._call_mean = 0.0  # prompt + completion tokens of a call, on average
        self._completions = 0
        self._inflight = 0  # this process's requests sent and not yet answered
        self._owed = 0.0  # tokens used and not yet charged to the bucket (under a unit)
        self.waited_s = 0.0  # all waits of this process, for the benchmark
        db = root / f"{name}.sqlite"
        os.close(open_private(db, STATE_KEY))  # 0600 before SQLite opens it (its WAL follows)
        self._bucket_lock = OwnerLock(f"{db}.lock", timeout_s, STATE_KEY)
        self.unit = max(1, math.ceil((limits.tokens or 1) / TOKEN_ROWS))
        self._requests = _bucket(
            limits.requests, limits.window_s, db, "requests", self._bucket_lock
        )
        self._tokens = (
            _bucket(
                limits.tokens // self.unit or 1, limits.window_s, db, "tokens", self._bucket_lock
            )
            if limits.tokens
            else None
        )

    # -- before and after a request ------------------------------------------------------------
    def estimate(self, req: dict[str, Any]) -> int:
        with self._lock:
            return estimate_prompt_tokens(req) + round(self._completion_mean)

    def acquire(self, req: dict[str, Any]) -> tuple[int, float]:
        """Wait for the run's budget to admit ``req``: (tokens taken, seconds waited)."""
        start = time.monotonic()
        self._wait_pace()
        if self._requests is not None:
            self._take(self._requests, "requests", 1)
        tokens = self.estimate(req)
        self._take_tokens(tokens)
        waited = time.monotonic() - start
        with self._lock:
            self.waited_s += waited
            self._inflight += 1
        return tokens, waited

    def landed(self) -> None:
        """A request acquired here was answered (or failed)."""
        with self._lock:
            self._inflight -= 1

    def settle(self, taken: int, prompt_tokens: int, completion_tokens: int) -> float:
        """Charge what the reply really cost beyond its estimate; the seconds waited for it."""
        with self._lock:
            self._completions += 1
            self._completion_mean += (completion_tokens - self._completion_mean) / self._completions
            total = prompt_tokens + completion_tokens
            self._call_mean += (total - self._call_mean) / self._completions
        start = time.monotonic()
        self._take_tokens(prompt_tokens + completion_tokens - taken)
        waited = time.monotonic() - start
        with self._lock:
            self.waited_s += waited
        return waited

    def _take_tokens(self, tokens: int) -> None:
        """Charge ``tokens`` (negative: a reply cheaper than its estimate) in whole units.

        What is short of a unit is carried to this process's next charge: rounding each call
        up to a unit (8,000 tokens at 8M a minute) charged a 1,000-token call eight times
        over and held a run to ~670 calls a minute of 1,500 allowed. The carry leaves at most
        one unit per process uncharged; the provider's signals see the rest."""
        if self._tokens is None:
            return
        with self._lock:
            self._owed += tokens
            units = math.floor(self._owed / self.unit)
            if units <= 0:
                return
            self._owed -= units * self.unit
        cap = self._tokens_rate_limit
        while units > 0:  # a call bigger than the window's budget takes it whole, then more
            step = min(units, cap)
            self._take(self._tokens, "tokens", step)
            units -= step

    def _take(self, limiter: Any, name: str, weight: int) -> None:
        """Wait until the bucket ``name`` admits ``weight``. The lock is held only to look, never
        while waiting (pyrate-limiter's blocking wait sleeps holding it, which made every
        other process's wait for the budget a wait for the lock); a lock held past the call's
        deadline sends the request unpaced."""
        from pyrate_limiter import RateItem

        while True:
            if not self._bucket_lock.acquire():
                log.warning("llm.rate_limit: %s", _HELD)
                return
            try:
                if limiter.try_acquire(name, weight, blocking=False):
                    return
                bucket = limiter.bucket_factory.get(RateItem(name, 0, weight))
                wait_ms = bucket.waiting(RateItem(name, bucket.now(), weight))
            finally:
                self._bucket_lock.release()
            time.sleep(max(wait_ms, 10) / 1000 + BUFFER_S)

    @property
    def _tokens_rate_limit(self) -> int:
        return max(1, (self.limits.tokens or 1) // self.unit)

    # -- the provider's signals ----------------------------------------------------------------
    def observe(self, headers: Mapping[str, str], status: int) -> None:
        """Read a response's rate-limit headers (any status) into the shared pacing."""
        if not self.signals:
            return
        now = time.time()
        hold = 0.0
        gap = gap_until = 0.0
        if status == 429:
            hold = now + (retry_after_seconds(headers) or 1.0)
        with self._lock:
            inflight = max(1, self._inflight)
        for kind in ("requests", "tokens"):
            left = _count(headers, f"x-ratelimit-remaining-{kind}")
            reset = reset_seconds(headers.get(f"x-ratelimit-reset-{kind}"))
            if left is None or reset is None:
                continue
            reset = min(reset, MAX_HOLD_S)
            per = 1 if kind == "requests" else max(1, round(self._call_mean))  # one call's worth
            limit = _count(headers, f"x-ratelimit-limit-{kind}") or getattr(self.limits, kind)
            # Seconds the provider takes to give back one call's worth: it refills what was
            # used (limit - left) by the reset; without a limit, what is left must last till then.
            if limit and limit > left:
                per_call = PACE_MARGIN * per * reset / (limit - left)
            else:
                per_call = reset / max(1, left // per)
            # What is left once this process's other calls on the way have arrived.
            ahead = left - per * (inflight - 1)
            if ahead < per:
                hold = max(hold, now + per_call * (per - ahead) / per)  # until it has refilled
            elif ahead < max(2 * per, LOW_WATER * limit if limit else 0):
                # Running low: one call per refill step until the reset.
                gap = max(gap, per_call)
                gap_until = max(gap_until, now + reset)
        if hold or gap:
            self._update_pace(hold, gap, gap_until)

    def _update_pace(self, hold: float, gap: float, gap_until: float) -> None:
        try:
            with self._pace_lock:
                state = self._read_pace()
                state["next"] = max(state.get("next", 0.0), min(hold, time.time() + MAX_HOLD_S))
                if gap and gap_until > state.get("gap_until", 0.0):
                    state["gap"], state["gap_until"] = gap, gap_until
                _write_atomic(self._pace_path, json.dumps(state))
        except LockTimeout:
            log.warning("llm.rate_limit: %s", _HELD)  # this signal is lost; the next one counts

    def _wait_pace(self) -> None:
        """Take this request's slot in the shared pacing (no file: no signal yet, no wait)."""
        if not self._pace_path.exists():
            return
        now = time.time()
        try:
            with self._pace_lock:
                state = self._read_pace()
                now = time.time()
                start = min(max(now, state.get("next", 0.0)), now + MAX_HOLD_S)
                if start < state.get("gap_until", 0.0):
                    state["next"] = start + min(state["gap"], MAX_HOLD_S)
                    _write_atomic(self._pace_path, json.dumps(state))
        except LockTimeout:
            log.warning("llm.rate_limit: %s", _HELD)
            return
        if start > now:
            time.sleep(start - now)

    def _read_pace(self) -> dict[str, float]:
        try:
            fd = open_private(self._pace_path, STATE_KEY, os.O_RDONLY)
        except FileNotFoundError:
            return {}
        try:
            with os.fdopen(fd, encoding="utf-8") as fh:
                state = json.load(fh)
        except ValueError:
            return {}
        if not isinstance(state, dict):
            return {}
        return {k: float(v) for k, v in state.items() if isinstance(v, int | float)}


_HELD = "the state folder's lock was held past the call's deadline (llm.timeout_s): sent unpaced"
BUFFER_S = 0.02  # past the moment the bucket frees up: its clock and ours differ by a hair


def _bucket(limit: int | None, window_s: float, db: Path, table: str, lock: OwnerLock) -> Any:
    """A pyrate-limiter Limiter on a SQLite bucket behind ``lock`` (None: no limit), asked
    without blocking (``RateLimiter._take``): pyrate-limiter's own file lock
    (``init_from_file``) makes its file 0644 and waits for it forever."""
    if not limit:
        return None
    import sqlite3

    from pyrate_limiter import Limiter, Rate, SQLiteBucket
    from pyrate_limiter.buckets.sqlite_bucket import Queries

    with lock:
        conn = sqlite3.connect(str(db), isolation_level="DEFERRED", check_same_thread=False)
        cur = conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL;")  # as init_from_file with its file lock
        cur.execute("PRAGMA synchronous=NORMAL;")
        cur.execute(Queries.CREATE_BUCKET_TABLE.format(table=table))
        index = f"idx_{table}_rate_item_timestamp"
        cur.execute(Queries.CREATE_INDEX_ON_TIMESTAMP.format(index_name=index, table_name=table))
        cur.close()
        conn.commit()
    bucket = SQLiteBucket([Rate(limit, int(window_s * 1000))], conn, table=table, lock=lock)
    return Limiter(bucket)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = open_private(tmp, STATE_KEY, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    tmp.replace(path)


_SHARED: dict[tuple[str, Limits, str, bool, float], RateLimiter] = {}
_SHARED_LOCK = threading.Lock()


def shared(
    limits: Limits, state_dir: str | Path, identity: str, signals: bool, timeout_s: float = 120.0
) -> RateLimiter:
    """This process's one limiter of an endpoint (its roles share it, like its provider)."""
    key = (str(Path(state_dir).resolve()), limits, identity, signals, timeout_s)
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = RateLimiter(limits, state_dir, identity, signals, timeout_s)
        return _SHARED[key]


def state_dir(cfg: Config) -> Path:
    rl = cfg.llm.rate_limit
    return Path(rl.state_dir) if rl.state_dir else Path(cfg.llm.cache_dir).parent / "rate_limit"


def configured(cfg: Config, role: str) -> Limits:
    """The limits of ``role``'s endpoint on this machine (its share of them)."""
    rl = cfg.llm.rate_limit
    values = rl.roles.get(role)  # type: ignore[call-overload]
    if values is None:
        over = cfg.llm.roles.get(role)  # type: ignore[call-overload]
        own = over is not None and over.base_url and over.base_url != cfg.llm.base_url
        values = None if own else rl
    if values is None:
        return Limits()
    return Limits(values.requests_per_minute, values.tokens_per_minute).scaled(rl.share)


def for_endpoint(
    cfg: Config, role: str, endpoint: Endpoint, configured_url: str | None
) -> RateLimiter | None:
    """The run's limiter of the endpoint a role's requests go to; None where no provider's
    limit applies (its backend is not ``rate_limited``: the in-process fake, the run's own
    llama.cpp server) or nothing is asked of it. The configured limits are those of the
    role's configured endpoint (``configured_url``); an endpoint a system serves itself
    (Mem-T's policy) has none of them, only the provider's own signals."""
    if not backends.load(endpoint.backend).rate_limited:
        return None
    limits = configured(cfg, role) if endpoint.base_url == configured_url else Limits()
    signals = cfg.llm.rate_limit.provider_signals
    if not (limits.requests or limits.tokens or signals):
        return None
    return shared(limits, state_dir(cfg), endpoint.identity, signals, endpoint.timeout_s)
