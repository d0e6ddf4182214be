"""Figure content, not only files: the bars, points and labels each figure draws, by hand."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
from matplotlib.container import BarContainer

from memprobe import CATEGORIES
from memprobe.report import figures
from memprobe.report.tables import COUNT_COLUMNS, DAGGER
from memprobe.spec.records import Attribution, AttributionEntry
from tests.helpers.tables import judge_of


@pytest.fixture
def drawn(monkeypatch):
    figs = []
    monkeypatch.setattr(figures, "_save", lambda fig, path: figs.append(fig))
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
