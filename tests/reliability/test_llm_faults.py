"""The LLM layer against a misbehaving endpoint: every fault kind, Retry-After, bounds, secrets."""

from __future__ import annotations

import csv
import os
import time

import httpx
import openai
import pytest
from pydantic import BaseModel

from memprobe.llm.cache import ResponseCache
from memprobe.llm.client import LLM, LLMError
from memprobe.llm.ledger import Ledger
from memprobe.llm.providers import OpenAICompatible
from memprobe.testing.fake_endpoint import FAULT_KINDS, Faults
from tests.helpers.endpoint import Endpoint

SECRET = "sk-sentinel-0123456789abcdef"


class Reply(BaseModel):
    label: str
    score: int


def make_llm(base_url: str, tmp_path, **kw) -> LLM:
    opts = dict(max_attempts=6, resample_invalid=6, backoff_s=0.01, timeout_s=0.5)
    opts.update(kw)
    return LLM(
        "judge",
        backend="openai",
        base_url=base_url,
        model="fake-model",
        api_key_env="MEMPROBE_TEST_KEY",
        temperature=0.0,
        max_tokens=None,
        seed=1,
        cache=ResponseCache(tmp_path / "cache"),
        ledger=Ledger(tmp_path / "ledger.csv", job="test"),
        **opts,
    )


MESSAGES = [{"role": "user", "content": "rate the reply"}]


@pytest.fixture
def faulty():
    endpoints: list[Endpoint] = []

    def start(faults: Faults | None) -> Endpoint:
        ep = Endpoint()
        ep.server.faults = faults
        endpoints.append(ep)
        return ep

    yield start
    for ep in endpoints:
        ep.close()


def test_every_fault_kind_is_survived_and_gives_the_clean_reply(faulty, tmp_path):
    clean = make_llm(faulty(None).base_url, tmp_path / "clean")
    want = [clean.json(MESSAGES, Reply, sample=i) for i in range(4)]
    want_text = clean.text(MESSAGES)
    for kind in FAULT_KINDS:
        faults = Faults({kind: 0.5}, seed=3, hold_s=0.8, retry_after=0.05)
        ep = faulty(faults)
        llm = make_llm(ep.base_url, tmp_path / kind)
        got = [llm.json(MESSAGES, Reply, sample=i) for i in range(4)]
        assert got == want, kind
        assert llm.text(MESSAGES) == want_text, kind
        assert faults.injected, f"{kind}: the seed injected nothing; the test proves nothing"


def test_a_never_answering_endpoint_fails_with_role_and_place_after_bounded_attempts(
    faulty, tmp_path
):
    ep = faulty(Faults({"server_error": 1.0}))
    llm = make_llm(ep.base_url, tmp_path, max_attempts=3)
    with pytest.raises(LLMError) as err:
        llm.json(MESSAGES, Reply, where="user user_002, system nomem, episode 3")
    msg = str(err.value)
    assert "\n" not in msg
    assert "role judge" in msg and "user user_002" in msg and "episode 3" in msg
    assert "3 attempt(s)" in msg
    assert ep.server.faults.requests == 3


def test_an_endpoint_that_only_sends_garbage_is_reasked_then_fails_cleanly(faulty, tmp_path):
    ep = faulty(Faults({"schema_invalid": 1.0}))
    llm = make_llm(ep.base_url, tmp_path, resample_invalid=1, max_reasks=1)
    with pytest.raises(LLMError) as err:
        llm.json(MESSAGES, Reply, where="user user_001, episode 2")
    assert "no valid reply after 2 tries" in str(err.value)
    assert "user user_001, episode 2" in str(err.value)
    # 1 re-ask x (1 re-sample + 1 final) = 4 paid replies, none of them cached as "ok".
    rows = list(csv.DictReader(open(tmp_path / "ledger.csv")))
    assert len(rows) == 4
    assert [r["status"] for r in rows].count("invalid") == 2
    # The failed chain left nothing a rerun would replay...
    assert not list((tmp_path / "cache").rglob("*.json"))
    # ...so once the endpoint has recovered, the rerun asks it again and succeeds.
    ep.server.faults = recovered = Faults({})
    assert llm.json(MESSAGES, Reply, where="user user_001, episode 2")
    assert recovered.requests == 1


def test_retry_after_is_honoured(faulty, tmp_path):
    faults = Faults({"rate_limit": 1.0}, retry_after=0.7)
    ep = faulty(faults)
    llm = make_llm(ep.base_url, tmp_path, max_attempts=2)
    start = time.monotonic()
    with pytest.raises(LLMError, match="RateLimitError"):
        llm.text(MESSAGES)
    assert time.monotonic() - start >= 0.7  # backoff_s alone would wait 0.01 s
    assert faults.requests == 2


def test_faulted_attempts_are_never_cached(faulty, tmp_path):
    ep = faulty(Faults({"bad_content": 0.25, "schema_invalid": 0.25}, seed=5))
    llm = make_llm(ep.base_url, tmp_path)
    for i in range(6):
        llm.json(MESSAGES, Reply, sample=i)
    entries = list((tmp_path / "cache").rglob("*.json"))
    assert len(entries) == 6
    for path in entries:
        Reply.model_validate_json(ResponseCache(tmp_path / "cache").get(path.stem)["content"])
    rows = list(csv.DictReader(open(tmp_path / "ledger.csv")))
    ok = [r["key"] for r in rows if r["status"] == "ok" and r["cached"] == "false"]
    assert len(ok) == len(set(ok)) == 6
    assert any(r["status"] == "invalid" for r in rows)


def test_every_delivered_reply_is_on_the_ledger_exactly_once(faulty, tmp_path):
    """Must-show 5: each completion the endpoint delivered (clean, empty, off-schema, cut
    JSON) is one ledger row with cached=false; faults that deliver nothing have none."""
    rates = {k: 0.05 for k in FAULT_KINDS} | {"bad_content": 0.1, "schema_invalid": 0.1}
    faults = Faults(rates, seed=12, hold_s=0.8, retry_after=0.01)
    ep = faulty(faults)
    llm = make_llm(ep.base_url, tmp_path)
    for i in range(12):
        llm.json(MESSAGES, Reply, sample=i)
        llm.text(MESSAGES, sample=i)
    undelivered = ("rate_limit", "server_error", "timeout", "truncated", "malformed")
    delivered = faults.requests - sum(faults.injected[k] for k in undelivered)
    rows = list(csv.DictReader(open(tmp_path / "ledger.csv")))
    paid = [r for r in rows if r["cached"] == "false"]
    assert len(paid) == delivered
    status = [r["status"] for r in paid]
    assert status.count("empty") == faults.injected["empty"] > 0
    assert (
        status.count("invalid")
        == faults.injected["bad_content"] + faults.injected["schema_invalid"]
    )
    assert status.count("ok") == 24  # one per call; no failed call had to be re-asked
    assert all(r["finish_reason"] for r in paid)
    assert set(faults.injected) == set(FAULT_KINDS)  # this seed injects every kind


@pytest.mark.parametrize("code", [401, 500])  # 401: not retried; 500: retried then fails
def test_the_api_key_never_reaches_an_error_message(code, monkeypatch, tmp_path):
    """An endpoint that echoes the Authorization header (some proxies do) in its error body."""
    monkeypatch.setenv("MEMPROBE_TEST_KEY", SECRET)

    def echo(request: httpx.Request) -> httpx.Response:
        auth = request.headers["authorization"]
        return httpx.Response(code, json={"error": {"message": f"bad key {auth}; key={SECRET}"}})

    llm = make_llm("http://echo.invalid/v1", tmp_path, max_attempts=2)
    llm.provider = OpenAICompatible(
        llm.endpoint,
        openai.OpenAI(
            base_url=llm.base_url,
            api_key=os.environ["MEMPROBE_TEST_KEY"],
            max_retries=0,
            http_client=httpx.Client(transport=httpx.MockTransport(echo)),
        ),
    )  # a client given by hand serves this role alone
    with pytest.raises(LLMError) as err:
        llm.text(MESSAGES, where="user user_001, episode 1")
    assert "bad key" in str(err.value)  # the endpoint's message is kept...
    assert SECRET not in str(err.value) and SECRET[3:15] not in str(err.value)  # ...not the key


def test_fault_spec_parsing():
    f = Faults.parse("all=0.2,seed=4,hold_s=2,retry_after=1")
    assert abs(sum(f.rates.values()) - 0.2) < 1e-9 and f.seed == 4 and f.hold_s == 2
    f = Faults.parse("rate_limit=0.1,timeout=0.05")
    assert f.rates["rate_limit"] == 0.1 and f.rates["server_error"] == 0
    for bad in ("bogus=0.1", "rate_limit=lots", "all=2", "rate_limit"):
        with pytest.raises(ValueError, match="faults"):
            Faults.parse(bad)
