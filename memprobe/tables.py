"""Per-user metrics and the run tables, computed from the per-user artifact files only.

Run values are the mean and the *sample* standard deviation (n-1) over users (reference-
release.md §3.7); a mode that does not apply to a system leaves its cells empty, never 0.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from typing import Any

import pandas as pd

from memprobe.records import Episodes, Judge, Memories, Preference

TABLE2_COLUMNS = [
    "system",
    "A",
    "D_mean",
    "D_std",
    "C_mean",
    "C_std",
    "B_dump_all_mean",
    "B_dump_all_std",
    "B_retrieve_mean",
    "B_retrieve_std",
    "N_items",
    "chars_per_item",
]


def mean_std(values: Iterable[float | None]) -> tuple[float | None, float | None]:
    vals = [v for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return None, None
    std = statistics.stdev(vals) if len(vals) > 1 else None
    return statistics.fmean(vals), std


def task_fit(ep: Episodes) -> float:
    """A per user: the share of episodes that ended satisfied."""
    return sum(e.end_reason == "satisfied" for e in ep.episodes) / len(ep.episodes)


def mean_turns(ep: Episodes) -> float:
    """C per user: mean turns over all episodes, max_turns episodes included."""
    return sum(len(e.turns) for e in ep.episodes) / len(ep.episodes)


def footprint(mem: Memories) -> tuple[int, float]:
    """E per user: number of items and mean content length (0 when empty)."""
    n = len(mem.memories)
    chars = sum(len(str(m.get("content", ""))) for m in mem.memories) / n if n else 0.0
    return n, chars


def _cell(x: float | None) -> Any:
    return None if x is None else round(x, 6)


def table2(
    systems: list[str],
    episodes: list[Episodes],
    preferences: list[Preference],
    memories: list[Memories],
    judges: list[Judge],
) -> pd.DataFrame:
    rows = []
    for system in systems:
        eps = [e for e in episodes if e.system == system]
        prefs = [p for p in preferences if p.system == system]
        mems = [m for m in memories if m.system == system]
        a_mean, _ = mean_std(task_fit(e) for e in eps)
        d_mean, d_std = mean_std(p.D for p in prefs)
        c_mean, c_std = mean_std(mean_turns(e) for e in eps)
        fps = [footprint(m) for m in mems]
        n_mean, _ = mean_std(float(n) for n, _ in fps)
        ch_mean, _ = mean_std(c for _, c in fps)
        row: dict[str, Any] = {
            "system": system,
            "A": _cell(None if a_mean is None else a_mean * 100),
            "D_mean": _cell(d_mean),
            "D_std": _cell(d_std),
            "C_mean": _cell(c_mean),
            "C_std": _cell(c_std),
        }
        for mode in ("dump_all", "retrieve"):
            b_mean, b_std = mean_std(
                j.overall for j in judges if j.system == system and j.mode == mode
            )
            row[f"B_{mode}_mean"] = _cell(b_mean)
            row[f"B_{mode}_std"] = _cell(b_std)
        row["N_items"] = _cell(n_mean)
        row["chars_per_item"] = _cell(ch_mean)
        rows.append(row)
    return pd.DataFrame(rows, columns=TABLE2_COLUMNS)
