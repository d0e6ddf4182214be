"""The estimate's rates: what the protocol leaves to the data (turns per episode, critic
rounds, write-side calls per write, misses, tokens per call).

Before any run, the release's published budget (docs/release-format.md, §7) and each
system's declared cost priors give them (``priors``): tokens per call are the paper's Table 5
(and Table 6 for the one-time user generation) over the release's calls behind them. After a
run, its ledger and artifacts do (``observed``).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from memprobe.config.schema import Config
from memprobe.llm import ledger
from memprobe.registry import systems as registry
from memprobe.registry.systems import CostPriors, SystemSpec
from memprobe.vocabulary import MODES

# Each system's own budget (its Table 5 row, the release's turns, write-side and attribution
# calls) is its declaration's cost priors (agents/*.py, ``CostPriors``); a system without them
# is counted from the protocol with its tokens reported as unknown.
PAPER_ATTRIBUTION: tuple[float, float] = (25.47, 1.70)
PAPER_USERS = 50
# Paper Table 6: the one-time generation of the 50 users (persona, bank, tasks, critic, editor).
PAPER_TABLE6: tuple[float, float, float] = (1721, 17.04, 0.17)  # calls, prompt M, completion M
RELEASE_DIMS = 31
RELEASE_ORACLE_CALLS = PAPER_USERS * RELEASE_DIMS  # Stage 0: once per user and dim, shared
# User generation at the release's settings: a persona, one bank call per category, one writer
# and one critic call per task (one critic pass, edits rare). Table 6 reports 1,721 calls for
# 50 users, fewer than these 68 per user: its call count is not comparable, its tokens are.
RELEASE_USER_CALLS = 1 + 5 + 2 * RELEASE_DIMS
# Roles whose calls Table 5 counts in a system's row (gpt-5.4-mini).
TABLE5_ROLES = ("assistant", "simulator", "preference", "writer", "slotfill", "judge")
# The one-time user generation (Table 6).
GENERATION_ROLES = ("generator", "task_writer", "critic", "editor")
# Turns per user assumed for a system without priors (its tokens are reported as unknown).
UNKNOWN_TURNS_PER_USER = 75.0
CALIBRATION_ANCHORS = Path(__file__).resolve().parents[2] / "config" / "judge_calibration.yaml"
_TAG = re.compile(r"^(?:(?P<system>.+?)_)?(?P<user>user_\d{3,})(?:_(?P<rest>.+))?$")


class Rates(BaseModel):
    """What the protocol leaves to the data; keys are systems or ``system/mode``."""

    source: str
    turns_per_episode: dict[str, float] = Field(default_factory=dict)
    critic_rounds_per_task: float = 1.0
    writer_calls_per_write: dict[str, float] = Field(default_factory=dict)
    probe_calls_per_query: dict[str, float] = Field(default_factory=dict)
    slotfill_share: dict[str, float] = Field(default_factory=dict)
    judge_share: dict[str, float] = Field(default_factory=dict)
    disclosure_per_dim: dict[str, float] = Field(default_factory=dict)
    # (mean prompt tokens, mean completion tokens) per call, keyed "role/system" or "role".
    tokens: dict[str, tuple[float, float]] = Field(default_factory=dict)


# -- rates --------------------------------------------------------------------------------
def system_priors(system: str) -> CostPriors | None:
    """A system's declared cost priors (None: none declared, or a name only in imported runs)."""
    return registry.specs()[system].priors if system in registry.specs() else None


def release_calls_per_user(spec: SystemSpec, p: CostPriors) -> float:
    """gpt-5.4-mini calls per user behind a Table 5 row: 3T in the episode loop (reply,
    simulator, preference), the write side where Table 5 counts it (A-Mem: 2N-1, N = T + 31
    notes), 31 slot-fill + 31 judge per mode (retrieve: a searchable system only)."""
    t = p.turns_per_user
    w = p.writer_calls_per_write
    writes = w * (t + RELEASE_DIMS) - p.first_write_saves if p.writer_in_table5 and w else 0
    return 3 * t + writes + 2 * RELEASE_DIMS * (2 if spec.searchable else 1)


def paper_table5() -> dict[str, tuple[float, float]]:
    return {s: x.priors.table5_m for s, x in registry.specs().items() if x.priors}


def prior_tokens() -> dict[str, tuple[float, float]]:
    """The paper's mean (prompt, completion) tokens per call, keyed "role/system" or "role".

    Per system: its Table 5 row over the release's calls behind it; the user-generation roles:
    Table 6 over its calls; Stage 0/1/2: the attribution row over S0 + the S1/S2 calls.
    """
    out: dict[str, tuple[float, float]] = {}
    released = 0
    for s, spec in registry.specs().items():
        if (pr := spec.priors) is None:
            continue
        p, c = pr.table5_m
        n = release_calls_per_user(spec, pr) * PAPER_USERS
        for role in TABLE5_ROLES:
            if role != "writer" or pr.writer_tokens_known:
                out[f"{role}/{s}"] = (p * 1e6 / n, c * 1e6 / n)
        if registry.builtin(s):  # the paper's release ran the built-ins only
            released += sum(pr.attribution.values())
    _, p, c = PAPER_TABLE6
    n = RELEASE_USER_CALLS * PAPER_USERS
    for role in GENERATION_ROLES:
        out[role] = (p * 1e6 / n, c * 1e6 / n)
    n = RELEASE_ORACLE_CALLS + released
    for role in ("oracle", "disclosure"):
        out[role] = (PAPER_ATTRIBUTION[0] * 1e6 / n, PAPER_ATTRIBUTION[1] * 1e6 / n)
    return out


def turns_per_user(system: str) -> float:
    p = system_priors(system)
    return p.turns_per_user if p else UNKNOWN_TURNS_PER_USER


def priors(cfg: Config) -> Rates:
    """Rates from the release's published budget (docs/release-format.md, §7)."""
    r = Rates(
        source="priors: call rates from the release's budget (docs/release-format.md); tokens "
        "per call = paper Table 5 (users: Table 6) / the release's calls behind them"
    )
    empty_transcript = cfg.compat.retrieve_attribution_empty_transcript
    for s in cfg.systems:
        p = system_priors(s)
        r.turns_per_episode[s] = turns_per_user(s) / RELEASE_DIMS
        r.writer_calls_per_write[s] = p.writer_calls_per_write if p else 0.0
        r.probe_calls_per_query[s] = p.probe_calls_per_query if p else 0.0
        for m in cfg.modes:
            key = f"{s}/{m}"
            # A system that stores nothing (nomem): slot-fill over an empty store makes no call
            # (and so no judge).
            r.slotfill_share[key] = 0.0 if p and p.empty_store else 1.0
            r.judge_share[key] = r.slotfill_share[key]
            released: float | None = p.attribution.get(m) if p else None
            if p and released is not None and m == "retrieve" and not empty_transcript:
                released *= p.retrieve_attribution_paid
            r.disclosure_per_dim[key] = (
                released / PAPER_USERS / RELEASE_DIMS if released is not None else 2.0
            )
    return r


def replayed_turns(cfg: Config, rates: Rates, recorded: str, counted: float | None) -> Rates:
    """``rollout.replay``: every system's turns per episode are the recorded run's, whatever
    the system: ``counted`` in its files where the release is at hand (release.layout
    ``recorded_turns``), else the prior of ``recorded``, the system whose run it is."""
    run = cfg.rollout.replay
    if not run:
        return rates
    if counted is None:
        counted = turns_per_user(recorded) / RELEASE_DIMS
        rates.source += f"; turns: {recorded}'s prior ({run}'s files are not all at hand)"
    else:
        rates.source += f"; turns: counted in {run}'s recorded episodes ({counted:.2f} per episode)"
    rates.turns_per_episode = dict.fromkeys(cfg.systems, counted)
    return rates


def read_ledger(results: Path, *more: Path) -> list[dict[str, str]]:
    """The ledger rows under ``results`` (and under ``more``: the run's shared users)."""
    rows: list[dict[str, str]] = []
    for f in ledger.run_files(results, more):
        for row in ledger.read_rows([f]):
            rule, _, tag = row.get("job", "").partition("/")
            m = _TAG.match(tag)
            row["rule"] = rule or f.parent.name
            row["system"] = (m.group("system") or "") if m else ""
            row["user"] = m.group("user") if m else ""
            row["mode"] = (m.group("rest") or "") if m else ""
            rows.append(row)
    return rows


def _first_try(row: dict[str, str]) -> bool:
    return row.get("status", "ok") == "ok" and row.get("reask", "0") in ("", "0")


def load_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def observed(results: Path, cfg: Config, users: Iterable[Path] = ()) -> Rates | None:
    """Rates measured on an earlier run's ledger and artifacts (None when there is no ledger);
    ``users``: the shared users' folders, whose ledgers hold the users' generation."""
    rows = read_ledger(results, *users)
    if not rows:
        return None
    r = priors(cfg)
    r.source = f"ledger and artifacts of {results}"
    systems = sorted({p.parent.parent.name for p in results.glob("*/*/episodes.json")})
    for s in systems:
        eps = [e for p in results.glob(f"{s}/*/episodes.json") for e in load_json(p)["episodes"]]
        turns = sum(len(e["turns"]) for e in eps)
        if eps:
            r.turns_per_episode[s] = turns / len(eps)
        writes = turns + len(eps)
        w = [
            x
            for x in rows
            if x["rule"] in ("rollout", "replay") and x["system"] == s and x["role"] == "writer"
        ]
        if writes:
            r.writer_calls_per_write[s] = sum(map(_first_try, w)) / writes
        probes = list(results.glob(f"{s}/*/retrieved_k*.json"))
        pw = [x for x in rows if x["rule"] == "probe" and x["system"] == s and _first_try(x)]
        n_queries = sum(len(load_json(p)["queries"]) for p in probes)
        if n_queries:
            r.probe_calls_per_query[s] = len(pw) / n_queries
        for m in MODES:
            fills = [
                e for p in results.glob(f"{s}/*/{m}/slotfill.json") for e in load_json(p)["entries"]
            ]
            if fills:
                r.slotfill_share[f"{s}/{m}"] = sum(e.get("called", True) for e in fills) / len(
                    fills
                )
                r.judge_share[f"{s}/{m}"] = sum(
                    e["label"].strip().strip(".").lower() not in ("", "unknown") for e in fills
                ) / len(fills)
            atts = [
                d
                for p in results.glob(f"{s}/*/{m}/attribution.json")
                for d in load_json(p)["details"]
            ]
            if atts:
                # Paid calls, not stages: a stage question the other mode already asked (the
                # same transcript and target) is answered from the cache.
                asked = [
                    x
                    for x in rows
                    if x["rule"] == "attribution"
                    and (x["system"], x["mode"]) == (s, m)
                    and x["role"] == "disclosure"
                    and x["cached"] == "false"
                    and _first_try(x)
                ]
                r.disclosure_per_dim[f"{s}/{m}"] = len(asked) / len(atts)
    tasks = [t for p in results.glob("users/*/tasks.json") for t in load_json(p)["tasks"]]
    if tasks:
        r.critic_rounds_per_task = sum(len(t["verdicts"]) for t in tasks) / len(tasks)
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for x in rows:
        if x.get("status", "ok") != "ok":
            continue
        for key in (x["role"], f"{x['role']}/{x['system']}" if x["system"] else None):
            if key:
                acc = sums[key]
                acc[0] += float(x["prompt_tokens"] or 0)
                acc[1] += float(x["completion_tokens"] or 0)
                acc[2] += 1
    r.tokens = {k: (v[0] / v[2], v[1] / v[2]) for k, v in sums.items() if v[2]}
    return r
