"""The run figures (results/<run>/figures/*.png), drawn from the per-user files only.

- per-category B by system and mode (grouped bars, sample std as error bars),
- dump_all vs retrieve B per user (one point per user, the diagonal is "no gap"),
- attribution label shares per system and mode (stacked bars, Table 4's columns),
- this run's B per category next to the compared runs' (``compare.runs``; bootstrap CIs).

Overflow-flagged (system, mode) bars carry the paper's dagger in their label. A run whose judge
failed calibration gets the flag its tables carry (``note``) across the top of every figure,
in a red band, and in the PNG's Description, so a figure pasted elsewhere keeps it.
"""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")  # files only, never a display

import matplotlib.pyplot as plt  # noqa: E402

from memprobe.report.compare import FIGURE_COLUMNS, Bar, column_label  # noqa: E402
from memprobe.report.tables import (  # noqa: E402
    COUNT_COLUMNS,
    DAGGER,
    LABEL_COLUMN,
    SHORT,
    flagged_pairs,
    mean_std,
)
from memprobe.spec.records import Attribution, Judge  # noqa: E402
from memprobe.spec.rubric import RUBRIC  # noqa: E402
from memprobe.vocabulary import CATEGORIES, MODES  # noqa: E402

# The band a flagged figure carries: white on red, the colour no plotted series uses.
FLAG_COLOUR = "#b00020"


def _save(fig, path: str | os.PathLike[str], note: str | None = None) -> None:
    os.makedirs(os.path.dirname(os.fspath(path)) or ".", exist_ok=True)
    if note:
        fig.suptitle(
            f"{note}: not findings",
            color="white",
            fontsize=9,
            fontweight="bold",
            bbox={"facecolor": FLAG_COLOUR, "edgecolor": FLAG_COLOUR, "pad": 4},
        )
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Description": note} if note else None)
    plt.close(fig)


def _label(system: str, mode: str, flagged: set[tuple[str, str]]) -> str:
    return f"{system} {mode}{DAGGER if (system, mode) in flagged else ''}"


def category_b(judges: list[Judge], systems: list[str], path, note: str | None = None) -> None:
    flagged = flagged_pairs(judges)
    series = [
        (s, m) for s in systems for m in MODES if any(j.system == s and j.mode == m for j in judges)
    ]
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / max(len(series), 1)
    for n, (s, m) in enumerate(series):
        means, stds = [], []
        for c in CATEGORIES:
            mean, std = mean_std(
                j.per_category.get(c) for j in judges if j.system == s and j.mode == m
            )
            means.append(mean or 0.0)
            stds.append(std or 0.0)
        xs = [i + n * width for i in range(len(CATEGORIES))]
        ax.bar(xs, means, width, yerr=stds, capsize=2, label=_label(s, m, flagged))
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(CATEGORIES))])
    ax.set_xticklabels([SHORT[c] for c in CATEGORIES])
    ax.set_ylim(*RUBRIC.score_range)
    ax.set_ylabel("B (mean over users)")
    ax.set_title("Recovery by category, system and mode")
    ax.legend(fontsize=7, ncol=2)
    _save(fig, path, note)


def dump_vs_retrieve(
    judges: list[Judge], systems: list[str], path, note: str | None = None
) -> None:
    fig, ax = plt.subplots(figsize=(5, 5))
    for s in systems:
        dump = {j.user_id: j.overall for j in judges if j.system == s and j.mode == "dump_all"}
        retr = {j.user_id: j.overall for j in judges if j.system == s and j.mode == "retrieve"}
        users = sorted(u for u in dump if u in retr)
        if users:
            ax.scatter([dump[u] for u in users], [retr[u] for u in users], label=s, s=18)
    ax.plot(RUBRIC.score_range, RUBRIC.score_range, color="grey", linewidth=0.8)
    ax.set_xlim(*RUBRIC.score_range)
    ax.set_ylim(*RUBRIC.score_range)
    ax.set_xlabel("B dump_all (per user)")
    ax.set_ylabel("B retrieve (per user)")
    ax.set_title("Full store vs top-k, per user")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    _save(fig, path, note)


def attribution_bars(
    attributions: list[Attribution], systems: list[str], path, note: str | None = None
) -> None:
    bars: list[tuple[str, str]] = [
        (s, m)
        for s in systems
        for m in MODES
        if any(a.system == s and a.mode == m for a in attributions)
    ]
    counts = {b: dict.fromkeys(COUNT_COLUMNS, 0) for b in bars}
    for a in attributions:
        for d in a.details:
            col = LABEL_COLUMN.get(d.label)
            if col:
                counts[(a.system, a.mode)][col] += 1
    fig, ax = plt.subplots(figsize=(9, 4))
    bottoms = [0.0] * len(bars)
    for col in COUNT_COLUMNS:
        vals = [counts[b][col] for b in bars]
        ax.bar(range(len(bars)), vals, bottom=bottoms, label=col)
        bottoms = [x + v for x, v in zip(bottoms, vals, strict=True)]
    ax.set_xticks(range(len(bars)))
    ax.set_xticklabels([f"{s}\n{m}" for s, m in bars], fontsize=7)
    ax.set_ylabel("targets")
    ax.set_title("Failure attribution (Table 4 columns)")
    ax.legend(fontsize=7)
    _save(fig, path, note)


def _ci_errors(cells) -> list[list[float]]:
    """Error bars from (B, CI low, CI high) cells; none where the CI is undefined (one user)."""
    lows, highs = [], []
    for mean, low, high in cells:
        m = mean or 0.0
        lows.append(m - low if low is not None else 0.0)
        highs.append(high - m if high is not None else 0.0)
    return [lows, highs]


def compare_b(panels: list[tuple[str, list[Bar], int]], path, note: str | None = None) -> None:
    """One panel per mode: B per category (and B itself), this run's systems in solid bars
    and the compared runs' hatched, each with its bootstrap 95% CI over the panel's users; a
    dagger on a bar resting on an overflowed store."""
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 3.6 * len(panels)), squeeze=False)
    # One colour per run and system, the same in every panel.
    series = list(dict.fromkeys((b.run, b.system) for _, bars, _ in panels for b in bars))
    for ax, (mode, bars, n_users) in zip(axes[:, 0], panels, strict=True):
        columns = len(FIGURE_COLUMNS)
        width = 0.8 / max(len(bars), 1)
        for n, bar in enumerate(bars):
            xs = [i + n * width for i in range(columns)]
            means = [c[0] or 0.0 for c in bar.cells]
            ax.bar(
                xs,
                means,
                width,
                yerr=_ci_errors(bar.cells),
                capsize=2,
                color=f"C{series.index((bar.run, bar.system)) % 10}",
                hatch="//" if bar.other else None,
                edgecolor="white" if bar.other else None,
                label=f"{bar.run}: {bar.system}{DAGGER if bar.flagged else ''}",
            )
        ax.set_xticks([i + 0.4 - width / 2 for i in range(columns)])
        ax.set_xticklabels([column_label(c) for c in FIGURE_COLUMNS])
        ax.set_ylim(*RUBRIC.score_range)
        ax.set_ylabel("B (mean over users)")
        ax.set_title(f"{mode}: {n_users} users scored by every run (95% bootstrap CIs)")
        if bars:
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    _save(fig, path, note)
