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
from typing import Any

import pytest
import yaml

from memprobe.config.loading import WORKFLOW_CONFIG, load_layers, read_config_file
from memprobe.config.schema import DEFAULT_RUN, Config
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
        self.config = config
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))

    @property
    def cfg(self) -> Config:
        """The run's config as Snakemake builds it: the copy's config/config.yaml, then the
        test's file (a setting the test's file leaves out is config.yaml's)."""
        files = [self.root / WORKFLOW_CONFIG, self.config_path]
        return load_layers([(str(f), read_config_file(f)) for f in files])

    @property
    def name(self) -> str:
        """The run's name (run.name; config/config.yaml sets none: the default run, "")."""
        return (self.config.get("run") or {}).get("name", DEFAULT_RUN)

    @property
    def results(self) -> Path:
        """The run's folder: results/<run.name>, the default run's results/ (docs/runs.md)."""
        return self.root / "results" / self.name

    @property
    def logs(self) -> Path:
        return self.root / "logs" / self.name

    def shared(self, part: str) -> Path:
        """The shared folder of the users' ``part`` files (persona, bank, tasks):
        results/users/<part>-<key>, the only one in a test's copy (docs/runs.md)."""
        (folder,) = (self.root / "results" / "users").glob(f"{part}-*")
        return folder

    @property
    def users(self) -> list[Path]:
        """Every shared users' folder of the copy."""
        return sorted((self.root / "results" / "users").iterdir())

    def ledger_files(self) -> list[Path]:
        """Every usage ledger behind the run: its own and its users' (docs/runs.md)."""
        from memprobe.llm import ledger

        return [f for d in (self.results, *self.users) for f in ledger.run_files(d)]

    def target(self, path: str) -> str:
        """A file of the run as a Snakemake target: ``table2.csv`` -> results/<run>/table2.csv
        (the default run's: results/table2.csv)."""
        return "/".join(p for p in ("results", self.name, path) if p)

    def run(
        self,
        *args: str,
        check: bool = True,
        env: dict | None = None,
        timeout: float = 600,
        configfile: Path | None = None,
    ) -> subprocess.CompletedProcess:
        config = configfile or self.config_path
        cmd = [SNAKEMAKE, *args, "--cores", "2", "--configfile", str(config)]
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

    def scheduled(self, *args: str, **run: Any) -> dict[str, int]:
        """Job counts per rule of a dry run (``snakemake -n``)."""
        proc = self.run(*args, "-n", **run)
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
