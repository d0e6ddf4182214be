"""Where a run's files go: one place for every path that depends on the run (docs/runs.md).

A run is named by ``run.name`` (PyPSA-Eur's ``run: name``). Its files are its own:

- ``<results_dir>/<run>/``: every artifact, the usage ledgers (``usage/``), the report;
- ``logs/<run>/``: every job's log and the logs of the servers the run starts.

The default run has no name: its folders are ``<results_dir>/`` and ``logs/`` themselves
(``Config.run_dir``, ``Config.logs_dir``), and a named run may take no name of an entry it
keeps there (memprobe/workflow/run_names.py).

Two things are shared between runs, because sharing them cannot mix two runs' results:

- the response cache (``llm.cache_dir``): content-addressed, a reply is found only by the
  request that asked for it;
- the generated users: each of a user's files (persona, bank, tasks) is made in a folder
  ``<results_dir>/users/<part>-<key>/``, where ``key`` hashes everything that file is made
  from: the config slices (memprobe/workflow/config_slices.py: the seed, each LLM role's
  identity, the bank and task settings) of its rule and of the rules before it (a bank is
  made from its persona), and which files they read where a config picks them (a prompt, the
  pool; an edit of a file reruns its jobs in place, as any input does). Runs whose settings
  agree use the same files; a changed bank setting makes new banks and tasks in new folders
  and keeps the personas, so exactly the jobs that read the setting run. Imported users
  (``users.source: release``) go to one ``release-<key>`` folder, keyed by the release and
  the import's settings. Each run copies its users into ``<run>/users/`` (rule ``users``),
  so a run's folder holds everything its tables were built from.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memprobe.config.schema import SHARED_USERS_DIR, Config
from memprobe.workflow.config_slices import Slicer

# A user's files in the order each is made from the ones before; each is its rule's output.
PARTS = ("persona", "bank", "tasks")
IMPORT_RULE = "import_users"  # users.source: release: one job writes all three


def _chains(cfg: Config) -> dict[str, tuple[str, ...]]:
    """The rules each part is made by, itself and those before it."""
    if cfg.users.source == "release":
        return dict.fromkeys(PARTS, (IMPORT_RULE,))
    return {part: PARTS[: i + 1] for i, part in enumerate(PARTS)}


Files = dict[str, list[str]]  # part -> the files its rule reads by the config's choice

# The prompt stages each part's rule reads (rules/users.smk): ``prompts.<stage>`` picks the file.
USERS_PROMPTS = {
    "persona": ("persona_narrative",),
    "bank": ("bank_select",),
    "tasks": ("task_write", "task_critic", "task_edit"),
}


def pool(cfg: Config) -> str:
    """The dimension pool the bank rule reads: ours, or the release's (``bank.pool``)."""
    return cfg.pool_path() or "config/dimension_pool.yaml"


def users_files(cfg: Config) -> Files:
    """The files the users rules read where the config picks them (their prompts, the pool),
    named as the rules name them: another file, another folder. The Snakefile and the commands
    that find a run's users outside it (``memprobe estimate``) both key the folders with these."""
    files = {
        part: [f"prompts/{getattr(cfg.prompts, stage)}.md" for stage in stages]
        for part, stages in USERS_PROMPTS.items()
    }
    files["bank"].append(pool(cfg))
    return files


def _made_by(cfg: Config, slicer: Slicer, rules: tuple[str, ...], files: Files) -> dict[str, Any]:
    made: dict[str, Any] = {rule: slicer.params(rule) for rule in rules}
    made["files"] = [f for rule in rules for f in files.get(rule, [])]
    if IMPORT_RULE in rules:
        made["release"] = {
            "dir": os.path.abspath(cfg.users.release_dir or ""),
            "bank_file": cfg.release.bank_file,
            "tasks_dir": cfg.release.tasks_dir,
        }
    return made


def _digest(made: dict[str, Any]) -> str:
    blob = json.dumps(made, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def users_folders(
    cfg: Config, slicer: Slicer | None = None, files: Files | None = None
) -> dict[str, str]:
    """part -> its shared folder's name: ``<part>-<key>`` (imported: ``release-<key>``)."""
    slicer = slicer or Slicer(cfg)
    files = users_files(cfg) if files is None else files
    out = {}
    for part, rules in _chains(cfg).items():
        prefix = "release" if rules == (IMPORT_RULE,) else part
        out[part] = f"{prefix}-{_digest(_made_by(cfg, slicer, rules, files))}"
    return out


def copy_params(cfg: Config, slicer: Slicer) -> dict[str, Callable[[Any], Any]]:
    """Params of a run's copy of one user file: the slices that file is made from, so that
    Snakemake's reason line names a changed setting for the run's copies too."""
    per_part: dict[str, dict[str, Any]] = {}
    for part, rules in _chains(cfg).items():
        per_part[part] = {}
        for rule in rules:
            per_part[part] |= slicer.params(rule)

    def param(name: str) -> Callable[[Any], Any]:
        return lambda wildcards: per_part[wildcards.part].get(name)

    return {n: param(n) for n in dict.fromkeys(n for made in per_part.values() for n in made)}


@dataclass(frozen=True)
class RunPaths:
    results: str  # <results_dir>/<run>: the run's artifacts, ledgers and report
    logs: str  # logs/<run>
    users: dict[str, str]  # part -> <results_dir>/users/<part>-<key>: the shared users
    users_logs: dict[str, str]  # part -> logs/users/<part>-<key>

    def _part(self, rule: str) -> str | None:
        return PARTS[0] if rule == IMPORT_RULE else rule if rule in PARTS else None

    def results_of(self, rule: str) -> str:
        """The folder a rule's outputs and usage ledgers go under."""
        part = self._part(rule)
        return self.users[part] if part else self.results

    def logs_of(self, rule: str) -> str:
        part = self._part(rule)
        return self.users_logs[part] if part else self.logs


# What a run's tables job leaves for the runs that compare with it (records.Scored).
SCORED = "scored.json"


def runs_with_tables(cfg: Config) -> list[str]:
    """The runs under ``results_dir`` that built their tables (a ``scored.json``); the
    default run, if it did, first, as its empty name."""
    root = cfg.results_dir
    if not os.path.isdir(root):
        return []
    names = ["", *sorted(n for n in os.listdir(root) if n != SHARED_USERS_DIR)]
    return [n for n in names if os.path.isfile(f"{cfg.run_folder(n)}/{SCORED}")]


def of(cfg: Config, slicer: Slicer | None = None, files: Files | None = None) -> RunPaths:
    folders = users_folders(cfg, slicer, files)
    return RunPaths(
        results=cfg.run_dir,
        logs=cfg.logs_dir,
        users={p: f"{cfg.results_dir}/{SHARED_USERS_DIR}/{f}" for p, f in folders.items()},
        users_logs={p: f"logs/{SHARED_USERS_DIR}/{f}" for p, f in folders.items()},
    )
