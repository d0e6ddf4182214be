"""config/paper.yaml as the tests load it: merged over config/config.yaml the way Snakemake
merges config files, pointed at a loopback endpoint; the prompt file each stage then reads."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import numpy as np
import yaml
from snakemake.utils import update_config

from memprobe.config.loading import load_config
from memprobe.config.schema import Config
from memprobe.spec.prompts import prompt_path
from tests.helpers.workflow import ROOT


def merged(*files: str, base: dict | None = None) -> dict:
    """Layer config files the way Snakemake does (workflow configfile first)."""
    cfg = copy.deepcopy(base) if base is not None else {}
    for f in files:
        update_config(cfg, yaml.safe_load((ROOT / f).read_text()))
    return cfg


def paper_config(base_url: str, tmp_path: Path, **over) -> Config:
    """config.yaml + paper.yaml, every call to ``base_url`` (loopback, the tests' key)."""
    raw = merged("config/config.yaml", "config/paper.yaml")
    raw["llm"].update(
        base_url=base_url, api_key_env="MEMPROBE_TEST_KEY", cache_dir=str(tmp_path / "cache")
    )
    raw.update(over)
    return load_config(raw)


def stage_prompt(cfg: Config, stage: str) -> str:
    """The prompt file a stage reads under ``cfg`` (what rules/common.smk's prompt() gives)."""
    return str(prompt_path(getattr(cfg.prompts, stage)))


def all_text(body: dict) -> str:
    return "\n".join(m["content"] for m in body["messages"])


def text_vectors(texts: list[str], path=None, max_seq_length=None) -> np.ndarray:
    """A fixed unit vector per text, in place of the embedder where only its inputs matter
    (a score then tells which text was embedded)."""
    rows = []
    for t in texts:
        rng = np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16))
        v = rng.normal(size=8)
        rows.append(v / np.linalg.norm(v))
    return np.asarray(rows, dtype=np.float32)
