"""Where the release keeps each record (docs/release-format.md §2), and the checks at DAG load.

A run id is ``<system>_pooled_50`` (memt: ``memt_memonly_pooled_50``), overridable per system
with ``release.runs``. Every read goes through ``Layout.inside``: nothing outside
``users.release_dir`` is read, whatever a path or a symlink in the checkout says.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from memprobe.config.schema import Config
from memprobe.release.formats import RawEpisode
from memprobe.spec.records import RecordError, inside, read_json
from memprobe.spec.records import load as load_record

T = TypeVar("T", bound=BaseModel)
DEFAULT_RUN_SUFFIX = "_pooled_50"
# The paper's "memt" is the release's memt_memonly runner (docs/release-format.md §1).
RELEASE_AGENT = {"memt": "memt_memonly"}
ORACLE_DIR = "_task_design_oracle"


class Layout:
    """Paths inside a checkout of the release."""

    def __init__(self, cfg: Config) -> None:
        if not cfg.users.release_dir:
            raise RecordError("users.release_dir: not set")
        self.root = Path(cfg.users.release_dir)
        self.cfg = cfg

    # -- every read of the release goes through these, checked when it happens ----------------
    def inside(self, path: str | os.PathLike[str]) -> Path:
        """``path`` resolved, if it lies inside ``users.release_dir``; else one line.

        A configured path with "..", or a symlink anywhere in the checkout (a run folder, a
        pref_judge file, a merged report), must not make the import read files from elsewhere
        on the machine. Checked at read time, on the path then read."""
        try:
            return inside(self.root, path, "users.release_dir")
        except RecordError as err:
            raise RecordError(f"release: {err}") from None

    def load(self, path: str | os.PathLike[str], model: type[T]) -> T:
        return load_record(self.inside(path), model)

    def read(self, path: str | os.PathLike[str]) -> Any:
        return read_json(self.inside(path))

    def run_id(self, system: str) -> str:
        if system in self.cfg.release.runs:
            return self.cfg.release.runs[system]
        return RELEASE_AGENT.get(system, system) + DEFAULT_RUN_SUFFIX

    def output_dir(self, system: str, mode: str) -> Path:
        suffix = "_retrieve" if mode == "retrieve" else ""
        return self.root / "output" / f"{self.run_id(system)}{suffix}"

    @property
    def bank_file(self) -> Path:
        return self.root / self.cfg.release.bank_file

    def task_file(self, user: str) -> Path:
        return self.root / self.cfg.release.tasks_dir / f"{user}.json"

    def history(self, system: str, user: str, index: int) -> Path:
        return self.recorded(self.run_id(system), user, index)

    def recorded(self, run: str, user: str, index: int) -> Path:
        """One recorded episode of a run (``history/<run>/user_XXX/episode_<i>.json``)."""
        return self.root / "history" / run / user / f"episode_{index}.json"

    def pref_judge(self, system: str, user: str, index: int) -> Path:
        return self.root / "pref_judge" / self.run_id(system) / user / f"episode_{index}.json"

    def memories(self, system: str, user: str) -> Path:
        return self.root / "memory" / self.run_id(system) / user / "memories.json"

    def recon_judge(self, system: str, mode: str, user: str) -> Path:
        return self.output_dir(system, mode) / "recon_judge" / f"{user}.json"

    def attribution(self, system: str, mode: str, user: str) -> Path:
        return self.output_dir(system, mode) / "attribution" / f"{user}.json"

    def oracle(self, user: str) -> Path:
        return self.root / "output" / ORACLE_DIR / f"{user}.json"

    def merged_report(self, system: str, mode: str) -> Path | None:
        """The canonical aggregate report: the latest ``*_merged.json`` (names sort by time)."""
        found = sorted(self.output_dir(system, mode).glob("*_merged.json"))
        return found[-1] if found else None

    def user_files(self, user: str) -> list[Path]:
        """Every release file an import of this user's runs reads (pref_judge is optional)."""
        files = [self.oracle(user)]
        for s in self.cfg.systems:
            files.append(self.memories(s, user))
            files += [self.history(s, user, i) for i in range(1, self.cfg.n_dims + 1)]
        for s, m in pairs(self.cfg):
            files += [self.recon_judge(s, m, user), self.attribution(s, m, user)]
        return files


def pairs(cfg: Config) -> list[tuple[str, str]]:
    """(system, mode) pairs the release holds: a mode applies where its output folder exists."""
    lay = Layout(cfg)
    return [
        (s, m)
        for s in cfg.systems
        for m in cfg.modes
        if (lay.output_dir(s, m) / "recon_judge").is_dir()
    ]


def _needed(cfg: Config) -> list[Path]:
    """Every release file the configured import reads."""
    lay = Layout(cfg)
    users = cfg.user_ids
    need = [lay.bank_file, *(lay.task_file(u) for u in users)]
    if cfg.release.import_runs:
        for u in users:
            need += lay.user_files(u)
    return need


def missing_files(cfg: Config) -> list[Path]:
    """Release files the configured import needs that are absent (checked at DAG load)."""
    return [p for p in _needed(cfg) if not p.is_file()]


def check_layout(cfg: Config) -> None:
    """One line naming the first missing file (and how many more), or nothing."""
    if not Path(cfg.users.release_dir or "").is_dir():
        raise RecordError(f"users.release_dir: {cfg.users.release_dir} is not a directory")
    lay = Layout(cfg)
    for path in _needed(cfg):
        lay.inside(path)  # at DAG load too: one line before any job
    if cfg.rollout.replay:
        check_replay(cfg)
    missing = missing_files(cfg)
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise RecordError(f"release: missing {missing[0]}{more}")
    if cfg.release.import_runs and not pairs(cfg):
        raise RecordError(f"release: no output/<run>/recon_judge for systems {cfg.systems}")


def check_replay(cfg: Config) -> None:
    """``rollout.replay``: the run is in the release and holds every episode of every user
    (one line naming the first gap); the episodes themselves are read by the replay jobs."""
    lay, run = Layout(cfg), cfg.rollout.replay
    assert run, "called for a replay only"
    runs = lay.root / "history"
    if not (runs / run).is_dir():
        found = sorted(p.name for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []
        raise RecordError(
            f"rollout.replay: no recorded run {run!r} in {runs} "
            f"(found: {', '.join(found) or 'none'})"
        )
    for user in cfg.user_ids:
        if not (runs / run / user).is_dir():
            raise RecordError(f"rollout.replay: run {run!r} has no {user} ({runs / run / user})")
        for i in range(1, cfg.n_dims + 1):
            path = lay.inside(lay.recorded(run, user, i))  # the job reads it: no symlink out
            if not path.is_file():
                raise RecordError(
                    f"rollout.replay: missing {lay.recorded(run, user, i)} ({user} has "
                    f"{cfg.n_dims} tasks)"
                )


def recorded_system(run: str) -> str:
    """The system whose release run this is (``memt_memonly_pooled_50`` -> memt)."""
    agent = run.removesuffix(DEFAULT_RUN_SUFFIX)
    return next((s for s, a in RELEASE_AGENT.items() if a == agent), agent)


def recorded_turns(cfg: Config) -> float | None:
    """``rollout.replay``: the replayed run's mean turns per episode over the config's users,
    counted in its files; None where they are not all at hand (an estimate before checkout)."""
    run = cfg.rollout.replay
    assert run, "called for a replay only"
    lay = Layout(cfg)
    files = [lay.recorded(run, u, i) for u in cfg.user_ids for i in range(1, cfg.n_dims + 1)]
    if not all(f.is_file() for f in files):
        return None
    return sum(len(lay.load(f, RawEpisode).turns) for f in files) / len(files)
