"""Per-user metrics and the run tables, computed from the per-user artifact files only.

Run values are the mean and the *sample* standard deviation (n-1) over users
(docs/release-format.md §3.7); a mode that does not apply to a system leaves its cells empty,
never 0.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Iterator
from typing import Any

import pandas as pd

from memprobe.spec.records import Attribution, Episodes, Judge, Memories, Preference
from memprobe.vocabulary import CATEGORIES, MODES

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
    "conversations",  # which conversations the row was built from (``conversations``)
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


def replayed(episodes: Iterable[Episodes]) -> dict[str, str]:
    """System -> the release run whose recorded conversations it was replayed through."""
    return {e.system: e.replay for e in episodes if e.replay}


def conversations(system: str, episodes: list[Episodes], memories: list[Memories]) -> str:
    """Where a row's conversations come from: ``live`` (this run's simulator and assistant),
    ``replay: <run>`` (rollout.replay) or ``release: <run>`` (the release's own records,
    release.import_runs)."""
    runs = sorted({e.replay for e in episodes if e.system == system and e.replay})
    if runs:
        return "; ".join(f"replay: {r}" for r in runs)
    imported = sorted(
        {
            str(m.meta.get("run"))
            for m in memories
            if m.system == system and m.meta.get("source") == "release"
        }
    )
    return "; ".join(f"release: {r}" for r in imported) or "live"


def number_cell(x: float | None) -> Any:
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
            "A": number_cell(None if a_mean is None else a_mean * 100),
            "D_mean": number_cell(d_mean),
            "D_std": number_cell(d_std),
            "C_mean": number_cell(c_mean),
            "C_std": number_cell(c_std),
        }
        for mode in MODES:
            b_mean, b_std = mean_std(
                j.overall for j in judges if j.system == system and j.mode == mode
            )
            row[f"B_{mode}_mean"] = number_cell(b_mean)
            row[f"B_{mode}_std"] = number_cell(b_std)
        row["N_items"] = number_cell(n_mean)
        row["chars_per_item"] = number_cell(ch_mean)
        row["conversations"] = conversations(system, eps, mems)
        rows.append(row)
    return pd.DataFrame(rows, columns=TABLE2_COLUMNS)


# -- shared helpers ----------------------------------------------------------------------
SHORT = {
    "skill_memory": "skill",
    "knowledge_memory": "knowledge",
    "episodic_memory": "episodic",
    "self_model": "self",
    "assistance_preference": "preference",
}
DAGGER = "†"
# Attribution labels -> the paper's Table 4/13 columns (no_targeted_task has no column).
LABEL_COLUMN = {
    "ok": "recovered",
    "memory_failure": "memory",
    "task_design_failure": "task",
    "agent_elicitation_failure": "agent",
    "simulator_too_strict": "user",
}
COUNT_COLUMNS = ["recovered", "memory", "task", "agent", "user"]

TABLE3_COLUMNS = ["system", "mode"] + [
    f"{SHORT[c]}_{s}" for c in CATEGORIES for s in ("mean", "std")
]
TABLE4_COLUMNS = ["system", "mode", *COUNT_COLUMNS, "recovery_rate"]
TABLE13_COLUMNS = ["system", "category", *COUNT_COLUMNS]
TABLE14_COLUMNS = [
    "system",
    "n_mean",
    "n_p50",
    "n_p90",
    "n_max",
    "chars_mean",
    "chars_p50",
    "chars_p90",
    "chars_max",
]
GAP_COLUMNS = ["system", "mean", "p50", "min", "max"]
CI_COLUMNS = ["system", "mode", "B_mean", "ci_low", "ci_high", "n_users", "n_boot"]
PAIRED_COLUMNS = [
    "mode",
    "system_a",
    "system_b",
    "n_users",
    "mean_diff",
    "ci_low",
    "ci_high",
    "n_boot",
]
TOPK_COLUMNS = ["system", "k", "B_mean", "B_std", "n_users"]
TABLE5_COLUMNS = [
    "system",
    "role",
    "calls",
    "paid_calls",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "length_cut",  # free-text replies accepted though cut at max_tokens (finish_reason length)
]


def quantile_low(values: list[float], q: float) -> float:
    """The lower order statistic sorted[floor(q*(n-1))], the release's footprint convention."""
    ordered = sorted(values)
    return ordered[math.floor(q * (len(ordered) - 1))]


def flagged_pairs(judges: Iterable[Judge]) -> set[tuple[str, str]]:
    """(system, mode) whose B rests on at least one unscored, overflowing store."""
    return {(j.system, j.mode) for j in judges if j.flagged}


def frame(rows: list[dict[str, Any]], columns: list[str], ints: Iterable[str] = ()) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=columns)
    for c in ints:
        df[c] = df[c].astype("Int64")  # nullable: an empty cell stays empty, never 0
    return df


def flags_frame(df: pd.DataFrame, keys: list[str], flagged_cols) -> pd.DataFrame:
    """A companion of ``df`` with its key columns and DAGGER where a cell is overflow-flagged.

    ``flagged_cols(row)`` names the value columns of that row to mark. The table itself keeps
    its exact columns and numbers; the dagger lives in ``<table>_flags.csv``.
    """
    out = df[keys].copy()
    for c in df.columns:
        if c not in keys:
            out[c] = ""
    for i, row in df.iterrows():
        for c in flagged_cols(row):
            out.at[i, c] = DAGGER
    return out


def table2_flags(df: pd.DataFrame, judges: list[Judge]) -> pd.DataFrame:
    flagged = flagged_pairs(judges)
    return flags_frame(
        df,
        ["system"],
        lambda r: [
            f"B_{m}_{s}" for m in MODES if (r["system"], m) in flagged for s in ("mean", "std")
        ],
    )


# What a replayed row's cells rest on (rollout.replay): the recorded run's conversations.
RECORDED = "the recorded run's ({run}), not this system's conversations"
REPLAY_TABLE2 = {
    "A": RECORDED,
    "C_mean": RECORDED,
    "C_std": RECORDED,
    "D_mean": "not applicable: a replay of {run} makes no reply of its own to judge",
    "D_std": "not applicable: a replay of {run} makes no reply of its own to judge",
}
# Table 4: agent and user labels name the recorded assistant and simulator.
REPLAY_TABLE4 = {
    "agent": "the recorded run's assistant ({run})",
    "user": "the recorded run's simulator ({run})",
}


def replay_notes(
    flags: pd.DataFrame, df: pd.DataFrame, replayed_: dict[str, str], notes: dict[str, str]
) -> pd.DataFrame:
    """Add each column's note (``{run}`` filled in) to the rows of a replayed system, empty
    cells included: a D left empty by a replay says why."""

    def note_for(row: pd.Series, col: str) -> str | None:
        run = replayed_.get(row["system"])
        return notes[col].format(run=run) if run and col in notes else None

    return note_each(flags, df, note_for, empty=True)


def replay_header(replayed_: dict[str, str]) -> str:
    """The report's note on rows built from recorded conversations."""
    rows = ", ".join(f"{s} (replay: {r})" for s, r in replayed_.items())
    return (
        f"Replayed: {rows}. These systems wrote their stores from the release's recorded "
        "conversations: B and E are theirs; A and C are the recorded run's, D is not "
        "applicable, and Table 4's agent and user labels name the recorded assistant and "
        "simulator (``table2_flags.csv``, ``table4_flags.csv``)."
    )


def _by_pair(judges: Iterable[Judge]) -> dict[tuple[str, str], list[Judge]]:
    out: dict[tuple[str, str], list[Judge]] = {}
    for j in judges:
        out.setdefault((j.system, j.mode), []).append(j)
    return out


def pair_rows(
    systems: list[str], modes: list[str], pairs: list[tuple[str, str]], judges: Iterable[Judge]
) -> Iterator[tuple[dict[str, Any], list[Judge]]]:
    """A row per system and mode (in table order) and its judges (none for a pair not run)."""
    by = _by_pair(judges)
    for s in systems:
        for m in modes:
            yield {"system": s, "mode": m}, by.get((s, m), []) if (s, m) in pairs else []


# -- Table 3: B per category -------------------------------------------------------------
def table3(
    systems: list[str], modes: list[str], pairs: list[tuple[str, str]], judges: list[Judge]
) -> pd.DataFrame:
    rows = []
    for row, js in pair_rows(systems, modes, pairs, judges):
        for c in CATEGORIES:
            mean, std = mean_std(j.per_category.get(c) for j in js)
            row[f"{SHORT[c]}_mean"], row[f"{SHORT[c]}_std"] = number_cell(mean), number_cell(std)
        rows.append(row)
    return frame(rows, TABLE3_COLUMNS)


def row_flags(df: pd.DataFrame, keys: list[str], judges: list[Judge]) -> pd.DataFrame:
    """Flag every value cell of rows whose (system, mode) is flagged (mode from the row or
    dump_all for the per-category attribution table)."""
    flagged = flagged_pairs(judges)
    values = [c for c in df.columns if c not in keys]
    return flags_frame(
        df,
        keys,
        # r["mode"], not r.mode: a pandas row has a .mode() method.
        lambda r: values if (r["system"], r.get("mode", "dump_all")) in flagged else [],
    )


# -- Table 4 and 13: attribution counts --------------------------------------------------
def _counts(details: Iterable[Any]) -> dict[str, int]:
    out = dict.fromkeys(COUNT_COLUMNS, 0)
    for d in details:
        col = LABEL_COLUMN.get(d.label)
        if col:
            out[col] += 1
    return out


def recovery_rate(recovered: int, memory: int) -> float | None:
    """Recovered / (Recovered + Memory) in percent; undefined (empty) when both are 0."""
    total = recovered + memory
    return None if total == 0 else 100.0 * recovered / total


def table4(
    systems: list[str],
    modes: list[str],
    pairs: list[tuple[str, str]],
    attributions: list[Attribution],
) -> pd.DataFrame:
    rows = []
    for s in systems:
        for m in modes:
            row: dict[str, Any] = {"system": s, "mode": m}
            if (s, m) in pairs:
                details = [
                    d for a in attributions if a.system == s and a.mode == m for d in a.details
                ]
                counts = _counts(details)
                row |= counts
                row["recovery_rate"] = number_cell(
                    recovery_rate(counts["recovered"], counts["memory"])
                )
            rows.append(row)
    return frame(rows, TABLE4_COLUMNS, ints=COUNT_COLUMNS)


def table13(
    systems: list[str], pairs: list[tuple[str, str]], attributions: list[Attribution]
) -> pd.DataFrame:
    rows = []
    for s in systems:
        for c in CATEGORIES:
            row: dict[str, Any] = {"system": s, "category": SHORT[c]}
            if (s, "dump_all") in pairs:
                row |= _counts(
                    d
                    for a in attributions
                    if a.system == s and a.mode == "dump_all"
                    for d in a.details
                    if d.category == c
                )
            rows.append(row)
    return frame(rows, TABLE13_COLUMNS, ints=COUNT_COLUMNS)


# -- Table 14: footprint distribution -----------------------------------------------------
def table14(systems: list[str], memories: list[Memories]) -> pd.DataFrame:
    rows = []
    for s in systems:
        fps = [footprint(m) for m in memories if m.system == s]
        row: dict[str, Any] = {"system": s}
        if fps:
            ns = [float(n) for n, _ in fps]
            chars = [c for _, c in fps]
            for name, vals in (("n", ns), ("chars", chars)):
                row[f"{name}_mean"] = number_cell(statistics.fmean(vals))
                row[f"{name}_p50"] = number_cell(quantile_low(vals, 0.5))
                row[f"{name}_p90"] = number_cell(quantile_low(vals, 0.9))
                row[f"{name}_max"] = number_cell(max(vals))
        rows.append(row)
    return frame(rows, TABLE14_COLUMNS, ints=["n_p50", "n_p90", "n_max"])


# -- Appendix H: per-user dump - retrieve gap --------------------------------------------
def user_gaps(system: str, judges: list[Judge]) -> list[float]:
    dump = {j.user_id: j.overall for j in judges if j.system == system and j.mode == "dump_all"}
    retr = {j.user_id: j.overall for j in judges if j.system == system and j.mode == "retrieve"}
    return [dump[u] - retr[u] for u in sorted(dump) if u in retr]


def gap(systems: list[str], judges: list[Judge]) -> pd.DataFrame:
    """B_dump - B_retrieve per user; p50 is the standard median, as in the paper's App. H."""
    rows = []
    for s in systems:
        g = user_gaps(s, judges)
        row: dict[str, Any] = {"system": s}
        if g:
            row |= {
                "mean": number_cell(statistics.fmean(g)),
                "p50": number_cell(statistics.median(g)),
                "min": number_cell(min(g)),
                "max": number_cell(max(g)),
            }
        rows.append(row)
    return frame(rows, GAP_COLUMNS)


def gap_flags(df: pd.DataFrame, judges: list[Judge]) -> pd.DataFrame:
    flagged = {s for s, _ in flagged_pairs(judges)}
    values = [c for c in df.columns if c != "system"]
    return flags_frame(df, ["system"], lambda r: values if r["system"] in flagged else [])


# -- beyond the paper: bootstrap CIs, paired comparison, top-k sweep ----------------------
N_BOOT = 2000


def bootstrap_ci(
    values: list[float], seed: int, n_boot: int = N_BOOT
) -> tuple[float | None, float | None]:
    """Percentile 95% CI of the mean, resampling users with replacement (seeded)."""
    import numpy as np

    if len(values) < 2:
        return None, None
    rng = np.random.default_rng(seed)
    arr = np.asarray(values, dtype=float)
    means = arr[rng.integers(0, len(arr), size=(n_boot, len(arr)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def table2_ci(
    systems: list[str],
    modes: list[str],
    pairs: list[tuple[str, str]],
    judges: list[Judge],
    seed: int,
    n_boot: int = N_BOOT,
) -> pd.DataFrame:
    rows = []
    for row, js in pair_rows(systems, modes, pairs, judges):
        vals = [j.overall for j in js]
        if vals:
            low, high = bootstrap_ci(vals, seed, n_boot)
            row |= {
                "B_mean": number_cell(statistics.fmean(vals)),
                "ci_low": number_cell(low),
                "ci_high": number_cell(high),
                "n_users": len(vals),
                "n_boot": n_boot,
            }
        rows.append(row)
    return frame(rows, CI_COLUMNS, ints=["n_users", "n_boot"])


def paired(
    systems: list[str], modes: list[str], judges: list[Judge], seed: int, n_boot: int = N_BOOT
) -> pd.DataFrame:
    """Per-user B differences (system_a - system_b) on the users both have, with a CI."""
    by = {(j.system, j.mode, j.user_id): j.overall for j in judges}
    rows = []
    for m in modes:
        for i, a in enumerate(systems):
            for b in systems[i + 1 :]:
                users = sorted(u for (s, mm, u) in by if s == a and mm == m and (b, m, u) in by)
                if not users:
                    continue
                diffs = [by[(a, m, u)] - by[(b, m, u)] for u in users]
                low, high = bootstrap_ci(diffs, seed, n_boot)
                rows.append(
                    {
                        "mode": m,
                        "system_a": a,
                        "system_b": b,
                        "n_users": len(users),
                        "mean_diff": number_cell(statistics.fmean(diffs)),
                        "ci_low": number_cell(low),
                        "ci_high": number_cell(high),
                        "n_boot": n_boot,
                    }
                )
    return frame(rows, PAIRED_COLUMNS, ints=["n_users", "n_boot"])


def topk_sweep(
    systems: list[str], ks: list[int], judges_by_k: dict[int, list[Judge]]
) -> pd.DataFrame:
    rows = []
    for s in systems:
        for k in ks:
            vals = [j.overall for j in judges_by_k.get(k, []) if j.system == s]
            mean, std = mean_std(vals)
            rows.append(
                {
                    "system": s,
                    "k": k,
                    "B_mean": number_cell(mean),
                    "B_std": number_cell(std),
                    "n_users": len(vals) or None,
                }
            )
    return frame(rows, TOPK_COLUMNS, ints=["k", "n_users"])


# -- Table 5: tokens per role and system, from the usage ledger ----------------------------
def ledger_system(job: str, systems: list[str]) -> str:
    """The system of a ledger row's job ``rule/<wildcards joined by _>``, or "(shared)"."""
    tag = job.split("/", 1)[1] if "/" in job else ""
    match = [s for s in systems if tag == s or tag.startswith(f"{s}_")]
    return max(match, key=len) if match else "(shared)"


def table5(ledger_rows: Iterable[dict[str, str]], systems: list[str]) -> pd.DataFrame:
    """Calls and paid tokens (cache hits cost nothing) per system and role."""
    acc: dict[tuple[str, str], dict[str, int]] = {}
    for r in ledger_rows:
        key = (ledger_system(r.get("job", ""), systems), r.get("role", ""))
        a = acc.setdefault(key, dict.fromkeys(TABLE5_COLUMNS[2:], 0))
        a["calls"] += 1
        a["length_cut"] += r.get("finish_reason") == "length" and r.get("status") == "ok"
        if r.get("cached") != "true":
            a["paid_calls"] += 1
            a["prompt_tokens"] += int(r.get("prompt_tokens") or 0)
            a["completion_tokens"] += int(r.get("completion_tokens") or 0)
    rows = []
    order = {s: i for i, s in enumerate([*systems, "(shared)"])}
    for (s, role), a in sorted(acc.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0][1])):
        a["total_tokens"] = a["prompt_tokens"] + a["completion_tokens"]
        rows.append({"system": s, "role": role, **a})
    return frame(rows, TABLE5_COLUMNS, ints=TABLE5_COLUMNS[2:])


# -- notes on cells (a failed judge, a replay, memprobe/report/table_notes.py) ------------
def note_cells(
    flags: pd.DataFrame, df: pd.DataFrame, columns: list[str], note: str
) -> pd.DataFrame:
    """Add ``note`` to every non-empty cell of ``columns`` (a failed judge: its B cells)."""
    return note_each(flags, df, lambda row, c: note if c in columns else None)


def note_each(flags: pd.DataFrame, df: pd.DataFrame, note_for, empty: bool = False) -> pd.DataFrame:
    """Add ``note_for(row, column)`` (None: nothing) to each non-empty cell of ``df`` (each
    cell with ``empty``: a note may say why a cell is empty)."""
    out = flags.copy()
    for c in df.columns:
        for i in df.index if empty else df.index[df[c].notna()]:
            note = note_for(df.loc[i], c)
            if note:
                out.at[i, c] = f"{out.at[i, c]}; {note}" if out.at[i, c] else note
    return out
