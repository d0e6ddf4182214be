"""``memprobe estimate``: what a run will cost, per role, before it starts; and an audit after.

The protocol fixes most call counts (per user: one generator call for the persona, one per
non-empty category for the bank, one writer + one critic per task, one oracle call per dim;
per user and system: T turns, each one assistant + one simulator call and one preference call,
plus the system's write path; per mode: at most one slot-fill and one judge call per dim;
attribution Stage 1/2 for the misses). What the protocol leaves to the data (turns per
episode, critic rounds, write-side calls per write, misses, tokens per call) comes from
*rates*: the release's published budget (reference-release.md §7) when no run exists, else the
ledger and artifacts of an earlier run (``observed``).

``audit`` checks a finished run: per user and system, the calls the protocol requires given
what happened (turns taken, labels that were not "unknown", attribution stages reached)
against the ledger's rows; every extra row must be a re-ask or a re-sampled invalid reply.
"""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from memprobe.config import Config
from memprobe.prompts import PROMPT_DIR

# Paper Table 5 (millions of gpt-5.4-mini tokens over 50 users; upper bounds, non-auditable):
# per system the episode loop + write side + dump_all/retrieve scoring; attribution apart.
PAPER_TABLE5: dict[str, tuple[float, float]] = {
    "nomem": (61.05, 6.07),
    "amem": (126.82, 9.04),
    "longctx_full": (238.12, 4.82),
    "mem0": (88.16, 3.99),
    "memt": (120.91, 3.77),  # gpt-5.4-mini side only
}
PAPER_ATTRIBUTION: tuple[float, float] = (25.47, 1.70)
PAPER_USERS = 50
# reference-release.md §7: turns per user (T) and attribution S1+S2 calls per run (50 users).
RELEASE_TURNS_PER_USER = {
    "nomem": 74.1,
    "amem": 77.6,
    "longctx_full": 77.7,
    "mem0": 76.3,
    "memt": 78.7,
}
RELEASE_ATTRIBUTION = {
    "amem/dump_all": 610,
    "amem/retrieve": 886,
    "longctx_full/dump_all": 569,
    "longctx_full/retrieve": 958,
    "mem0/dump_all": 596,
    "mem0/retrieve": 1047,
    "memt/dump_all": 1349,
    "memt/retrieve": 1026,
    "nomem/dump_all": 1544,
}
RELEASE_DIMS = 31
# Write-side calls per write (one write per turn and one per episode end), release priors:
# A-Mem analyze + evolve; mem0 one extraction; Mem-T one formation (its updates and ReAct
# steps are data-dependent: only a ledger knows them).
WRITER_CALLS_PER_WRITE = {"amem": 2.0, "mem0": 1.0, "memt": 1.0}
MEMT_REACT_STEPS = 6  # the step budget per probe query (upper bound)
ROLE_PROMPTS = {
    "generator": ("persona_narrative", "bank_select"),
    "task_writer": ("task_write",),
    "critic": ("task_critic",),
    "editor": ("task_edit",),
    "simulator": ("user_simulator",),
    "assistant": ("assistant_system",),
    "writer": ("amem_analyze", "amem_evolve"),
    "preference": ("preference_judge",),
    "slotfill": ("slotfill",),
    "judge": ("recovery_judge",),
    "oracle": ("attribution_oracle",),
    "disclosure": ("attribution_disclosure", "attribution_subclass"),
}
USER_ROLES = ("generator", "task_writer", "critic", "editor", "oracle")
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


class Line(BaseModel):
    system: str  # "(per user)" for the user-level roles shared by every system
    role: str
    calls_per_user: float
    calls: float
    prompt_tokens: float
    completion_tokens: float
    tokens_from: str


# -- rates --------------------------------------------------------------------------------
def _template_tokens(role: str) -> float:
    """A floor for prompt tokens per call: the role's template text alone (~4 chars/token)."""
    sizes = [
        len((PROMPT_DIR / f"{n}.md").read_text(encoding="utf-8"))
        for n in ROLE_PROMPTS.get(role, ())
        if (PROMPT_DIR / f"{n}.md").exists()
    ]
    return sum(sizes) / len(sizes) / 4 if sizes else 0.0


def priors(cfg: Config) -> Rates:
    """Rates from the release's published budget (reference-release.md §7)."""
    r = Rates(source="release priors (reference-release.md §7); tokens: template floor")
    for s in cfg.systems:
        r.turns_per_episode[s] = RELEASE_TURNS_PER_USER.get(s, 75.0) / RELEASE_DIMS
        r.writer_calls_per_write[s] = WRITER_CALLS_PER_WRITE.get(s, 0.0)
        r.probe_calls_per_query[s] = float(MEMT_REACT_STEPS) if s == "memt" else 0.0
        for m in cfg.modes:
            key = f"{s}/{m}"
            # nomem stores nothing: slot-fill over an empty store makes no call (and so no judge).
            r.slotfill_share[key] = 0.0 if s == "nomem" else 1.0
            r.judge_share[key] = r.slotfill_share[key]
            released = RELEASE_ATTRIBUTION.get(key)
            r.disclosure_per_dim[key] = (
                released / PAPER_USERS / RELEASE_DIMS if released is not None else 2.0
            )
    return r


def read_ledger(results: Path) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for f in sorted((results / "usage").rglob("*.csv")):
        with open(f, newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
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


def _load_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def observed(results: Path, cfg: Config) -> Rates | None:
    """Rates measured on an earlier run's ledger and artifacts (None when there is no ledger)."""
    rows = read_ledger(results)
    if not rows:
        return None
    r = priors(cfg)
    r.source = f"ledger and artifacts of {results}"
    systems = sorted({p.parent.parent.name for p in results.glob("*/*/episodes.json")})
    for s in systems:
        eps = [e for p in results.glob(f"{s}/*/episodes.json") for e in _load_json(p)["episodes"]]
        turns = sum(len(e["turns"]) for e in eps)
        if eps:
            r.turns_per_episode[s] = turns / len(eps)
        writes = turns + len(eps)
        w = [
            x for x in rows if x["rule"] == "rollout" and x["system"] == s and x["role"] == "writer"
        ]
        if writes:
            r.writer_calls_per_write[s] = sum(map(_first_try, w)) / writes
        probes = list(results.glob(f"{s}/*/retrieved_k*.json"))
        pw = [x for x in rows if x["rule"] == "probe" and x["system"] == s and _first_try(x)]
        n_queries = sum(len(_load_json(p)["queries"]) for p in probes)
        if n_queries:
            r.probe_calls_per_query[s] = len(pw) / n_queries
        for m in ("dump_all", "retrieve"):
            fills = [
                e
                for p in results.glob(f"{s}/*/{m}/slotfill.json")
                for e in _load_json(p)["entries"]
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
                for d in _load_json(p)["details"]
            ]
            if atts:
                asked = sum(st["stage"] != "oracle" for d in atts for st in d["stages"])
                r.disclosure_per_dim[f"{s}/{m}"] = asked / len(atts)
    tasks = [t for p in results.glob("users/*/tasks.json") for t in _load_json(p)["tasks"]]
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


# -- prediction -----------------------------------------------------------------------------
def protocol_calls(cfg: Config, rates: Rates) -> dict[tuple[str, str], float]:
    """Calls per user, keyed (system or "(per user)", role)."""
    d = cfg.n_dims
    cats = sum(1 for n in cfg.dims_per_category.values() if n > 0)
    prefs = cfg.dims_per_category["assistance_preference"]
    rounds = rates.critic_rounds_per_task
    calls: dict[tuple[str, str], float] = {
        ("(per user)", "generator"): 1 + cats,
        ("(per user)", "task_writer"): d,
        ("(per user)", "critic"): d * rounds,
        ("(per user)", "editor"): d * (rounds - 1),
        ("(per user)", "oracle"): d,
    }
    from memprobe.agents import registry

    for s in cfg.systems:
        t = min(rates.turns_per_episode.get(s, 2.5), cfg.max_turns) * d
        calls[(s, "assistant")] = t
        calls[(s, "simulator")] = t
        calls[(s, "preference")] = t if prefs else 0
        writes = t + d  # one write per turn and one for each episode's final user message
        w = writes * rates.writer_calls_per_write.get(s, 0.0)
        if s == "amem" and w:
            w -= 1  # the first note has no neighbour to evolve with
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
        calls[(s, "judge")] = judge
        calls[(s, "disclosure")] = disc
    return calls


def predict(cfg: Config, rates: Rates) -> list[Line]:
    out = []
    for (system, role), per_user in protocol_calls(cfg, rates).items():
        tok = rates.tokens.get(f"{role}/{system}") or rates.tokens.get(role)
        src = "ledger" if tok else "template floor"
        p_tok, c_tok = tok if tok else (_template_tokens(role), 0.0)
        n = per_user * cfg.n_users
        out.append(
            Line(
                system=system,
                role=role,
                calls_per_user=round(per_user, 1),
                calls=round(n),
                prompt_tokens=round(n * p_tok),
                completion_tokens=round(n * c_tok),
                tokens_from=src,
            )
        )
    return out


def table5_compare(cfg: Config, lines: list[Line]) -> list[dict[str, Any]]:
    """Predicted tokens per system, scaled to the paper's 50 users, next to paper Table 5.

    Table 5 counts gpt-5.4-mini only: memt's writer (Mem-T-4B, local) is left out as there.
    """
    scale = PAPER_USERS / cfg.n_users
    rows = []
    for s in cfg.systems:
        mine = [
            x
            for x in lines
            if x.system == s and x.role != "disclosure" and not (s == "memt" and x.role == "writer")
        ]
        p = sum(x.prompt_tokens for x in mine) * scale / 1e6
        c = sum(x.completion_tokens for x in mine) * scale / 1e6
        paper = PAPER_TABLE5.get(s)
        rows.append(_t5(s, p, c, paper))
    att = [x for x in lines if x.role in ("oracle", "disclosure")]
    p = sum(x.prompt_tokens for x in att) * scale / 1e6
    c = sum(x.completion_tokens for x in att) * scale / 1e6
    rows.append(_t5("attribution", p, c, PAPER_ATTRIBUTION))
    return rows


def _t5(name: str, p: float, c: float, paper: tuple[float, float] | None) -> dict[str, Any]:
    total = p + c
    ptotal = sum(paper) if paper else None
    return {
        "component": name,
        "predicted_M": round(total, 2),
        "paper_M": round(ptotal, 2) if ptotal else None,
        "ratio": round(total / ptotal, 3) if ptotal else None,
    }


# -- audit of a finished run --------------------------------------------------------------------
class AuditRow(BaseModel):
    system: str
    user: str
    protocol: int  # calls the protocol requires given what happened
    ledger: int  # rows in the ledger (paid + cached)
    reasks: int  # re-asks with feedback after an invalid reply
    invalid: int  # paid replies thrown away and re-sampled
    unexplained: int  # ledger - protocol - reasks - invalid (0 when every extra is explained)

    @property
    def excess(self) -> float:
        return (self.ledger - self.protocol) / self.protocol if self.protocol else 0.0


def required_calls(results: Path, system: str, user: str, cfg: Config) -> int | None:
    """Calls of one user x system the protocol requires, from its artifacts.

    None when the system's write path is data-dependent beyond its artifacts (mem0, memt).
    """
    base = results / system / user
    eps = _load_json(base / "episodes.json")["episodes"]
    turns = sum(len(e["turns"]) for e in eps)
    prefs = cfg.dims_per_category["assistance_preference"]
    n = 2 * turns + (turns if prefs else 0)
    if system == "amem":
        notes = len(_load_json(base / "memories.json")["memories"])
        n += max(2 * notes - 1, 0)
    elif system not in ("nomem", "longctx_full"):
        return None
    for mode_dir in sorted(p for p in base.iterdir() if (p / "slotfill.json").exists()):
        fills = _load_json(mode_dir / "slotfill.json")["entries"]
        n += sum(bool(e.get("called", True)) for e in fills)
        judged = (mode_dir / "judge.json").exists()
        if judged and not cfg.compat.judge_unknown_labels:
            n += sum(e["label"].strip().strip(".").lower() not in ("", "unknown") for e in fills)
        elif judged:
            n += len(fills)
        att = mode_dir / "attribution.json"
        if att.exists():
            n += sum(
                st["stage"] != "oracle" for d in _load_json(att)["details"] for st in d["stages"]
            )
    return n


def audit(results: Path, cfg: Config) -> list[AuditRow]:
    rows = read_ledger(results)
    by: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    for x in rows:
        if x["system"]:
            by[(x["system"], x["user"])].append(x)
    out = []
    for (system, user), xs in sorted(by.items()):
        need = required_calls(results, system, user, cfg)
        if need is None:
            continue
        reasks = sum(x.get("reask", "0") not in ("", "0") for x in xs)
        # paid for and asked again at once (issue 16 added empty and cut replies)
        invalid = sum(x.get("status", "ok") in ("invalid", "empty", "cut") for x in xs)
        out.append(
            AuditRow(
                system=system,
                user=user,
                protocol=need,
                ledger=len(xs),
                reasks=reasks,
                invalid=invalid,
                unexplained=len(xs) - need - reasks - invalid,
            )
        )
    return out


# -- the command --------------------------------------------------------------------------------
def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load_configs(paths: list[str]) -> Config:
    """Merge config files the way Snakemake does (later files win, dicts merge) and validate."""
    import yaml

    from memprobe.config import load_config

    raw: dict[str, Any] = {}
    for p in paths:
        data = yaml.safe_load(Path(p).read_text(encoding="utf-8")) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{p}: a config file must be a mapping")
        raw = _merge(raw, data)
    return load_config(raw, source=" + ".join(paths))


def report(cfg: Config, rates: Rates) -> str:
    lines = predict(cfg, rates)
    out = [
        f"memprobe estimate: {cfg.n_users} users x {cfg.n_dims} dims, systems "
        f"{', '.join(cfg.systems)}, modes {', '.join(cfg.modes)}, k {cfg.ks}, "
        f"max_turns {cfg.max_turns}",
        f"rates: {rates.source}",
        "",
        f"{'system':<14}{'role':<12}{'calls/user':>11}{'calls':>10}"
        f"{'prompt tok':>14}{'compl. tok':>12}  tokens from",
    ]
    for x in lines:
        out.append(
            f"{x.system:<14}{x.role:<12}{x.calls_per_user:>11.1f}{x.calls:>10.0f}"
            f"{x.prompt_tokens:>14.0f}{x.completion_tokens:>12.0f}  {x.tokens_from}"
        )
    tot = sum(x.calls for x in lines)
    out.append(f"{'total':<26}{'':>11}{tot:>10.0f}")
    per_sys = defaultdict(float)
    for x in lines:
        if x.system != "(per user)":
            per_sys[x.system] += x.calls_per_user
    out += ["", "calls per user per system (episode loop + write side + scoring + attribution):"]
    out += [f"  {s}: {v:.1f}" for s, v in per_sys.items()]
    out += ["", "vs paper Table 5 (M tokens, scaled to 50 users; the paper's are upper bounds):"]
    for row in table5_compare(cfg, lines):
        paper = "-" if row["paper_M"] is None else f"{row['paper_M']:.2f}"
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.3f}"
        out.append(
            f"  {row['component']:<14} predicted {row['predicted_M']:>9.2f}  paper {paper:>8}"
            f"  ratio {ratio}"
        )
    return "\n".join(out)
