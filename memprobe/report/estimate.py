"""``memprobe estimate``: what a run will cost, per role, before it starts; and an audit after.

The protocol fixes most call counts (per user: one generator call for the persona, one per
non-empty category for the bank, one writer + one critic per task, one oracle call per dim;
per user and system: T turns, each one assistant + one simulator call and one preference call,
plus the system's write path; per mode: at most one slot-fill and one judge call per dim;
attribution Stage 1/2 for the misses). What the protocol leaves to the data (turns per
episode, critic rounds, write-side calls per write, misses, tokens per call) comes from
*rates*: the release's published budget (docs/release-format.md, §7) when no run
exists, else the ledger and artifacts of an earlier run (``observed``). Tokens per call come
from that ledger, else from priors: the paper's Table 5 (and Table 6 for the one-time user
generation) divided by the release's calls per user, i.e. the paper's mean tokens per call.
A role with neither (Mem-T-4B's local calls, a plugin system) is reported as unknown.
Money comes from a price table (``--prices``), time from the jobs' calls over ``llm_slots``
(a rollout or task-writing job one call at a time, any other ``llm.concurrency``) at a per-call
latency (the ledger's, else an assumed one), never below the longest chain of dependent calls
of one user, nor below the calls and tokens over ``llm.rate_limit``.

``audit`` checks a finished run: per user and system, the calls the protocol requires given
what happened (turns taken, labels that were not "unknown", attribution stages reached)
against the ledger's rows; every extra row must be a re-ask or a re-sampled invalid reply.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from memprobe.config.loading import set_dotted
from memprobe.config.schema import Config, Price, role_settings
from memprobe.llm import ledger
from memprobe.llm.providers import backend
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


class Line(BaseModel):
    system: str  # "(per user)" for the user-level roles shared by every system
    role: str
    model: str
    calls_per_user: float
    calls: float
    prompt_tokens: float | None  # None: no ledger and no prior says
    completion_tokens: float | None
    tokens_from: str


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


def _paper_table5() -> dict[str, tuple[float, float]]:
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
    the system: ``counted`` in its files where the release is at hand (release.importer
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


def _load_json(path: Path) -> Any:
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
        eps = [e for p in results.glob(f"{s}/*/episodes.json") for e in _load_json(p)["episodes"]]
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
        n_queries = sum(len(_load_json(p)["queries"]) for p in probes)
        if n_queries:
            r.probe_calls_per_query[s] = len(pw) / n_queries
        for m in MODES:
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


def _sum(lines: list[Line], field: str) -> float | None:
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
        p, c = _sum(mine, "prompt_tokens"), _sum(mine, "completion_tokens")
        total = None if p is None or c is None else (p + c) * scale / 1e6
        paper = {"attribution": PAPER_ATTRIBUTION, "users": PAPER_TABLE6[1:]}.get(
            name, _paper_table5().get(name)
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


# -- audit of a finished run --------------------------------------------------------------------
class AuditRow(BaseModel):
    system: str
    user: str
    # calls the protocol requires given what happened (None: unknown for this system)
    protocol: int | None
    ledger: int  # rows in the ledger (paid + cached)
    reasks: int  # re-asks with feedback after an invalid reply
    invalid: int  # paid replies thrown away and re-sampled
    # ledger - protocol - reasks - invalid (0 when every extra is explained; None: unknown)
    unexplained: int | None

    @property
    def excess(self) -> float | None:
        if self.protocol is None:
            return None
        return (self.ledger - self.protocol) / self.protocol if self.protocol else 0.0


def required_calls(results: Path, system: str, user: str, cfg: Config) -> int | None:
    """Calls of one user x system the protocol requires, from its artifacts.

    None (reported as unknown) when its write path is data-dependent beyond its artifacts
    (mem0, memt) or it declares no priors.
    """
    spec = registry.specs().get(system)
    p = spec.priors if spec else None
    if spec is None or (spec.llm_writer and not (p and p.one_item_per_write)):
        return None
    base = results / system / user
    record = _load_json(base / "episodes.json")
    turns = sum(len(e["turns"]) for e in record["episodes"])
    prefs = cfg.dims_per_category["assistance_preference"]
    # A replayed conversation (episodes.json ``replay``): no reply, simulator or preference call.
    n = 0 if record.get("replay") else 2 * turns + (turns if prefs else 0)
    if spec.llm_writer and p:
        notes = len(_load_json(base / "memories.json")["memories"])
        n += int(max(p.writer_calls_per_write * notes - p.first_write_saves, 0))
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
        need = required_calls(results, system, user, cfg)  # None: unknown, still listed
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
                unexplained=None if need is None else len(xs) - need - reasks - invalid,
            )
        )
    return out


# -- money and time ------------------------------------------------------------------------------
def load_prices(path: str) -> dict[str, Price]:
    """A price table: ``model: {input: USD per 1M prompt tokens, output: ... completion}``."""
    import yaml
    from pydantic import ValidationError

    from memprobe.spec.records import first_error

    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as err:
        raise ValueError(f"--prices {path}: cannot read it ({err})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"--prices {path}: expected a mapping of model: {{input, output}}")
    try:
        return {str(m): Price.model_validate(v) for m, v in raw.items()}
    except ValidationError as err:
        raise ValueError(f"--prices {path}: {first_error(err, 'a model')}") from None


def money(lines: list[Line], prices: dict[str, Price]) -> tuple[float, list[str]]:
    """USD over the priced lines, and what could not be priced (model or tokens unknown)."""
    usd, unpriced = 0.0, []
    for x in lines:
        if not x.calls:
            continue
        price = prices.get(x.model)
        if price is None or x.prompt_tokens is None or x.completion_tokens is None:
            why = "no price" if price is None else "tokens unknown"
            unpriced.append(f"{x.system} {x.role} ({x.model}: {why}, {x.calls:.0f} calls)")
            continue
        usd += (x.prompt_tokens * price.input + x.completion_tokens * price.output) / 1e6
    return usd, unpriced


# Roles whose calls a job makes one at a time: tasks are written one after another (each sees
# the earlier ones), and a rollout's turns, with their memory writes, are strictly sequential.
# Every other role's job sends ``llm.concurrency`` calls at once.
SEQUENTIAL_ROLES = (
    "generator",
    "task_writer",
    "critic",
    "editor",
    "assistant",
    "simulator",
    "writer",
)


def served_elsewhere(cfg: Config, line: Line) -> bool:
    """Calls to a system's own served model (Mem-T-4B on its GPU), not to the run's provider."""
    return line.model != role_settings(cfg, line.role)["model"]


def chain_seconds(cfg: Config, lines: list[Line], latency_s: float, served_s: float) -> float:
    """One user's dependent calls, in order: generation, the longest rollout with its writes,
    then each scoring stage as one round of ``llm.concurrency`` parallel calls per chunk of
    dims (attribution: Stage 1 then Stage 2)."""
    per_user = {(x.system, x.role): x.calls / cfg.n_users for x in lines if x.system != "(per run)"}
    gen = sum(
        per_user.get(("(per user)", r), 0.0)
        for r in ("generator", "task_writer", "critic", "editor")
    )
    own = {x.system for x in lines if x.role == "writer" and served_elsewhere(cfg, x)}

    def rollout(s: str) -> float:
        asked = per_user[(s, "assistant")] + per_user[(s, "simulator")]
        writes = per_user[(s, "writer")]
        return asked * latency_s + writes * (served_s if s in own else latency_s)

    rounds = -(-cfg.n_dims // cfg.llm.concurrency)  # ceil
    longest = max((rollout(s) for s in cfg.systems), default=0.0)
    return gen * latency_s + longest + rounds * (1 + 1 + 2) * latency_s


def slot_seconds(cfg: Config, lines: list[Line], latency_s: float, served_s: float) -> float:
    """Seconds of ``llm_slots`` the run's jobs hold: a job of a sequential role holds its slot
    for each of its calls, any other job for its calls over ``llm.concurrency``."""
    total = 0.0
    for x in lines:
        per_call = served_s if served_elsewhere(cfg, x) else latency_s
        share = 1 if x.role in SEQUENTIAL_ROLES else cfg.llm.concurrency
        total += x.calls * per_call / share
    return total


class Wall(BaseModel):
    """A run's predicted wall time (seconds), as the largest of its bounds."""

    chain_s: float  # one user's chain of dependent calls
    streams_s: float  # every job's calls over the llm_slots (and the local server's streams)
    requests_s: float  # the calls over llm.rate_limit's requests per minute (0: no limit)
    tokens_s: float  # their tokens over its tokens per minute (0: no limit, or tokens unknown)
    calls: float
    provider_calls: float = 0.0  # of them, to an OpenAI-compatible provider's endpoints

    @property
    def seconds(self) -> float:
        return max(self.chain_s, self.streams_s, self.requests_s, self.tokens_s)

    @property
    def binding(self) -> str:
        bounds = {
            "the chain of dependent calls": self.chain_s,
            "the parallel streams": self.streams_s,
            "requests per minute": self.requests_s,
            "tokens per minute": self.tokens_s,
        }
        return max(bounds, key=bounds.__getitem__)


def streams(cfg: Config, llm_slots: int) -> int:
    """Calls in flight at once: ``llm_slots x llm.concurrency``; where the run serves the
    model itself, of no more jobs than its server serves well at once (the workflow holds the
    others back), and no more calls than it serves at once."""
    served = backend(cfg.llm.backend).capacity(cfg)
    if served is None:
        return llm_slots * cfg.llm.concurrency
    return min(min(llm_slots, served.jobs) * cfg.llm.concurrency, served.requests)


def streams_note(cfg: Config, llm_slots: int) -> str:
    if backend(cfg.llm.backend).capacity(cfg) is not None:
        return f"{streams(cfg, llm_slots)} calls in flight (the run's server's share of them)"
    return (
        f"llm_slots {llm_slots} (a task-writing or rollout job sends one call at a time, any "
        f"other llm.concurrency {cfg.llm.concurrency})"
    )


def wall_time(
    cfg: Config,
    lines: list[Line],
    latency_s: float,
    llm_slots: int,
    served_latency_s: float | None = None,
) -> Wall:
    """max(critical path, the jobs over the llm_slots, requests / RPM, tokens / TPM), where
    the rate-limit terms are per endpoint (a role with its own endpoint and limit is its own).
    ``served_latency_s``: seconds per call of a system's own served model (None: as a hosted
    call's)."""
    from memprobe.llm import rate_limit

    served = latency_s if served_latency_s is None else served_latency_s
    own = backend(cfg.llm.backend)
    calls = sum(x.calls for x in lines)
    per_endpoint: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for x in lines:
        settings = role_settings(cfg, x.role)
        if served_elsewhere(cfg, x) or not own.rate_limited:
            continue  # served elsewhere (Mem-T-4B), or no provider's limit (fake, local)
        limits = rate_limit.configured(cfg, x.role).scaled(1 / cfg.llm.rate_limit.share)
        acc = per_endpoint[settings["base_url"] or ""]
        acc[0] += x.calls
        acc[1] += (x.prompt_tokens or 0) + (x.completion_tokens or 0)
        acc[2] = limits.requests or acc[2]
        acc[3] = limits.tokens or acc[3]
    requests_s = max((c / rpm * 60 for c, _, rpm, _ in per_endpoint.values() if rpm), default=0)
    tokens_s = max((t / tpm * 60 for _, t, _, tpm in per_endpoint.values() if tpm), default=0)
    if own.capacity(cfg) is not None:  # the server's slots, not the jobs', are the streams
        streams_s = calls * latency_s / streams(cfg, llm_slots)
    else:
        streams_s = slot_seconds(cfg, lines, latency_s, served) / llm_slots
    return Wall(
        chain_s=chain_seconds(cfg, lines, latency_s, served),
        streams_s=streams_s,
        requests_s=requests_s,
        tokens_s=tokens_s,
        calls=calls,
        provider_calls=sum(acc[0] for acc in per_endpoint.values()),
    )


def default_llm_slots(profile: Path = Path("profiles/default/config.yaml")) -> int:
    """``llm_slots`` of the local profile (the one a plain ``snakemake`` run uses)."""
    import yaml

    try:
        res = yaml.safe_load(profile.read_text(encoding="utf-8")).get("resources", [])
        return next(int(r.split("=")[1]) for r in res if r.startswith("llm_slots="))
    except (OSError, AttributeError, StopIteration, ValueError):
        return 8


def mean_latency(results: Path) -> float | None:
    """Mean latency of the paid, answered calls of an earlier run (None without any)."""
    lat = [
        float(x["latency_s"])
        for x in read_ledger(results)
        if x.get("cached") == "false" and x.get("status", "ok") == "ok" and x.get("latency_s")
    ]
    return sum(lat) / len(lat) if lat else None


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
    p_tot, c_tot = _sum(lines, "prompt_tokens"), _sum(lines, "completion_tokens")
    known = [x for x in lines if x.prompt_tokens is not None]
    if p_tot is None:
        p_tot, c_tot = _sum(known, "prompt_tokens"), _sum(known, "completion_tokens")
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
