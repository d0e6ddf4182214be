"""The run's notes on its tables (memprobe/report/table_notes.py): the judge cross-check, the
stand-ins a cell rests on, and the labels that name their slot."""

from __future__ import annotations

import pandas as pd

from memprobe.report import table_notes, tables
from memprobe.spec.records import StandIn
from memprobe.spec.stand_in_log import JobStandIns
from tests.helpers.tables import close, entry_of, judge_of, row


def stood_in(rule: str, stage: str, touches: list[str], **wildcards) -> JobStandIns:
    r = StandIn(stage=stage, where="w", problem="p", action="a", touches=touches)
    return JobStandIns(job=f"{rule}/x", rule=rule, wildcards=wildcards, recoveries=[r])


def test_degenerate_labels_hand_counts():
    def d(dim, predicted):
        return entry_of(dimension=dim, predicted=predicted)

    js = [
        judge_of(
            "memt",
            "u1",
            0.0,
            details=[
                d("writing_skill", ""),  # empty
                d("writing_skill", "Skill memory"),  # category_name
                d("writing_skill", "writing skill"),  # dimension_name
                d("writing_skill", "How well do they write?"),  # axis_question
                d("writing_skill", "unknown"),  # the protocol's answer: not degenerate
                d("writing_skill", "terse, precise prose"),
            ],
        ),
        judge_of("memt", "u2", 0.0, details=[d("writing_skill", "Writing_Skill")]),
        judge_of("memt", "u1", 0.0, "retrieve", details=[]),
    ]
    axes = {"writing_skill": "how well do they write"}
    df = table_notes.degenerate_labels([("memt", "dump_all"), ("memt", "retrieve")], js, axes)
    assert list(df.columns) == table_notes.DEGENERATE_COLUMNS
    r = row(df, system="memt", mode="dump_all")
    assert [r[c] for c in ("n_labels", *table_notes.DEGENERATE_KINDS, "degenerate")] == [
        7,
        1,
        1,
        2,
        1,
        5,
    ]
    assert close(r["share"], 5 / 7)
    empty = row(df, system="memt", mode="retrieve")
    assert empty["n_labels"] == 0 and empty["degenerate"] == 0 and pd.isna(empty["share"])


def test_stand_ins_flag_the_cells_whose_numbers_rest_on_them():
    jobs = [
        stood_in("judge", "judge", ["B"], system="amem", user="u1", mode="retrieve"),
        stood_in("rollout", "simulator", ["A", "C"], system="mem0", user="u1"),
        stood_in("rollout", "simulator", [], system="amem", user="u1"),  # a cut text only
        stood_in("preference", "preference", ["D"], system="amem", user="u2"),
        stood_in("judge_sweep", "judge", ["B"], system="amem", user="u1", k="10"),
        stood_in("judge_calibration", "judge", ["B"]),  # not a per-user number
    ]
    df = pd.DataFrame(
        {
            "system": ["amem", "mem0"],
            "A": [0.5, 0.4],
            "D_mean": [3.0, None],
            "C_mean": [2.0, 3.0],
            "B_dump_all_mean": [0.5, 0.5],
            "B_retrieve_mean": [0.4, 0.3],
        }
    )
    empty = pd.DataFrame({"system": df["system"], **{c: [""] * 2 for c in df.columns[1:]}})
    out = table_notes.stand_in_flags(empty, df, jobs, table_notes.table2_metrics)
    assert out.to_dict("records") == [
        {
            "system": "amem",
            "A": "",
            "D_mean": "stand-ins: preference 1",
            "C_mean": "",
            "B_dump_all_mean": "",
            "B_retrieve_mean": "stand-ins: judge 1",
        },
        {
            "system": "mem0",
            "A": "stand-ins: simulator 1",
            "D_mean": "",  # an empty cell stays empty
            "C_mean": "stand-ins: simulator 1",
            "B_dump_all_mean": "",
            "B_retrieve_mean": "",
        },
    ]
    # An oracle's stand-in (no system, no mode) moves every attribution row.
    oracle = [stood_in("oracle", "oracle", ["attribution"], user="u1")]
    counts = pd.DataFrame({"system": ["amem"], "mode": ["dump_all"], "task": [2]})
    flags = pd.DataFrame({"system": ["amem"], "mode": ["dump_all"], "task": [tables.DAGGER]})
    out = table_notes.stand_in_flags(flags, counts, oracle, table_notes.attribution_metrics)
    assert out.at[0, "task"] == f"{tables.DAGGER}; stand-ins: oracle 1"


def test_the_recoveries_table_lists_every_stand_in():
    jobs = [stood_in("judge", "judge", ["B"], system="amem", user="u1", mode="retrieve")]
    df = table_notes.stand_ins_table(jobs)
    assert list(df.columns) == table_notes.STAND_IN_COLUMNS
    assert df.to_dict("records") == [
        {
            "stage": "judge",
            "job": "judge/x",
            "attempt": 0,
            "where": "w",
            "problem": "p",
            "action": "a",
            "touches": "B",
        }
    ]


def test_cross_check_flags_the_cells_where_the_offline_judge_disagrees():
    """judge.cross_check: B and each category's mean by both judges; flagged past the margin."""
    from memprobe.protocol.judge import category_means

    def entry(cat, score, second):
        return entry_of(cat, score, dimension=f"{cat}_dim", second_opinion=second)

    def judged(user, mode, pairs):
        details = [entry(c, s, o) for c, s, o in pairs]
        per, overall = category_means(details)
        return judge_of("mem0", user, overall, mode, details=details, per_category=per)

    js = [
        # dump_all: skill agrees, episodic is 0.5 lower offline -> B differs by 0.25
        judged("u1", "dump_all", [("skill_memory", 1.0, 1.0), ("episodic_memory", 1.0, 0.5)]),
        judged("u2", "dump_all", [("skill_memory", 0.5, 0.5), ("episodic_memory", 0.5, 0.0)]),
        # retrieve: within the margin everywhere
        judged("u1", "retrieve", [("skill_memory", 0.5, 0.5), ("episodic_memory", 0.5, 0.5)]),
    ]
    pairs = [("mem0", "dump_all"), ("mem0", "retrieve")]
    df = table_notes.cross_check(["mem0"], ["dump_all", "retrieve"], pairs, js, margin=0.1)
    assert list(df.columns) == table_notes.CROSS_CHECK_COLUMNS
    b = row(df, mode="dump_all", cell="B")
    assert close(b["judge"], 0.75) and close(b["offline"], 0.5) and b["flagged"]
    assert not row(df, mode="dump_all", cell="skill")["flagged"]
    assert close(row(df, mode="dump_all", cell="episodic")["difference"], -0.5)
    assert not df[df["mode"] == "retrieve"]["flagged"].any()
    notes = table_notes.cross_check_notes(df, 0.1)
    assert set(notes) == {("mem0", "dump_all", "B"), ("mem0", "dump_all", "episodic")}
    assert notes["mem0", "dump_all", "B"] == (
        "judge cross-check: the offline judge gives 0.50, the run's judge 0.75 (margin 0.1)"
    )
    # A run without second opinions has no cross-check cells.
    plain = [j.model_copy(update={"details": []}) for j in js]
    assert table_notes.cross_check(["mem0"], ["dump_all"], pairs, plain, 0.1).empty
