"""This run's B next to other runs' on the same users (``compare.runs``; docs/results.md).

``compare.csv`` has one row per (system of this run, mode, category or ``all``, other run,
system of the other run): the users both runs scored with the same targets, each run's B over
those users, the mean of the per-user differences (this run's minus the other's) and its paired
bootstrap CI, by ``tables.bootstrap_ci`` with the run's seed as ``paired.csv``. Its ``note``
says where the two judges differ (form, model, prompt), what each judge scored against the
paper's judge where it was calibrated on it, which stores overflowed, and which users were
left out. Each run's ``scored.json`` (``records.Scored``, written by its tables job) says what
it scored and who judged it, so the other run's config is never read.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from memprobe.config.protocols import PAPER_PROTOCOL
from memprobe.config.schema import Config, role_settings
from memprobe.protocol import calibration
from memprobe.report.tables import N_BOOT, SHORT, bootstrap_ci, frame, number_cell
from memprobe.spec.records import CalibrationVerdict, Judge, JudgeIdentity, Scored
from memprobe.vocabulary import CATEGORIES

ALL = "all"  # the row of B itself; the others are its categories' means
COMPARE_COLUMNS = [
    "system",
    "mode",
    "category",
    "other_run",
    "other_system",
    "n_users",
    "b",
    "b_other",
    "diff",
    "ci_low",
    "ci_high",
    "n_boot",
    "note",
]

# The release's records were scored by the paper's judge: gpt-5.4-mini at temperature 0 with
# the release's own prompt (docs/fidelity.md, the judge row).
PAPER_JUDGE = JudgeIdentity(
    form="llm", model=PAPER_PROTOCOL["llm.model"], prompt="the release's own", paper=True
)


class CompareError(ValueError):
    """Two runs that cannot be compared after all, phrased as one line."""


def file_digest(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()[:12]


def judge_identity(cfg: Config, prompt: str) -> JudgeIdentity:
    """Who gives this run's scores (``prompt``: the judge's prompt file, an LLM judge's)."""
    if cfg.release.import_runs:
        return PAPER_JUDGE
    if cfg.judge.form == "scorer":
        scorer = cfg.judge.scorer
        return JudgeIdentity(
            form="scorer", model="offline judge", prompt=scorer, digest=file_digest(scorer)
        )
    model = role_settings(cfg, "judge")["model"]
    return JudgeIdentity(form="llm", model=model, prompt=prompt, digest=file_digest(prompt))


def scored(
    run: str,
    users: list[str],
    pairs: list[tuple[str, str]],
    judge: JudgeIdentity,
    summary: calibration.Summary | None,
    source: Any,
    min_kappa: float,
    max_bias: float,
) -> Scored:
    """The run's ``scored.json``; ``summary``: its judge calibration (None: imported)."""
    verdict = None
    if summary is not None:
        verdict = CalibrationVerdict(
            source=source,
            n=summary.n,
            kappa=summary.kappa,
            bias=summary.bias,
            passed=calibration.verdict(summary, min_kappa, max_bias) is None,
        )
    return Scored(run=run, users=users, pairs=pairs, judge=judge, calibration=verdict)


@dataclass
class Side:
    """One run's scores: its ``scored.json`` and its judge records by pair and user."""

    scored: Scored
    judges: dict[tuple[str, str], dict[str, Judge]]

    @property
    def run(self) -> str:
        return self.scored.run


def side(record: Scored, judges: Iterable[Judge]) -> Side:
    by: dict[tuple[str, str], dict[str, Judge]] = {(s, m): {} for s, m in record.pairs}
    for j in judges:
        by.setdefault((j.system, j.mode), {})[j.user_id] = j
    return Side(record, by)


def targets(j: Judge) -> dict[str, str]:
    """A user's targets as a judge record holds them: dimension -> its truth."""
    return {d.dimension: d.ground_truth for d in j.details}


def value(j: Judge, category: str) -> float | None:
    return j.overall if category == ALL else j.per_category.get(category)


def paired_users(mine: dict[str, Judge], theirs: dict[str, Judge]) -> tuple[list[str], int]:
    """The users both scored with the same targets, and how many both scored with others."""
    both = sorted(u for u in mine if u in theirs)  # paired.csv's order: the same resamples
    same = [u for u in both if targets(mine[u]) == targets(theirs[u])]
    return same, len(both) - len(same)


# -- notes --------------------------------------------------------------------------------
def _prompt(j: JudgeIdentity) -> str:
    return f"{j.prompt} ({j.digest})" if j.digest else j.prompt


def judge_difference(a: Scored, b: Scored) -> str | None:
    """Where the judges of two runs differ (form, model, prompt), or None."""
    ja, jb = a.judge, b.judge
    parts = [
        f"{what} {x} vs {y}"
        for what, x, y in (
            ("form", ja.form, jb.form),
            ("model", ja.model, jb.model),
            ("prompt", _prompt(ja), _prompt(jb)),
        )
        if x != y
    ]
    return f"judges differ ({a.run} vs {b.run}): " + ", ".join(parts) if parts else None


def calibration_note(s: Scored) -> str | None:
    """What a run's judge scored on its calibration: against the paper's judge where it was
    calibrated on the paper's pairs; the paper's judge itself needs no note."""
    if s.judge.paper:
        return None
    c = s.calibration
    if c is None:
        return f"{s.run}'s judge: not calibrated"
    figures = f"κ {c.kappa:.2f}, bias {c.bias:+.2f} on {c.n} pairs"
    failed = "" if c.passed else ", failed calibration"
    if c.source == "release":
        return f"{s.run}'s judge against the paper's judge: {figures}{failed}"
    return f"{s.run}'s judge not calibrated against the paper's judge (anchors: {figures}{failed})"


def failed_note(s: Scored) -> str | None:
    c = s.calibration
    return f"{s.run}'s judge failed calibration" if c is not None and not c.passed else None


def overflow_note(run: str, system: str, mode: str, js: list[Judge]) -> str | None:
    n = sum(j.flagged for j in js)
    return f"† {run} {system} {mode}: {n} of {len(js)} stores overflowed" if n else None


def row_note(
    this: Side, other: Side, pair: tuple[str, str], other_system: str, users: list[str], left: int
) -> str:
    system, mode = pair
    differ = judge_difference(this.scored, other.scored)
    notes = (
        [differ, calibration_note(this.scored), calibration_note(other.scored)]
        if differ
        else [failed_note(this.scored), failed_note(other.scored)]
    )
    notes += [
        overflow_note(this.run, system, mode, [this.judges[pair][u] for u in users]),
        overflow_note(
            other.run, other_system, mode, [other.judges[(other_system, mode)][u] for u in users]
        ),
        f"{left} user(s) scored by both with other targets: left out" if left else None,
    ]
    return "; ".join(n for n in notes if n)


# -- the table ----------------------------------------------------------------------------
def compare(this: Side, others: list[Side], seed: int, n_boot: int = N_BOOT) -> pd.DataFrame:
    """Every (system, mode) of this run against every system of each other run in that mode."""
    rows = []
    for pair, mine in this.judges.items():
        system, mode = pair
        for other in others:
            for (other_system, other_mode), theirs in other.judges.items():
                if other_mode != mode:
                    continue
                users, left = paired_users(mine, theirs)
                note = row_note(this, other, pair, other_system, users, left)
                for category in (ALL, *CATEGORIES):
                    row: dict[str, Any] = {
                        "system": system,
                        "mode": mode,
                        "category": SHORT.get(category, category),
                        "other_run": other.run,
                        "other_system": other_system,
                        "note": note,
                    }
                    row |= paired_cells(both_values(mine, theirs, users, category), seed, n_boot)
                    rows.append(row)
    return frame(rows, COMPARE_COLUMNS, ints=["n_users", "n_boot"])


def both_values(
    mine: dict[str, Judge], theirs: dict[str, Judge], users: list[str], category: str
) -> list[tuple[float, float]]:
    """Per user, this run's and the other's value (a user without a target there: none)."""
    out = []
    for u in users:
        a, b = value(mine[u], category), value(theirs[u], category)
        if a is not None and b is not None:
            out.append((a, b))
    return out


def paired_cells(
    vals: list[tuple[float, float]], seed: int, n_boot: int = N_BOOT
) -> dict[str, Any]:
    """n_users, b, b_other, diff and its CI over per-user pairs (this run's, the other's)."""
    if not vals:
        return {"n_users": 0}
    diffs = [a - b for a, b in vals]
    low, high = bootstrap_ci(diffs, seed, n_boot)
    return {
        "n_users": len(vals),
        "b": number_cell(statistics.fmean(a for a, _ in vals)),
        "b_other": number_cell(statistics.fmean(b for _, b in vals)),
        "diff": number_cell(statistics.fmean(diffs)),
        "ci_low": number_cell(low),
        "ci_high": number_cell(high),
        "n_boot": n_boot,
    }


def check_shared(this: Side, others: list[Side]) -> None:
    """An other run none of whose users has this run's targets is not the same users: one
    line (the DAG load has checked that the two share user names)."""
    for other in others:
        found = any(
            paired_users(mine, theirs)[0]
            for (_, mode), mine in this.judges.items()
            for (_, other_mode), theirs in other.judges.items()
            if mode == other_mode
        )
        if not found:
            raise CompareError(
                f"compare.runs: {other.run!r}: no user it shares with {this.run!r} has the "
                "same targets (dimensions and truths): these are other people under the "
                "same names; compare runs on the same users"
            )


def header(this: Side, others: list[Side]) -> str:
    """The report's line on the comparison."""
    parts = []
    for other in others:
        users = {u for p in this.judges for u in this.judges[p]} & {
            u for p in other.judges for u in other.judges[p]
        }
        differ = judge_difference(this.scored, other.scored)
        parts.append(
            f"{other.run} ({len(users)} shared users"
            + (f"; {differ}" if differ else "; the same judge")
            + ")"
        )
    return (
        "Compared with " + ", ".join(parts) + ": paired differences per system, mode and "
        "category in ``compare.csv``, B side by side in ``figures/compare.png``."
    )


# -- the figure's bars --------------------------------------------------------------------
@dataclass
class Bar:
    run: str
    system: str
    other: bool  # a compared run's system (drawn hatched)
    cells: list[tuple[float | None, float | None, float | None]]  # per column: B, CI low, high
    flagged: bool = False  # rests on an overflowed store (the paper's dagger)


FIGURE_COLUMNS = (*CATEGORIES, ALL)  # the figure's groups of bars


def figure_bars(this: Side, others: list[Side], mode: str, seed: int) -> tuple[list[Bar], int]:
    """The bars of one mode's panel, each over the users every run scored with the same
    targets in that mode, and how many users that is."""
    users: set[str] | None = None
    for other in others:
        shared = {
            u
            for (_, m), mine in this.judges.items()
            if m == mode
            for (_, om), theirs in other.judges.items()
            if om == mode
            for u in paired_users(mine, theirs)[0]
        }
        users = shared if users is None else users & shared
    users = users or set()
    bars = []
    for side_, is_other in ((this, False), *((o, True) for o in others)):
        for (system, m), by_user in side_.judges.items():
            if m != mode:
                continue
            js = [by_user[u] for u in sorted(users) if u in by_user]
            cells = []
            for column in FIGURE_COLUMNS:
                vals = [v for j in js if (v := value(j, column)) is not None]
                mean = statistics.fmean(vals) if vals else None
                cells.append((mean, *bootstrap_ci(vals, seed)))
            bars.append(Bar(side_.run, system, is_other, cells, any(j.flagged for j in js)))
    return bars, len(users)


def column_label(column: str) -> str:
    return "B" if column == ALL else SHORT[column]
