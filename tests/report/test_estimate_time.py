"""The estimate's money and time (memprobe/report/estimate_time.py): tokens times prices, and the
wall time as the largest of its bounds (chain, streams, rate limit)."""

from __future__ import annotations

import pytest
import yaml

from memprobe.config.loading import load_config
from memprobe.config.schema import Price
from memprobe.llm.providers import backend
from memprobe.report import estimate, estimate_calls, estimate_rates, estimate_time
from tests.helpers.estimate import paper_like
from tests.helpers.workflow import ROOT


def test_money_is_tokens_times_the_price(monkeypatch):
    cfg = load_config(paper_like())
    lines = estimate_calls.predict(cfg, estimate_rates.priors(cfg))
    price = Price(input=1.0, output=10.0)
    usd, unpriced = estimate_time.money(lines, {"gpt-5.4-mini": price})
    p = sum(x.prompt_tokens for x in lines)
    c = sum(x.completion_tokens for x in lines)
    assert usd == pytest.approx(p / 1e6 + 10 * c / 1e6) and unpriced == []
    usd, unpriced = estimate_time.money(lines, {})
    assert usd == 0 and len(unpriced) == sum(1 for x in lines if x.calls)


def test_the_wall_time_under_a_rate_limit_is_its_largest_bound():
    """requests / RPM and tokens / TPM join the chain and the streams; the largest binds."""
    raw = paper_like()
    raw["llm"] = {**raw["llm"], "rate_limit": {"requests_per_minute": 600, "share": 0.25}}
    cfg = load_config(raw)
    rates = estimate_rates.priors(cfg)
    lines = estimate_calls.predict(cfg, rates)
    limited = estimate_time.wall_time(cfg, lines, latency_s=1.0, llm_slots=16)
    mini = sum(x.calls for x in lines if x.model == cfg.llm.model)  # Mem-T-4B is not limited
    # The whole run's limit, not this machine's share of it.
    assert limited.requests_s == pytest.approx(mini / 600 * 60)
    assert limited.binding == "requests per minute" and limited.seconds == limited.requests_s
    raw["llm"]["rate_limit"] = {"tokens_per_minute": 100_000}
    cfg = load_config(raw)
    tpm = estimate_time.wall_time(cfg, lines, latency_s=1.0, llm_slots=16)
    tokens = sum(
        (x.prompt_tokens or 0) + (x.completion_tokens or 0)
        for x in lines
        if x.model == cfg.llm.model
    )
    assert tpm.tokens_s == pytest.approx(tokens / 100_000 * 60) and tpm.requests_s == 0
    assert tpm.binding == "tokens per minute"
    raw["llm"].pop("rate_limit")
    free = estimate_time.wall_time(load_config(raw), lines, latency_s=1.0, llm_slots=16)
    assert free.requests_s == free.tokens_s == 0
    assert free.seconds == max(free.chain_s, free.streams_s)


def test_a_rollout_holds_its_slot_for_one_call_at_a_time_and_a_served_model_is_its_own():
    """A rollout's turns are sequential, so a slot held by one carries a single call, not
    llm.concurrency: the slots bound is at least the rollouts' calls over the slots. Mem-T's
    writer calls go to its own server, at that server's pace."""
    memt = {"endpoint": "http://127.0.0.1:2/v1"}
    cfg = load_config(paper_like(systems=["nomem", "amem", "memt"], system_settings={"memt": memt}))
    lines = estimate_calls.predict(cfg, estimate_rates.priors(cfg))
    turns = sum(x.calls for x in lines if x.role in ("assistant", "simulator"))
    hosted = estimate_time.wall_time(cfg, lines, latency_s=1.0, llm_slots=16)
    assert hosted.streams_s > turns / 16 > sum(x.calls for x in lines) / (16 * 4)
    quick = estimate_time.wall_time(cfg, lines, latency_s=1.0, llm_slots=16, served_latency_s=0.0)
    (memt_writer,) = [x for x in lines if x.system == "memt" and x.role == "writer"]
    assert hosted.streams_s - quick.streams_s == pytest.approx(memt_writer.calls / 16)
    assert quick.chain_s < hosted.chain_s and quick.provider_calls == hosted.provider_calls
    # One user's chain: the tasks written one by one, then the longest rollout, turn by turn.
    per_user = {(x.system, x.role): x.calls / cfg.n_users for x in lines}
    tasks = sum(per_user[("(per user)", r)] for r in ("generator", "task_writer", "critic"))
    amem = sum(per_user[("amem", r)] for r in ("assistant", "simulator", "writer"))
    rounds = -(-cfg.n_dims // cfg.llm.concurrency)  # slot-fill, judge, Stage 1, Stage 2
    assert quick.chain_s == pytest.approx(tasks + amem + 4 * rounds)  # amem: the longest
    assert hosted.provider_calls == sum(x.calls for x in lines) - memt_writer.calls


def test_the_local_backend_waits_for_its_servers_slots_at_the_local_models_pace():
    """The offline default: no more calls in flight than the llama.cpp server has slots, and
    without a ledger the local 0.5B model's seconds per call, not a hosted model's."""
    cfg = load_config(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))
    assert cfg.llm.backend == "local"
    # 4 server slots: 2 jobs' conversations (the workflow holds the other jobs back).
    assert estimate_time.streams(cfg, llm_slots=8) == cfg.llm.local.jobs_at_once == 2
    local = backend("local").assumed_latency_s
    assert estimate.assumed_latency(cfg) == local == 15.3
    rates = estimate_rates.priors(cfg)
    lines = estimate_calls.predict(cfg, rates)
    wall = estimate_time.wall_time(cfg, lines, estimate.assumed_latency(cfg), llm_slots=8)
    calls = sum(x.calls for x in lines)
    assert wall.streams_s == pytest.approx(calls * local / 2)
    hosted = load_config(paper_like())
    assert estimate_time.streams(hosted, llm_slots=8) == 8 * hosted.llm.concurrency
    assert estimate.assumed_latency(hosted) == backend("openai").assumed_latency_s == 4.0
