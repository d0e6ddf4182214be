"""An audit of a finished run's calls: per user and system, the calls the protocol requires
given what happened (turns taken, labels that were not "unknown", attribution stages reached)
against the ledger's rows; every extra row must be a re-ask or a re-sampled invalid reply.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel

from memprobe.config.schema import Config
from memprobe.registry import systems as registry
from memprobe.report.estimate_rates import load_json, read_ledger


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
    record = load_json(base / "episodes.json")
    turns = sum(len(e["turns"]) for e in record["episodes"])
    prefs = cfg.dims_per_category["assistance_preference"]
    # A replayed conversation (episodes.json ``replay``): no reply, simulator or preference call.
    n = 0 if record.get("replay") else 2 * turns + (turns if prefs else 0)
    if spec.llm_writer and p:
        notes = len(load_json(base / "memories.json")["memories"])
        n += int(max(p.writer_calls_per_write * notes - p.first_write_saves, 0))
    for mode_dir in sorted(p for p in base.iterdir() if (p / "slotfill.json").exists()):
        fills = load_json(mode_dir / "slotfill.json")["entries"]
        n += sum(bool(e.get("called", True)) for e in fills)
        judged = (mode_dir / "judge.json").exists()
        if judged and not cfg.compat.judge_unknown_labels:
            n += sum(e["label"].strip().strip(".").lower() not in ("", "unknown") for e in fills)
        elif judged:
            n += len(fills)
        att = mode_dir / "attribution.json"
        if att.exists():
            n += sum(
                st["stage"] != "oracle" for d in load_json(att)["details"] for st in d["stages"]
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
        invalid = sum(
            x.get("status", "ok") in ("invalid", "empty", "cut", "unfinished") for x in xs
        )
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
