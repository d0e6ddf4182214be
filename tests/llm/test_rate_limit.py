"""llm.rate_limit: one budget for every process of a run, and the provider's signals obeyed.

Windows are a second or two (the limiter's ``window_s``; the config's is always a minute), so
each of these runs in seconds.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from memprobe.config.base import ConfigError
from memprobe.config.loading import load_config, snakemake_merge
from memprobe.llm import rate_limit
from memprobe.llm.cache import ResponseCache
from memprobe.llm.client import LLM, LLMError
from memprobe.llm.ledger import Ledger
from memprobe.llm.rate_limit import Limits, RateLimiter, reset_seconds
from memprobe.testing.fake_endpoint import Limits as ServerLimits
from tests.helpers.endpoint import Endpoint
from tests.helpers.workflow import tiny_config

# Each process takes N permits from the shared limit and prints when it got each one.
WORKER = """
import json, sys, time
from memprobe.llm.rate_limit import Limits, RateLimiter
lim = RateLimiter(Limits(requests=int(sys.argv[2]), window_s=float(sys.argv[3])), sys.argv[1], "ep")
stamps = []
for _ in range(int(sys.argv[4])):
    before = time.time()
    lim.acquire({"messages": []})
    stamps.append((before, time.time()))  # the bucket took the permit in between
print(json.dumps(stamps))
"""


def most_surely_in_one_window(spans: list[tuple[float, float]], window_s: float) -> int:
    """The most permits that certainly fell in one window: each was taken somewhere in its
    (before, after) span, so the permits starting at or after some `before` whose `after` lies
    within the window of it surely share that window. A stalled process widens its spans and
    proves less, never more."""
    return max(
        sum(1 for b, a in spans if b >= start and a < start + window_s) for start, _ in spans
    )


def test_processes_sharing_one_limit_never_exceed_it_in_any_window(tmp_path):
    limit, window, per_process, processes = 6, 1.0, 4, 4
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER,
                str(tmp_path),
                str(limit),
                str(window),
                str(per_process),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    spans = [tuple(x) for p in procs for x in json.loads(p.communicate(timeout=60)[0])]
    assert len(spans) == per_process * processes
    # 16 permits at 6 a second: the last ones wait for two windows to pass.
    assert max(a for _, a in spans) - min(b for b, _ in spans) >= 2 * window - 0.1
    assert most_surely_in_one_window(spans, window) <= limit


def test_a_call_bigger_than_its_estimate_pays_the_difference_before_the_next(tmp_path):
    lim = RateLimiter(Limits(tokens=100, window_s=1.0), tmp_path, "ep", signals=False)
    taken, _ = lim.acquire({"messages": [{"content": "x" * 40}]})  # about 10 tokens
    assert taken == 10
    lim.landed()
    lim.settle(taken, 60, 30)  # it really cost 90: 90 of 100 spent in this window
    _, waited = lim.acquire({"messages": [{"content": "x" * 80}]})  # 20 + 30 more
    assert waited >= 0.5


def test_calls_smaller_than_a_token_unit_are_charged_what_they_cost(tmp_path):
    # 100,000 tokens a window in units of 100: 1,200 calls of 12 tokens spend 14,400. Charged
    # a unit each (1,200 of the window's 1,000 units), the last 200 waited for the next window.
    lim = RateLimiter(Limits(tokens=100_000, window_s=3.0), tmp_path, "ep", signals=False)
    assert lim.unit == 100
    start = time.monotonic()
    for _ in range(1200):
        taken, _ = lim.acquire({"messages": [{"content": "x" * 40}]})  # estimated at 10
        lim.landed()
        lim.settle(taken, 10, 2)
    assert lim.waited_s < 0.5 and time.monotonic() - start < 2.5
    # What is short of a unit is carried, not dropped: 14,400 tokens took 144 units.
    assert lim._owed == 0


@pytest.mark.parametrize(
    "value, seconds",
    [("1s", 1.0), ("6m0s", 360.0), ("250ms", 0.25), ("1m30.5s", 90.5), ("0.75", 0.75)],
)
def test_reset_headers_in_the_providers_formats(value, seconds):
    assert reset_seconds(value) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["", "soon", "1x", "-"])
def test_an_unreadable_reset_header_is_ignored(value):
    assert reset_seconds(value) is None


# -- against the limiting fake endpoint, through the real openai client --------------------------
def limited_endpoint(rpm: int, window_s: float) -> tuple[Endpoint, ServerLimits]:
    ep = Endpoint()
    limits = ep.server.limits = ServerLimits(rpm=rpm, window_s=window_s)
    return ep, limits


def client(ep: Endpoint, tmp_path, limiter: RateLimiter | None) -> LLM:
    return LLM(
        "assistant",
        backend="openai",
        base_url=ep.base_url,
        model="m",
        api_key_env=None,
        temperature=0.0,
        max_tokens=None,
        seed=0,
        cache=ResponseCache(tmp_path / "cache"),
        ledger=Ledger(tmp_path / "usage.csv"),
        max_attempts=8,
        backoff_s=0.05,
        limiter=limiter,
    )


def ask_many(llm: LLM, n: int, threads: int = 4) -> list[str]:
    def one(i: int) -> str:
        return llm.text([{"role": "user", "content": f"question {i}"}])

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, range(n)))


def test_the_limiter_slows_down_on_the_remaining_headers_before_a_429(tmp_path):
    """No limit configured: the provider's x-ratelimit-remaining/reset alone pace the run.

    A burst of 18 calls on 4 threads at a provider that refills 10 a second: without the
    limiter about 26 of its requests are answered 429 (here a call can even run out of
    retries); with it, none on a quiet machine, a few on a loaded one (a thread held off the
    CPU sends after its slot in the pacing has passed)."""
    ep, server = limited_endpoint(rpm=10, window_s=1.0)
    try:
        paced = RateLimiter(Limits(window_s=1.0), tmp_path / "state", ep.base_url)
        assert len(ask_many(client(ep, tmp_path / "a", paced), 18)) == 18
        # The same calls without it run into the provider's limit.
        fresh = ep.server.limits = ServerLimits(rpm=10, window_s=1.0)
        with contextlib.suppress(LLMError):
            ask_many(client(ep, tmp_path / "b", None), 18)
        assert fresh.rejected >= 10 and server.rejected * 4 <= fresh.rejected
    finally:
        ep.close()


def test_a_429_holds_every_sender_until_its_retry_after(tmp_path):
    lim = RateLimiter(Limits(window_s=1.0), tmp_path, "ep")
    lim.observe({"retry-after": "0.6"}, 429)
    other = RateLimiter(Limits(window_s=1.0), tmp_path, "ep")  # another process's view
    _, waited = other.acquire({"messages": []})
    assert 0.4 <= waited <= 1.0


def test_a_configured_limit_keeps_the_run_under_the_providers(tmp_path):
    # The provider allows 10 a second, the run is told 7: room for a loaded machine's jitter
    # between taking a permit and the request's arrival.
    ep, server = limited_endpoint(rpm=10, window_s=1.0)
    try:
        lim = RateLimiter(Limits(requests=7, window_s=1.0), tmp_path / "state", "ep", False)
        threads_done: list[int] = []

        def job(k: int) -> None:  # two "jobs" of one run, each with its own client
            threads_done.append(len(ask_many(client(ep, tmp_path / f"j{k}", lim), 10, 3)))

        jobs = [threading.Thread(target=job, args=(k,)) for k in range(2)]
        for t in jobs:
            t.start()
        for t in jobs:
            t.join(60)
        assert threads_done == [10, 10]
        assert server.rejected == 0 and len(server.log) == 20
    finally:
        ep.close()


# -- the fake endpoint's side -----------------------------------------------------------------
def test_the_fake_endpoint_answers_past_its_limit_with_429_and_the_headers():
    limits = ServerLimits(rpm=2, tpm=100, window_s=5.0)
    ok, h = limits.admit(30)
    assert ok and h["x-ratelimit-remaining-requests"] == "1"
    assert h["x-ratelimit-remaining-tokens"] == "70"
    ok, h = limits.admit(80)  # over the tokens left
    assert not ok and 0 < float(h["Retry-After"]) <= 5.0
    ok, h = limits.admit(20)
    assert ok and h["x-ratelimit-remaining-requests"] == "0"
    assert reset_seconds(h["x-ratelimit-reset-requests"]) == pytest.approx(5.0, abs=0.1)
    ok, _ = limits.admit(1)
    assert not ok and limits.rejected == 2


# -- config ---------------------------------------------------------------------------------------
def load_test_config(over: dict):
    return load_config(snakemake_merge([tiny_config("https://api.example.com/v1"), over]))


def test_a_role_limit_needs_the_roles_own_endpoint():
    with pytest.raises(ConfigError, match=r"rate_limit\.roles\.judge: role judge has no endpoint"):
        load_test_config({"llm": {"rate_limit": {"roles": {"judge": {"requests_per_minute": 5}}}}})


def test_each_role_gets_its_endpoints_limit_at_this_machines_share():
    cfg = load_test_config(
        {
            "llm": {
                "roles": {"judge": {"base_url": "https://judge.example.com/v1"}},
                "rate_limit": {
                    "requests_per_minute": 1000,
                    "tokens_per_minute": 2_000_000,
                    "share": 0.25,
                    "roles": {"judge": {"requests_per_minute": 40}},
                },
            }
        }
    )
    assert rate_limit.configured(cfg, "assistant") == Limits(250, 500_000)
    assert rate_limit.configured(cfg, "judge") == Limits(10, None)
