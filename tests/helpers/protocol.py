"""Shared protocol test data: a persona, a two-entry bank, and role clients on an endpoint."""

from __future__ import annotations

import csv
from pathlib import Path

from memprobe.config.loading import load_config
from memprobe.llm.client import LLM, client_for
from memprobe.protocol.persona import sample_attributes
from memprobe.spec.records import Bank, BankEntry, Persona
from tests.helpers.workflow import tiny_config

SKILL = BankEntry(
    category="skill_memory",
    dimension="critical_thinking_skill",
    short="checks every claim against two sources",
    explanation="EXPL-SKILL: trained as a fact-checker at a local paper.",
)

EPISODE = BankEntry(
    category="episodic_memory",
    dimension="relocation_event",
    short="moved cities alone at nineteen and struggled",
    explanation="EXPL-EPISODE: left home for a job that fell through within a month.",
)

TWO_ENTRY_BANK = Bank(user_id="user_001", entries=[SKILL, EPISODE])


def persona(user_id: str = "user_001") -> Persona:
    attrs = sample_attributes(7, user_id)
    attrs.pop("n_stories")
    return Persona(**attrs, attitude="Calm.", stories=["A story."], interests=["chess"])


def clients(base_url: str, tmp_path: Path, *roles: str, **raw_over):
    raw = tiny_config(base_url, **raw_over)
    raw["llm"]["cache_dir"] = str(tmp_path / "cache")
    cfg = load_config(raw)
    return cfg, {r: client_for(r, cfg, ledger_path=tmp_path / "usage.csv") for r in roles}


def stage_clients(base_url: str, tmp_path: Path, *, seed: int = 7, **llm) -> dict[str, LLM]:
    """The users stages' roles on one endpoint, cache and ledger (a tiny config's)."""
    cfg = tiny_config(base_url, seed=seed)
    cfg["llm"].update(cache_dir=str(tmp_path / "cache"), **llm)
    config = load_config(cfg)
    ledger = tmp_path / "usage.csv"
    roles = ("generator", "task_writer", "critic", "editor")
    return {r: client_for(r, config, ledger_path=ledger) for r in roles}


def ledger_cached(path: Path) -> list[str]:
    """The ``cached`` column of a usage ledger, row by row."""
    with open(path, newline="") as fh:
        return [row["cached"] for row in csv.DictReader(fh)]


# A job whose re-asks run out at once (one re-ask, no re-sample), for the stages' stand-ins.
SPENT = {"max_reasks": 1, "resample_invalid": 0}
USER = {"user": "user_001"}


def user_text(body: dict) -> str:
    return body["messages"][-1]["content"]
