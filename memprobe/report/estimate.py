"""``memprobe estimate``: what a run will cost, per role, before it starts (its text).

The protocol fixes most call counts; what it leaves to the data (turns per episode, critic
rounds, write-side calls per write, misses, tokens per call) comes from *rates*: the
release's published budget (docs/release-format.md, §7) when no run exists, else the ledger
and artifacts of an earlier run. A role with neither (Mem-T-4B's local calls, a plugin
system) is reported as unknown. The parts, one module each:

- ``estimate_rates``: the rates, from priors or from an earlier run (``priors``, ``observed``);
- ``estimate_calls``: the calls and tokens per role they give (``predict``), beside Table 5;
- ``estimate_time``: money from a price table, hours over the run's slots and rate limit;
- ``estimate_audit``: a finished run's ledger against the calls its protocol required.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from memprobe.config.loading import set_dotted
from memprobe.config.schema import Config, Price
from memprobe.llm.providers import backend
from memprobe.report.estimate_calls import predict, table5_compare, total_of
from memprobe.report.estimate_rates import UNKNOWN_TURNS_PER_USER, Rates, system_priors
from memprobe.report.estimate_time import money, streams_note, wall_time


# -- the command --------------------------------------------------------------------------------
def assumed_latency(cfg: Config) -> float:
    """Seconds per call when no ledger says: what the run's backend assumes (a hosted mini
    model's, the local model's on 2 cores)."""
    return backend(cfg.llm.backend).assumed_latency_s


def parse_config_args(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs (values in YAML, dotted keys nest: ``llm.concurrency=8``)."""
    import yaml

    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--config {pair}: expected KEY=VALUE (e.g. llm.concurrency=8)")
        set_dotted(out, key, yaml.safe_load(value))
    return out


def load_configs(paths: list[str], overrides: list[str] | None = None) -> Config:
    """Layer the configs as the Snakefile does: config/config.yaml, each file, then --config."""
    from memprobe.config.loading import load_files

    return load_files(paths, parse_config_args(overrides) if overrides else None)


def report(
    cfg: Config,
    rates: Rates,
    prices: dict[str, Price] | None = None,
    latency_s: float = 4.0,
    latency_from: str = "assumed",
    llm_slots: int = 8,
) -> str:
    lines = predict(cfg, rates)
    out = [
        f"memprobe estimate: {cfg.n_users} user{'s' if cfg.n_users != 1 else ''} x "
        f"{cfg.n_dims} dims, systems {', '.join(cfg.systems)}, "
        f"modes {', '.join(cfg.modes)}, k {cfg.ks}, "
        f"max_turns {cfg.max_turns}",
        f"rates: {rates.source}",
    ]
    if cfg.rollout.replay:
        out.append(
            f"conversations: replay of {cfg.rollout.replay} (no simulator, assistant or "
            "preference call; the recorded run's turns)"
        )
    if blind := [s for s in cfg.systems if system_priors(s) is None]:
        out.append(
            f"no cost priors: {', '.join(blind)} (turns assumed {UNKNOWN_TURNS_PER_USER:g} per "
            "user, no write-side calls counted; tokens unknown unless a ledger has them)"
        )
    out += [
        "",
        f"{'system':<14}{'role':<12}{'calls/user':>11}{'calls':>10}"
        f"{'prompt tok':>14}{'compl. tok':>12}  tokens from",
    ]

    def num(v: float | None, width: int) -> str:
        return f"{'unknown':>{width}}" if v is None else f"{v:>{width}.0f}"

    for x in lines:
        out.append(
            f"{x.system:<14}{x.role:<12}{x.calls_per_user:>11.1f}{x.calls:>10.0f}"
            f"{num(x.prompt_tokens, 14)}{num(x.completion_tokens, 12)}  {x.tokens_from}"
        )
    tot = sum(x.calls for x in lines)
    p_tot, c_tot = total_of(lines, "prompt_tokens"), total_of(lines, "completion_tokens")
    known = [x for x in lines if x.prompt_tokens is not None]
    if p_tot is None:
        p_tot, c_tot = total_of(known, "prompt_tokens"), total_of(known, "completion_tokens")
    note = "" if len(known) == len(lines) else "  (+ the unknown lines above)"
    out.append(f"{'total':<26}{'':>11}{tot:>10.0f}{num(p_tot, 14)}{num(c_tot, 12)}{note}")
    per_sys: dict[str, float] = defaultdict(float)
    for x in lines:
        if x.system != "(per user)":
            per_sys[x.system] += x.calls_per_user
    out += ["", "calls per user per system (episode loop + write side + scoring + attribution):"]
    out += [f"  {s}: {v:.1f}" for s, v in per_sys.items()]

    out += ["", "money:"]
    if prices is None:
        out.append("  pass --prices FILE (model: {input: USD, output: USD} per 1M tokens)")
    else:
        usd, unpriced = money(lines, prices)
        out.append(f"  {usd:,.2f} USD for the priced calls")
        out += [f"  not priced: {u}" for u in unpriced]

    wall = wall_time(cfg, lines, latency_s, llm_slots)
    rl = cfg.llm.rate_limit
    limit = ", ".join(
        f"{n:,} {what} per minute"
        for n, what in ((rl.requests_per_minute, "requests"), (rl.tokens_per_minute, "tokens"))
        if n
    )
    out += [
        "",
        f"time: at {latency_s:.1f} s per call ({latency_from}), {streams_note(cfg, llm_slots)}"
        + (f", llm.rate_limit {limit}:" if limit else ":"),
        f"  {wall.seconds / 3600:.1f} h, bound by {wall.binding} (every job's calls over the "
        f"parallel streams: {wall.streams_s / 3600:.1f} h; one user's chain of dependent calls: "
        f"{wall.chain_s / 3600:.1f} h"
        + (f"; requests / RPM: {wall.requests_s / 3600:.1f} h" if wall.requests_s else "")
        + (f"; tokens / TPM: {wall.tokens_s / 3600:.1f} h" if wall.tokens_s else "")
        + ")",
    ]

    out += [
        "",
        "vs paper Table 5 (M tokens, scaled to 50 users; the paper's are upper bounds; the "
        "users row: Table 6):",
    ]
    if cfg.rollout.replay:
        out.append("  (a replay: the paper's rows include the conversation calls it does not make)")
    for row in table5_compare(cfg, lines):
        pred = "unknown" if row["predicted_M"] is None else f"{row['predicted_M']:.2f}"
        paper = "-" if row["paper_M"] is None else f"{row['paper_M']:.2f}"
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.3f}"
        out.append(f"  {row['component']:<14} predicted {pred:>9}  paper {paper:>8}  ratio {ratio}")
    return "\n".join(out)
