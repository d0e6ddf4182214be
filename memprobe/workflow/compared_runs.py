"""``compare.runs``: the other runs this run is set beside, found when the DAG loads.

An other run is found by its name (``Config.run_folder``), never by its config: its tables job
left ``scored.json`` (``records.Scored``: its users, its (system, mode) pairs, its judge), and
its per-user judge records of the users both runs score are inputs of this run's tables and
inspector, so a rerun of the other run reruns the comparison. A run that is not there, has not
built its tables, or shares no user with this run stops the DAG load in one line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from memprobe.config.schema import Config
from memprobe.spec import records
from memprobe.spec.records import Scored
from memprobe.workflow import dag_load, paths


class CompareError(ValueError):
    """A run of ``compare.runs`` that cannot be compared with, phrased as one line."""


@dataclass(frozen=True)
class Compared:
    name: str
    scored_file: str  # <its folder>/scored.json
    scored: Scored
    users: list[str]  # the users both runs score, in this run's order
    pairs: list[tuple[str, str]]  # its (system, mode) pairs in the modes this run scores

    def judge_file(self, system: str, user: str, mode: str) -> str:
        return f"{os.path.dirname(self.scored_file)}/{system}/{user}/{mode}/judge.json"

    @property
    def judge_files(self) -> list[str]:
        return [self.judge_file(s, u, m) for s, m in self.pairs for u in self.users]

    def param(self) -> dict[str, Any]:
        """What the tables and inspector jobs get of it (JSON, as a rule's params)."""
        return {"name": self.name, "scored": self.scored_file, "judges": self.judge_files}


def _span(users: list[str]) -> str:
    return ", ".join(users) if len(users) <= 3 else f"{users[0]}..{users[-1]} ({len(users)})"


def find(cfg: Config, users: list[str], pairs: list[tuple[str, str]]) -> list[Compared]:
    """Every run of ``compare.runs``, with the users and pairs it shares with this run's
    ``users`` and ``pairs``; ``CompareError`` for the first that cannot be compared with."""
    modes = {m for _, m in pairs}
    out = []
    for name in cfg.compare.runs:
        folder = cfg.run_folder(name)
        scored_file = f"{folder}/{paths.SCORED}"
        if not os.path.isdir(folder):
            here = ", ".join(map(repr, paths.runs_with_tables(cfg))) or "none"
            raise CompareError(
                f"compare.runs: no run {name!r} here ({folder}/ not found; runs with tables: "
                f"{here}): build its tables first, or remove it from compare.runs"
            )
        if not os.path.isfile(scored_file):
            raise CompareError(
                f"compare.runs: {name!r}: {scored_file} not found: build that run's tables "
                "first (snakemake tables with its config)"
            )
        try:
            scored = records.load(scored_file, Scored)
        except records.RecordError as err:
            raise CompareError(f"compare.runs: {name!r}: {err}") from None
        shared = [u for u in users if u in set(scored.users)]
        if not shared:
            raise CompareError(
                f"compare.runs: {name!r} shares no user with this run (it scored "
                f"{_span(scored.users)}; this run scores {_span(users)})"
            )
        theirs = [(s, m) for s, m in scored.pairs if m in modes]
        if not theirs:
            ours = ", ".join(sorted(modes))
            raise CompareError(f"compare.runs: {name!r} scored none of this run's modes ({ours})")
        run = Compared(name, scored_file, scored, shared, theirs)
        missing = next((f for f in run.judge_files if not os.path.isfile(f)), None)
        if missing:
            raise CompareError(
                f"compare.runs: {name!r}: {missing} not found (its scored.json lists it): "
                "rebuild that run's tables"
            )
        out.append(run)
    return out


def at_dag_load(cfg: Config, users: list[str], pairs: list[tuple[str, str]]) -> list[Compared]:
    """``find``, stopping the DAG load in one line where it fails."""
    try:
        return find(cfg, users, pairs)
    except CompareError as err:
        dag_load.stop(err)
