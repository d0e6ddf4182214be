"""Figure content, not only files: the bars, points and labels each figure draws, by hand."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
from matplotlib.container import BarContainer

from memprobe import CATEGORIES
from memprobe.report import figures
from memprobe.report.compare import FIGURE_COLUMNS, Bar
from memprobe.report.tables import COUNT_COLUMNS, DAGGER
from memprobe.spec.records import Attribution, AttributionEntry
from tests.helpers.figures import flag_band
from tests.helpers.tables import judge_of


@pytest.fixture
def drawn(monkeypatch):
    figs = []
    monkeypatch.setattr(figures, "_save", lambda fig, path, note=None: figs.append(fig))
    yield figs
    for f in figs:
        plt.close(f)


def judge(system, mode, user, overall, skill=None, flag=False):
    skills = {"skill_memory": skill} if skill is not None else {}
    return judge_of(system, user, overall, mode, flag=flag, per_category=skills)


JUDGES = [
    judge("memt", "dump_all", "u1", 0.6, skill=1.0),
    judge("memt", "dump_all", "u2", 0.2, skill=0.5, flag=True),
    judge("memt", "retrieve", "u1", 0.4, skill=0.25),
    judge("memt", "retrieve", "u3", 0.9, skill=0.25),  # no dump_all for u3: no point
    judge("nomem", "dump_all", "u1", 0.0, skill=0.0),
]


def test_category_b_bars_are_category_means_with_std_and_the_dagger(drawn):
    figures.category_b(JUDGES, ["nomem", "memt"], "unused.png")
    ax = drawn[0].axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["nomem dump_all", f"memt dump_all{DAGGER}", "memt retrieve"]
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    heights = [[p.get_height() for p in c.patches] for c in bars]
    skill = CATEGORIES.index("skill_memory")
    assert [h[skill] for h in heights] == [0.0, 0.75, 0.25]
    assert all(h[i] == 0 for h in heights for i in range(len(CATEGORIES)) if i != skill)
    # memt dump_all's error bar: the sample std of 1.0 and 0.5, .353553 each way
    (segment,) = [s for s in bars[1].errorbar.lines[2][0].get_segments() if s[1][1] - s[0][1] > 0]
    assert segment[1][1] - segment[0][1] == pytest.approx(2 * 0.353553, abs=1e-6)


def test_dump_vs_retrieve_plots_one_point_per_user_with_both_modes(drawn):
    figures.dump_vs_retrieve(JUDGES, ["nomem", "memt"], "unused.png")
    ax = drawn[0].axes[0]
    (points,) = ax.collections  # nomem has no retrieve: no series
    assert points.get_offsets().tolist() == [[0.6, 0.4]]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["memt"]


def test_attribution_bars_stack_table4_counts(drawn):
    def att(system, mode, labels):
        return Attribution(
            user_id="u1",
            system=system,
            mode=mode,
            counts={},
            details=[
                AttributionEntry(
                    category="skill_memory",
                    dimension=f"d{i}",
                    score=0.0,
                    label=label,
                    ep_index=None,
                    stages=[],
                )
                for i, label in enumerate(labels)
            ],
        )

    atts = [
        att("memt", "dump_all", ["ok", "ok", "memory_failure", "no_targeted_task"]),
        att("memt", "retrieve", ["simulator_too_strict", "task_design_failure"]),
    ]
    figures.attribution_bars(atts, ["nomem", "memt"], "unused.png")
    ax = drawn[0].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["memt\ndump_all", "memt\nretrieve"]
    stacks = {c.get_label(): [p.get_height() for p in c.patches] for c in ax.containers}
    assert list(stacks) == COUNT_COLUMNS
    assert stacks == {
        "recovered": [2, 0],
        "memory": [1, 0],
        "task": [0, 1],
        "agent": [0, 0],
        "user": [0, 1],
    }  # no_targeted_task has no column
    tops = [max(p.get_y() + p.get_height() for c in ax.containers for p in [c.patches[i]])
            for i in range(2)]  # fmt: skip
    assert tops == [3, 2]


def cells(b: float, low: float | None, high: float | None) -> list:
    return [(b, low, high)] * len(FIGURE_COLUMNS)


PANELS = [
    (
        "dump_all",
        [
            Bar("replay", "longctx_full", False, cells(0.6, 0.5, 0.7)),
            Bar("release", "amem", True, cells(0.4, None, None)),  # one user: no CI
            Bar("release", "memt", True, cells(0.2, 0.1, 0.25), flagged=True),
        ],
        2,
    ),
    ("retrieve", [Bar("release", "memt", True, cells(0.3, 0.2, 0.4))], 2),
]


def test_compare_b_sets_this_runs_bars_beside_the_others_with_their_cis(drawn):
    figures.compare_b(PANELS, "unused.png")
    dump, retrieve = drawn[0].axes
    assert dump.get_title() == "dump_all: 2 users scored by every run (95% bootstrap CIs)"
    assert [t.get_text() for t in dump.get_xticklabels()] == [
        "skill",
        "knowledge",
        "episodic",
        "self",
        "preference",
        "B",
    ]
    labels = [t.get_text() for t in dump.get_legend().get_texts()]
    assert labels == ["replay: longctx_full", "release: amem", f"release: memt{DAGGER}"]
    bars = [c for c in dump.containers if isinstance(c, BarContainer)]
    assert [c.patches[0].get_height() for c in bars] == [0.6, 0.4, 0.2]
    # this run's bars are solid, the compared runs' hatched
    assert [c.patches[0].get_hatch() for c in bars] == [None, "//", "//"]
    # error bars span the CI: .5-.7, none without a CI, .1-.25
    spans = [[s[1][1] - s[0][1] for s in c.errorbar.lines[2][0].get_segments()][0] for c in bars]
    assert spans == pytest.approx([0.2, 0.0, 0.15])
    # one colour per run and system in every panel
    (memt,) = [c for c in retrieve.containers if isinstance(c, BarContainer)]
    assert memt.patches[0].get_facecolor() == bars[2].patches[0].get_facecolor()


NOTE = "judge failed calibration: κ 0.03, bias +0.57"
DRAW = {
    "category_b": lambda path, note: figures.category_b(JUDGES, ["nomem", "memt"], path, note),
    "dump_vs_retrieve": lambda path, note: figures.dump_vs_retrieve(
        JUDGES, ["nomem", "memt"], path, note
    ),
    "attribution": lambda path, note: figures.attribution_bars([], ["memt"], path, note),
    "compare": lambda path, note: figures.compare_b(PANELS, path, note),
}


@pytest.mark.parametrize("name", DRAW)
def test_a_failed_judge_puts_its_flag_on_the_figure_itself(tmp_path, name):
    """Issue 32: a figure built on a judge that failed calibration carries a visible mark
    (a red band across its top) and the flag in its PNG Description, as its tables do."""
    flagged, plain = tmp_path / "flagged.png", tmp_path / "plain.png"
    DRAW[name](flagged, NOTE)
    DRAW[name](plain, None)
    band, described = flag_band(flagged)
    assert band > 2000 and described == NOTE
    assert flag_band(plain) == (0, None)
