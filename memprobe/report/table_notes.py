"""The run's notes on its tables: the judge's flags (its calibration, its cross-check with the
offline judge), the stand-ins its stages used where the re-asks ran out, and the slot-fill
labels that name their slot instead of filling it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pandas as pd

from memprobe.report.tables import SHORT, frame, mean_std, number_cell, pair_rows
from memprobe.spec.records import Judge
from memprobe.spec.stand_in_log import JobStandIns
from memprobe.vocabulary import CATEGORIES

# -- judge.cross_check: the offline judge beside an LLM judge -----------------------------
CROSS_CHECK_COLUMNS = ["system", "mode", "cell", "judge", "offline", "difference", "flagged"]


def offline_view(j: Judge) -> Judge | None:
    """The judge record as the offline judge scored it (None where it was not asked)."""
    from memprobe.protocol.judge import category_means

    if not j.details or any(d.second_opinion is None for d in j.details):
        return None
    details = [d.model_copy(update={"score": d.second_opinion}) for d in j.details]
    per, overall = category_means(details)
    return j.model_copy(update={"details": details, "per_category": per, "overall": overall})


def cross_check(
    systems: list[str],
    modes: list[str],
    pairs: list[tuple[str, str]],
    judges: list[Judge],
    margin: float,
) -> pd.DataFrame:
    """Per system and mode, B and each category's mean as the run's judge and as the offline
    judge scored the same labels; ``flagged`` where they differ by more than ``margin``."""
    rows = []
    for key, js in pair_rows(systems, modes, pairs, judges):
        views = [offline_view(j) for j in js]
        if not js or any(v is None for v in views):
            continue
        cells = {"B": lambda j: j.overall} | {
            SHORT[c]: (lambda j, c=c: j.per_category.get(c)) for c in CATEGORIES
        }
        for cell, get in cells.items():
            ours, offline = mean_std(map(get, js))[0], mean_std(map(get, views))[0]
            if ours is None or offline is None:
                continue
            diff = offline - ours
            rows.append(
                key
                | {
                    "cell": cell,
                    "judge": number_cell(ours),
                    "offline": number_cell(offline),
                    "difference": number_cell(diff),
                    "flagged": abs(diff) > margin + 1e-9,
                }
            )
    return frame(rows, CROSS_CHECK_COLUMNS)


def cross_check_notes(df: pd.DataFrame, margin: float) -> dict[tuple[str, str, str], str]:
    """(system, mode, cell) -> the note its B cell carries where the two judges disagree."""
    if df.empty:
        return {}
    return {
        (r["system"], r["mode"], r["cell"]): (
            f"judge cross-check: the offline judge gives {r['offline']:.2f}, "
            f"the run's judge {r['judge']:.2f} (margin {margin:g})"
        )
        for _, r in df[df["flagged"]].iterrows()
    }


# -- stand-ins for invalid replies (memprobe/spec/stand_in_log.py) -------------------------
STAND_IN_COLUMNS = ["stage", "job", "attempt", "where", "problem", "action", "touches"]
KEYS = ("system", "mode", "category")
# What a cell rests on: the metrics a stand-in may have moved, and the mode its
# column belongs to (None: the row's mode, or every mode).
CellMetrics = Callable[[str], tuple[frozenset[str], str | None]]


def stand_ins_table(jobs: list[JobStandIns]) -> pd.DataFrame:
    """Every stand-in of the run's jobs, one row each."""
    rows = [
        {
            "stage": r.stage,
            "job": j.job,
            "attempt": j.attempt,
            "where": r.where,
            "problem": r.problem,
            "action": r.action,
            "touches": " ".join(r.touches),
        }
        for j in jobs
        for r in j.recoveries
    ]
    return frame(rows, STAND_IN_COLUMNS, ints=["attempt"])


def stand_in_note(
    jobs: list[JobStandIns], system: str, mode: str | None, metrics: frozenset[str]
) -> str:
    """The flag of a (system, mode) cell resting on ``metrics``: the stand-ins of
    per-user jobs of that system and mode (a job without the wildcard: every system or mode)
    whose stand-in touched one of them; "" when none did. The sweep's jobs feed only the
    top-k sweep, which has no flags."""
    counts: Counter[str] = Counter()
    for j in jobs:
        w = j.wildcards
        if "user" not in w or j.rule.endswith("_sweep"):
            continue
        if w.get("system", system) != system or (mode and w.get("mode", mode) != mode):
            continue
        counts.update(r.stage for r in j.recoveries if metrics & set(r.touches))
    return ("stand-ins: " + ", ".join(f"{s} {n}" for s, n in counts.items())) if counts else ""


def table2_metrics(column: str) -> tuple[frozenset[str], str | None]:
    """Table 2's columns: A, C and D from the rollout and preference judge, B per mode."""
    head = column.split("_")[0]
    if head == "B":
        return frozenset({"B"}), column.removeprefix("B_").rsplit("_", 1)[0]
    return (frozenset({head}) if head in ("A", "C", "D") else frozenset()), None


def b_metrics(column: str) -> tuple[frozenset[str], str | None]:
    return frozenset({"B"}), None


def attribution_metrics(column: str) -> tuple[frozenset[str], str | None]:
    return frozenset({"B", "attribution"}), None


def stand_in_flags(
    flags: pd.DataFrame,
    df: pd.DataFrame,
    jobs: list[JobStandIns],
    metrics: CellMetrics,
    mode: str | None = None,
) -> pd.DataFrame:
    """Add to each non-empty value cell the stand-ins it rests on (``stand_in_note``);
    ``mode``: the mode of rows that have none (Table 13 counts dump_all)."""
    out = flags.copy()
    for i, row in df.iterrows():
        for c in df.columns:
            wanted, col_mode = metrics(c)
            if c in KEYS or not wanted or pd.isna(row[c]):
                continue
            row_mode = row["mode"] if "mode" in df.columns else (col_mode or mode)
            note = stand_in_note(jobs, row["system"], row_mode, wanted)
            if note:
                out.at[i, c] = f"{out.at[i, c]}; {note}" if out.at[i, c] else note
    return out


DEGENERATE_KINDS = ("empty", "category_name", "dimension_name", "axis_question")
DEGENERATE_COLUMNS = ["system", "mode", "n_labels", *DEGENERATE_KINDS, "degenerate", "share"]


def degenerate_labels(
    pairs: list[tuple[str, str]], judges: list[Judge], axes: dict[str, str]
) -> pd.DataFrame:
    """Slot-fill labels that name their slot instead of filling it, per system and mode."""
    from memprobe.protocol.judge import degenerate_kind

    rows = []
    for s, m in pairs:
        details = [d for j in judges if j.system == s and j.mode == m for d in j.details]
        kinds = [degenerate_kind(d.predicted, d.dimension, axes.get(d.dimension)) for d in details]
        row: dict[str, Any] = {"system": s, "mode": m, "n_labels": len(details)}
        row |= {k: kinds.count(k) for k in DEGENERATE_KINDS}
        row["degenerate"] = sum(k is not None for k in kinds)
        row["share"] = number_cell(row["degenerate"] / len(details)) if details else None
        rows.append(row)
    return frame(rows, DEGENERATE_COLUMNS, ints=["n_labels", *DEGENERATE_KINDS, "degenerate"])
