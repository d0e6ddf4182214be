"""The estimate's money and time: USD from a price table (``--prices``), hours from the jobs'
calls over ``llm_slots`` (a rollout or task-writing job one call at a time, any other
``llm.concurrency``) at a per-call latency (the ledger's, else the backend's assumed one),
never below the longest chain of dependent calls of one user, nor below the calls and tokens
over ``llm.rate_limit``.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel

from memprobe.config.schema import Config, Price, role_settings
from memprobe.llm.providers import backend
from memprobe.report.estimate_calls import Line
from memprobe.report.estimate_rates import read_ledger


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
