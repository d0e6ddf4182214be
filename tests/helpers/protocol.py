"""Shared protocol test data: a persona, a two-entry bank, and role clients on an endpoint."""

from __future__ import annotations

from pathlib import Path

from memprobe.config.loading import load_config
from memprobe.llm.client import client_for
from memprobe.protocol import users
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
    attrs = users.sample_attributes(7, user_id)
    attrs.pop("n_stories")
    return Persona(**attrs, attitude="Calm.", stories=["A story."], interests=["chess"])


def clients(base_url: str, tmp_path: Path, *roles: str, **raw_over):
    raw = tiny_config(base_url, **raw_over)
    raw["llm"]["cache_dir"] = str(tmp_path / "cache")
    cfg = load_config(raw)
    return cfg, {r: client_for(r, cfg, ledger_path=tmp_path / "usage.csv") for r in roles}


def user_text(body: dict) -> str:
    return body["messages"][-1]["content"]
