"""The estimate's calls: per user and role, what the protocol requires given the rates
(per user: a persona, a bank call per category, a writer and a critic per task; per user and
system: the turns, the write path, slot-fill and judge per mode, attribution for the misses),
and the tokens of each line; set beside the paper's Table 5.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from memprobe.config.schema import Config, role_settings
from memprobe.registry import systems as registry
from memprobe.report.estimate_rates import (
    CALIBRATION_ANCHORS,
    PAPER_ATTRIBUTION,
    PAPER_TABLE6,
    PAPER_USERS,
    Rates,
    paper_table5,
    prior_tokens,
    system_priors,
)


class Line(BaseModel):
    system: str  # "(per user)" for the user-level roles shared by every system
    role: str
    model: str
    calls_per_user: float
    calls: float
    prompt_tokens: float | None  # None: no ledger and no prior says
    completion_tokens: float | None
    tokens_from: str


# -- prediction -----------------------------------------------------------------------------
def protocol_calls(cfg: Config, rates: Rates) -> dict[tuple[str, str], float]:
    """Calls per user, keyed (system or "(per user)", role)."""
    d = cfg.n_dims
    cats = sum(1 for n in cfg.dims_per_category.values() if n > 0)
    prefs = cfg.dims_per_category["assistance_preference"]
    rounds = rates.critic_rounds_per_task
    # The release's users (users.source: release) are imported, not generated.
    made = cfg.users.source == "generate"
    calls: dict[tuple[str, str], float] = {
        ("(per user)", "generator"): (1 + cats) * made,
        ("(per user)", "task_writer"): d * made,
        ("(per user)", "critic"): d * rounds * made,
        ("(per user)", "editor"): d * (rounds - 1) * made,
        ("(per user)", "oracle"): d,
    }
    # A replay (rollout.replay) holds no conversation: no reply, simulator or preference call,
    # and the recorded run's turns (not capped by max_turns: they happened).
    live = not cfg.rollout.replay
    for s in cfg.systems:
        t = rates.turns_per_episode.get(s, 2.5)
        t = (min(t, cfg.max_turns) if live else t) * d
        calls[(s, "assistant")] = t * live
        calls[(s, "simulator")] = t * live
        calls[(s, "preference")] = t * live if prefs else 0
        writes = t + d  # one write per turn and one for each episode's final user message
        w = writes * rates.writer_calls_per_write.get(s, 0.0)
        if w and (p := system_priors(s)):
            w -= p.first_write_saves  # A-Mem: the first note has no neighbour to evolve with
        modes = [m for m in cfg.modes if m == "dump_all" or registry.spec(s).searchable]
        if "retrieve" in modes:
            w += d * rates.probe_calls_per_query.get(s, 0.0) * len(cfg.ks)
        calls[(s, "writer")] = w
        slot = judge = disc = 0.0
        for m in modes:
            scorings = len(cfg.ks) if m == "retrieve" else 1
            slot += d * rates.slotfill_share.get(f"{s}/{m}", 1.0) * scorings
            judge += d * rates.judge_share.get(f"{s}/{m}", 1.0) * scorings
            disc += d * rates.disclosure_per_dim.get(f"{s}/{m}", 2.0)
        calls[(s, "slotfill")] = slot
        calls[(s, "judge")] = judge if cfg.judge.form == "llm" else 0.0  # scorer: no LLM
        calls[(s, "disclosure")] = disc
    return calls


def _tokens_per_call(
    rates: Rates, system: str, role: str
) -> tuple[tuple[float, float] | None, str]:
    """The ledger's rate for this role and system, else the paper's, else the role's mean."""
    prior = prior_tokens()
    own = system_priors(system)
    unknown_writer = role == "writer" and own is not None and not own.writer_tokens_known
    if unknown_writer and f"{role}/{system}" not in rates.tokens:
        return None, "unknown: no ledger, and the paper does not count these calls"
    shared = system == "(per user)"  # user-level roles: the ledger keys them by role alone
    for key, table, name in (
        (f"{role}/{system}", rates.tokens, "ledger"),
        (f"{role}/{system}", prior, "prior (paper)"),
        (role, rates.tokens, "ledger" if shared else "ledger, role mean"),
        (role, prior, "prior (paper)"),
    ):
        if key in table:
            return table[key], name
    return None, f"unknown: no ledger, and no prior for {system}"


def line_model(cfg: Config, system: str, role: str) -> str:
    """The model that serves a role (a system that serves its own model writes with it:
    memt's Mem-T, named by its settings' ``model``)."""
    res = registry.specs()[system].resources if system in registry.specs() else None
    if role == "writer" and res and res.served_model:
        return str(getattr(cfg.system_settings, system).model)
    return role_settings(cfg, role)["model"]


def _line(cfg: Config, rates: Rates, system: str, role: str, per_user: float) -> Line:
    tok, src = _tokens_per_call(rates, system, role) if per_user else ((0.0, 0.0), "-")
    n = per_user * cfg.n_users
    return Line(
        system=system,
        role=role,
        model=line_model(cfg, system, role),
        calls_per_user=round(per_user, 1),
        calls=round(n),
        prompt_tokens=round(n * tok[0]) if tok else None,
        completion_tokens=round(n * tok[1]) if tok else None,
        tokens_from=src,
    )


def predict(cfg: Config, rates: Rates) -> list[Line]:
    out = [
        _line(cfg, rates, system, role, per_user)
        for (system, role), per_user in protocol_calls(cfg, rates).items()
    ]
    # The judge's calibration: an LLM judge makes one call per pair, per run.
    if not cfg.release.import_runs and cfg.judge.form == "llm":
        from memprobe.protocol import calibration

        cal = cfg.judge.calibration
        n = (
            cal.n
            if cal.source == "release"
            else len(calibration.load_anchors(CALIBRATION_ANCHORS).items)
        )
        line = _line(cfg, rates, "(per run)", "judge", n / cfg.n_users)
        judged = [
            v
            for k, v in prior_tokens().items()
            if k.startswith("judge/") and registry.builtin(k.split("/", 1)[1])
        ]
        if line.prompt_tokens is None and judged:  # no ledger: the judge's mean prior
            p, c = (sum(v[i] for v in judged) / len(judged) for i in (0, 1))
            line = line.model_copy(
                update={
                    "prompt_tokens": round(n * p),
                    "completion_tokens": round(n * c),
                    "tokens_from": "prior (paper, the judge's mean)",
                }
            )
        out.append(line)
    return out


def in_table5(system: str, role: str) -> bool:
    """Whether a system's Table 5 row counts this role's calls: not its write side where that
    ran on another model (mem0: gpt-4o-mini, memt: Mem-T-4B); attribution has its own row."""
    p = system_priors(system)
    return role != "disclosure" and not (role == "writer" and p and not p.writer_in_table5)


def total_of(lines: list[Line], field: str) -> float | None:
    vals = [getattr(x, field) for x in lines]
    return None if any(v is None for v in vals) else sum(vals)


def table5_compare(cfg: Config, lines: list[Line]) -> list[dict[str, Any]]:
    """Predicted tokens per system, scaled to the paper's 50 users, next to paper Table 5."""
    scale = PAPER_USERS / cfg.n_users
    groups = {s: [x for x in lines if x.system == s and in_table5(s, x.role)] for s in cfg.systems}
    groups["attribution"] = [x for x in lines if x.role in ("oracle", "disclosure")]
    groups["users"] = [x for x in lines if x.system == "(per user)" and x.role != "oracle"]
    rows = []
    for name, mine in groups.items():
        p, c = total_of(mine, "prompt_tokens"), total_of(mine, "completion_tokens")
        total = None if p is None or c is None else (p + c) * scale / 1e6
        paper = {"attribution": PAPER_ATTRIBUTION, "users": PAPER_TABLE6[1:]}.get(
            name, paper_table5().get(name)
        )
        ptotal = sum(paper) if paper else None
        rows.append(
            {
                "component": name,
                "predicted_M": None if total is None else round(total, 2),
                "paper_M": round(ptotal, 2) if ptotal else None,
                "ratio": round(total / ptotal, 3) if ptotal and total is not None else None,
            }
        )
    return rows
