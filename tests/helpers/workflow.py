"""A copy of the workflow in a temp dir, run by the real ``snakemake`` CLI, and the tiny config.

Workflow tests copy the workflow (Snakefile, rules, scripts, prompts, config, profiles) into
``tmp_path`` and run the real ``snakemake`` CLI there, so parallel test runs never share
results/, logs/ or the LLM cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from memprobe.report.jobdag import job_counts

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW_PARTS = ("Snakefile", "rules", "scripts", "prompts", "config", "profiles", "envs")
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
# The test now running, set by tests/conftest.py before its fixtures run.
RUNNING: dict[str, pytest.Item] = {}


def _needs_workflow_mark() -> None:
    """The fast tier fails a test that builds a test workflow without the `workflow` marker."""
    item = RUNNING.get("item")
    if item is None or item.config.getoption("--integration"):
        return
    if not item.get_closest_marker("workflow"):
        pytest.fail(f"{item.name} runs real Snakemake: mark it `workflow`")


def tiny_config(base_url: str, **overrides) -> dict:
    cfg = yaml.safe_load((ROOT / "tests" / "configs" / "tiny.yaml").read_text())
    cfg["llm"]["base_url"] = base_url
    for key, value in overrides.items():
        cfg[key] = value
    return cfg


class Workflow:
    """A copy of the workflow in a temp dir, with a config file, run by the real CLI."""

    def __init__(self, root: Path, config: dict) -> None:
        _needs_workflow_mark()
        self.root = root
        for part in WORKFLOW_PARTS:
            src = ROOT / part
            if src.is_dir():
                shutil.copytree(src, root / part, dirs_exist_ok=True)
            else:
                shutil.copy2(src, root / part)
        self.config_path = root / "test-config.yaml"
        self.write_config(config)

    def write_config(self, config: dict) -> None:
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))

    def run(
        self, *args: str, check: bool = True, env: dict | None = None, timeout: float = 600
    ) -> subprocess.CompletedProcess:
        cmd = [SNAKEMAKE, *args, "--cores", "2", "--configfile", str(self.config_path)]
        proc = subprocess.run(
            cmd,
            cwd=self.root,
            capture_output=True,
            text=True,
            env={**os.environ, **(env or {})},
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        return proc

    def scheduled(self, *args: str) -> dict[str, int]:
        """Job counts per rule of a dry run (``snakemake -n``)."""
        proc = self.run(*args, "-n")
        out = proc.stdout + proc.stderr
        counts = job_counts(out)
        # "nothing scheduled" only when Snakemake says so: output we cannot parse is a
        # failure, never an empty schedule.
        if not counts and not any(ln.startswith("Nothing to be done") for ln in out.splitlines()):
            raise AssertionError(f"no job stats in the dry run:\n{out[-2000:]}")
        return counts


def local_raw(**slotfill) -> dict:
    raw = tiny_config("http://127.0.0.1:9/v1")
    raw["llm"] = {"backend": "local", "local": {"context_tokens": 4096}}
    if slotfill:
        raw["slotfill"] = slotfill
    return raw
