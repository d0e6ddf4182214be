"""A memory system whose writer role is configured on its own."""

from __future__ import annotations

from pathlib import Path

from memprobe.config.loading import load_config
from memprobe.llm.client import client_for
from tests.helpers.workflow import tiny_config


def writer_system(cls, name: str, base_url: str, tmp_path: Path, writer: dict):
    """A system whose ``system_settings.<name>.writer`` is ``writer``, writing to ``base_url``."""
    raw = tiny_config(base_url, systems=[name])
    raw["llm"]["cache_dir"] = str(tmp_path / "cache")
    raw["system_settings"] = {name: {"writer": writer}}
    cfg = load_config(raw)
    system = cls(
        config=cfg,
        assistant=client_for("assistant", cfg),
        writer=client_for("writer", cfg, ledger_path=tmp_path / "ledger.csv"),
        workdir=tmp_path / "store",
    )
    system.reset("user_001")
    return cfg, system
