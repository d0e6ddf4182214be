"""Every table on the synthetic release, against values computed by hand.

The fixture's scores, turns and stores are listed in tests/fixtures/make_release_fixture.py;
the derivations are in the comments next to each expected value.
"""

from __future__ import annotations

import pandas as pd
import pytest

from memprobe.report import table_notes, tables
from memprobe.spec.records import Judge
from tests.helpers.release_fixture import MODES, SYSTEMS, import_records
from tests.helpers.tables import close, judge_of, row


@pytest.fixture(scope="module")
def imported():
    return import_records(SYSTEMS)


def test_pairs_follow_the_release_folders(imported):
    # nomem has no output/nomem_pooled_50_retrieve: its retrieve mode does not apply.
    assert imported["pairs"] == [
        ("nomem", "dump_all"),
        ("longctx_full", "dump_all"),
        ("longctx_full", "retrieve"),
        ("memt", "dump_all"),
        ("memt", "retrieve"),
    ]


def test_table2_hand_values(imported):
    df = tables.table2(
        SYSTEMS, imported["episodes"], imported["prefs"], imported["mems"], imported["judges"]
    )
    lc = row(df, system="longctx_full")
    # B dump per user: (.75+1+.25+.75+1)/5=.75, (.5+.5+0+.5+1)/5=.5, (1+.75+.25+1+.75)/5=.75
    assert close(lc["B_dump_all_mean"], 2 / 3)
    # sample std (n-1): sqrt(((1/12)^2 + (1/6)^2 + (1/12)^2) / 2) = 0.144338
    assert close(lc["B_dump_all_std"], 0.144338)
    # retrieve: .55, .35, .65 -> mean .516667, std sqrt((.0333^2+.1667^2+.1333^2)/2)
    assert close(lc["B_retrieve_mean"], 0.516667)
    assert close(lc["B_retrieve_std"], 0.152753)
    # D pooled over turns: u1 (4*5 + 4*(4+5))/12 = 4.666667 (not the episode mean 4.75),
    # u2 4, u3 5 -> mean 4.555556, std 0.509175
    assert close(lc["D_mean"], 4.555556)
    assert close(lc["D_std"], 0.509175)
    # C: turns 1.5, 2, 1 -> 1.5 +- 0.5
    assert close(lc["C_mean"], 1.5) and close(lc["C_std"], 0.5)
    # E: N 4, 2, 6 -> 4; chars 25, 50, 10 -> 28.333333
    assert close(lc["N_items"], 4.0) and close(lc["chars_per_item"], 28.333333)
    mt = row(df, system="memt")
    # A: user 2 has 7/8 satisfied -> (1 + .875 + 1)/3 * 100
    assert close(mt["A"], 95.833333)
    # B dump: .55, 0, 0 (overflowed) -> .183333 +- .317543
    assert close(mt["B_dump_all_mean"], 0.183333) and close(mt["B_dump_all_std"], 0.317543)
    # D: 5, (7*4 + 3*3)/10 = 3.7, 4.5 -> 4.4 +- .655744 ; C: 1, 10/8, 2 -> 1.416667 +- .520416
    assert close(mt["D_mean"], 4.4) and close(mt["D_std"], 0.655744)
    assert close(mt["C_mean"], 1.416667) and close(mt["C_std"], 0.520416)
    nm = row(df, system="nomem")
    # nomem: one turn has no preference score; it is left out, not counted as 0.
    assert close(nm["D_mean"], 4.0)
    assert close(nm["B_dump_all_mean"], 0.0)  # measured: a real 0
    assert pd.isna(nm["B_retrieve_mean"]) and pd.isna(nm["B_retrieve_std"])  # not applicable


def test_table3_hand_values(imported):
    df = tables.table3(SYSTEMS, MODES, imported["pairs"], imported["judges"])
    assert list(df.columns) == tables.TABLE3_COLUMNS
    r = row(df, system="longctx_full", mode="dump_all")
    # skill per user .75, .5, 1 -> .75 +- .25 ; episodic .25, 0, .25 -> .166667 +- .144338
    assert close(r["skill_mean"], 0.75) and close(r["skill_std"], 0.25)
    assert close(r["episodic_mean"], 0.166667) and close(r["episodic_std"], 0.144338)
    # preference 1, 1, .75 -> .916667
    assert close(r["preference_mean"], 0.916667)
    r = row(df, system="memt", mode="dump_all")
    # skill 1, 0, 0 -> .333333 +- .57735
    assert close(r["skill_mean"], 0.333333) and close(r["skill_std"], 0.57735)
    # retrieve rows. longctx skill per user (.5+.5)/2, (.5+0)/2, (1+.5)/2 = .5, .25, .75
    # -> .5 +- .25; knowledge .75, .5, .75 -> .666667 +- .144338; episodic 0, 0, .25 ->
    # .083333 +- .144338; self .5, .25, .75; preference 1, .75, .75 -> .833333 +- .144338
    r = row(df, system="longctx_full", mode="retrieve")
    assert close(r["skill_mean"], 0.5) and close(r["skill_std"], 0.25)
    assert close(r["knowledge_mean"], 0.666667) and close(r["knowledge_std"], 0.144338)
    assert close(r["episodic_mean"], 0.083333) and close(r["episodic_std"], 0.144338)
    assert close(r["self_mean"], 0.5) and close(r["self_std"], 0.25)
    assert close(r["preference_mean"], 0.833333) and close(r["preference_std"], 0.144338)
    # memt retrieve: every category .5, .25, .75 per user -> .5 +- .25
    r = row(df, system="memt", mode="retrieve")
    assert all(
        close(r[f"{c}_mean"], 0.5) and close(r[f"{c}_std"], 0.25) for c in tables.SHORT.values()
    )
    empty = row(df, system="nomem", mode="retrieve")
    assert all(pd.isna(empty[c]) for c in tables.TABLE3_COLUMNS[2:])


def test_table4_counts_and_rate(imported):
    df = tables.table4(SYSTEMS, MODES, imported["pairs"], imported["atts"])
    assert list(df.columns) == tables.TABLE4_COLUMNS
    got = {(r["system"], r["mode"]): r for r in df.to_dict("records")}
    # longctx dump: ok 5+2+5, memory 2+4+2, task 1+1+1, agent 0+1+0 -> rate 12/20
    lc = got[("longctx_full", "dump_all")]
    assert [lc[c] for c in tables.COUNT_COLUMNS] == [12, 8, 3, 1, 0]
    assert close(lc["recovery_rate"], 60.0)
    lr = got[("longctx_full", "retrieve")]
    assert [lr[c] for c in tables.COUNT_COLUMNS] == [8, 11, 3, 2, 0]
    assert close(lr["recovery_rate"], 100 * 8 / 19)  # 42.105263
    md = got[("memt", "dump_all")]
    assert [md[c] for c in tables.COUNT_COLUMNS] == [2, 13, 3, 3, 3]
    assert close(md["recovery_rate"], 100 * 2 / 15)
    mr = got[("memt", "retrieve")]
    assert [mr[c] for c in tables.COUNT_COLUMNS] == [8, 10, 2, 2, 2]
    assert close(mr["recovery_rate"], 100 * 8 / 18)
    # nomem: a real 0% (0 recovered of 15), while its retrieve row is empty, not 0.
    assert close(got[("nomem", "dump_all")]["recovery_rate"], 0.0)
    assert all(pd.isna(got[("nomem", "retrieve")][c]) for c in tables.TABLE4_COLUMNS[2:])
    # every applicable row partitions the 3 x 8 targets
    for key, r in got.items():
        if key != ("nomem", "retrieve"):
            assert sum(r[c] for c in tables.COUNT_COLUMNS) == 24


def test_table13_per_category(imported):
    df = tables.table13(SYSTEMS, imported["pairs"], imported["atts"])
    assert list(df.columns) == tables.TABLE13_COLUMNS
    counts = {
        (r["system"], r["category"]): [r[c] for c in tables.COUNT_COLUMNS]
        for r in df.to_dict("records")
    }
    assert counts[("longctx_full", "skill")] == [3, 3, 0, 0, 0]
    assert counts[("longctx_full", "knowledge")] == [4, 2, 0, 0, 0]
    assert counts[("longctx_full", "episodic")] == [0, 3, 3, 0, 0]
    assert counts[("longctx_full", "self")] == [2, 0, 0, 1, 0]
    assert counts[("longctx_full", "preference")] == [3, 0, 0, 0, 0]
    assert counts[("memt", "skill")] == [2, 4, 0, 0, 0]
    assert counts[("nomem", "preference")] == [0, 0, 0, 0, 3]


def test_table14_lower_order_statistic(imported):
    df = tables.table14(SYSTEMS, imported["mems"])
    assert list(df.columns) == tables.TABLE14_COLUMNS
    lc = row(df, system="longctx_full")
    # N sorted [2, 4, 6]: p90 = sorted[floor(.9*2)] = sorted[1] = 4 (interpolation: 5.6)
    assert [lc["n_p50"], lc["n_p90"], lc["n_max"]] == [4, 4, 6]
    assert close(lc["n_mean"], 4.0)
    # chars sorted [10, 25, 50]
    assert close(lc["chars_p50"], 25.0) and close(lc["chars_p90"], 25.0)
    assert close(lc["chars_max"], 50.0) and close(lc["chars_mean"], 28.333333)
    mt = row(df, system="memt")
    assert [mt["n_p50"], mt["n_p90"], mt["n_max"]] == [20, 20, 30]
    assert close(mt["chars_p50"], 300.0) and close(mt["chars_mean"], 266.666667)


def test_quantile_low_is_not_the_median():
    # even n: the lower order statistic takes sorted[1], where the median averages to 2.5
    assert tables.quantile_low([4.0, 1.0, 3.0, 2.0], 0.5) == 2.0
    assert tables.quantile_low([float(i) for i in range(1, 11)], 0.9) == 9.0


def test_gap_hand_values(imported):
    df = tables.gap(SYSTEMS, imported["judges"])
    assert list(df.columns) == tables.GAP_COLUMNS
    lc = row(df, system="longctx_full")
    # per user .75-.55=.2, .5-.35=.15, .75-.65=.1
    assert [round(lc[c], 6) for c in ("mean", "p50", "min", "max")] == [0.15, 0.15, 0.1, 0.2]
    mt = row(df, system="memt")
    # .55-.5=.05, 0-.25=-.25, 0-.75=-.75
    assert close(mt["mean"], -0.316667) and close(mt["p50"], -0.25)
    assert close(mt["min"], -0.75) and close(mt["max"], 0.05)
    assert all(pd.isna(row(df, system="nomem")[c]) for c in ("mean", "p50", "min", "max"))


def test_overflow_cells_carry_the_dagger(imported):
    js = imported["judges"]
    flagged = {(j.system, j.user_id) for j in js if j.flagged}
    assert flagged == {("memt", "user_002"), ("memt", "user_003")}
    t2 = tables.table2(SYSTEMS, imported["episodes"], imported["prefs"], imported["mems"], js)
    f2 = tables.table2_flags(t2, js)
    assert list(f2.columns) == tables.TABLE2_COLUMNS
    memt = row(f2, system="memt")
    assert memt["B_dump_all_mean"] == tables.DAGGER and memt["B_dump_all_std"] == tables.DAGGER
    assert memt["B_retrieve_mean"] == "" and row(f2, system="longctx_full")["B_dump_all_mean"] == ""
    f4 = tables.row_flags(
        tables.table4(SYSTEMS, MODES, imported["pairs"], imported["atts"]), ["system", "mode"], js
    )
    assert row(f4, system="memt", mode="dump_all")["recovery_rate"] == tables.DAGGER
    assert row(f4, system="memt", mode="retrieve")["recovery_rate"] == ""
    f13 = tables.row_flags(
        tables.table13(SYSTEMS, imported["pairs"], imported["atts"]), ["system", "category"], js
    )
    assert row(f13, system="memt", category="skill")["recovered"] == tables.DAGGER
    assert row(f13, system="longctx_full", category="skill")["recovered"] == ""


def test_chunked_overflow_is_not_flagged():
    j = Judge(
        user_id="u",
        system="s",
        mode="dump_all",
        overflow=True,
        overflow_strategy="chunked",
        per_category={},
        overall=0.5,
        details=[],
    )
    assert not j.flagged
    assert j.model_copy(update={"overflow_strategy": "flag"}).flagged


def test_ci_paired_and_table5():
    js = [
        Judge(user_id=f"u{i}", system=s, mode="dump_all", per_category={}, overall=v, details=[])
        for s, vals in (("a", [0.2, 0.4, 0.6]), ("b", [0.1, 0.1, 0.1]))
        for i, v in enumerate(vals)
    ]
    ci = tables.table2_ci(["a", "b"], MODES, [("a", "dump_all"), ("b", "dump_all")], js, seed=1)
    a = row(ci, system="a", mode="dump_all")
    # (a percentile bootstrap of means always lies within [min, max]: the CI's width is
    # checked where it can fail, test_bootstrap_ci_is_the_2_5_and_97_5_percentiles...)
    assert close(a["B_mean"], 0.4) and a["ci_low"] < 0.4 < a["ci_high"]
    assert pd.isna(row(ci, system="a", mode="retrieve")["B_mean"])
    p = tables.paired(["a", "b"], MODES, js, seed=1)
    assert len(p) == 1 and close(p.iloc[0]["mean_diff"], 0.3)  # .1, .3, .5 -> .3
    ledger = [
        {
            "job": "rollout/longctx_full_user_001",
            "role": "assistant",
            "prompt_tokens": "10",
            "completion_tokens": "5",
            "cached": "false",
        },
        {
            "job": "rollout/longctx_full_user_001",
            "role": "assistant",
            "prompt_tokens": "10",
            "completion_tokens": "5",
            "cached": "true",
            "status": "ok",
            "finish_reason": "length",
        },
        {
            "job": "oracle/user_001",
            "role": "oracle",
            "prompt_tokens": "7",
            "completion_tokens": "1",
            "cached": "false",
        },
    ]
    t5 = tables.table5(ledger, ["nomem", "longctx_full"])
    lc = row(t5, system="longctx_full", role="assistant")
    assert (lc["calls"], lc["paid_calls"], lc["total_tokens"]) == (2, 1, 15)
    assert lc["length_cut"] == 1  # a free-text reply cut at max_tokens is counted
    assert row(t5, system="(shared)", role="oracle")["prompt_tokens"] == 7


def test_topk_sweep_hand_values():
    by_k = {
        1: [judge_of("memt", "u1", 0.2, "retrieve"), judge_of("memt", "u2", 0.4, "retrieve")],
        5: [judge_of("memt", "u1", 0.5, "retrieve"), judge_of("amem", "u1", 0.9, "retrieve")],
    }
    df = tables.topk_sweep(["memt", "amem"], [1, 5, 10], by_k)
    assert list(df.columns) == tables.TOPK_COLUMNS
    assert list(zip(df.system, df.k, strict=True)) == [
        ("memt", 1),
        ("memt", 5),
        ("memt", 10),
        ("amem", 1),
        ("amem", 5),
        ("amem", 10),
    ]
    m1 = row(df, system="memt", k=1)
    # .2, .4 -> .3 +- .141421 (sample std)
    assert close(m1["B_mean"], 0.3) and close(m1["B_std"], 0.141421) and m1["n_users"] == 2
    m5 = row(df, system="memt", k=5)
    assert close(m5["B_mean"], 0.5) and pd.isna(m5["B_std"]) and m5["n_users"] == 1
    m10 = row(df, system="memt", k=10)  # no run at k=10: empty, never 0
    assert pd.isna(m10["B_mean"]) and pd.isna(m10["n_users"])
    assert close(row(df, system="amem", k=5)["B_mean"], 0.9)
    assert pd.isna(row(df, system="amem", k=1)["B_mean"])


def test_gap_flags_mark_every_value_cell_of_a_flagged_system_only():
    js = [
        judge_of("memt", "u1", 0.5, flag=True),
        judge_of("memt", "u1", 0.25, "retrieve"),
        judge_of("amem", "u1", 0.5),
        judge_of("amem", "u1", 0.25, "retrieve"),
    ]
    df = tables.gap(["memt", "amem"], js)
    f = tables.gap_flags(df, js)
    assert list(f.columns) == tables.GAP_COLUMNS
    assert [row(f, system="memt")[c] for c in tables.GAP_COLUMNS[1:]] == [tables.DAGGER] * 4
    assert [row(f, system="amem")[c] for c in tables.GAP_COLUMNS[1:]] == [""] * 4
    assert close(row(df, system="memt")["mean"], 0.25)


def test_note_cells_adds_the_note_to_filled_cells_only():
    df = pd.DataFrame({"system": ["a", "b"], "B": [0.5, None]})
    flags = pd.DataFrame({"system": ["a", "b"], "B": [tables.DAGGER, ""]})
    out = tables.note_cells(flags, df, ["B"], "judge failed calibration")
    assert list(out["B"]) == [f"{tables.DAGGER}; judge failed calibration", ""]
    plain = pd.DataFrame({"system": ["a"], "B": [""]})
    assert list(tables.note_cells(plain, df.iloc[:1], ["B"], "n")["B"]) == ["n"]
    assert list(flags["B"]) == [tables.DAGGER, ""]  # the input is left alone


def test_bootstrap_ci_is_the_2_5_and_97_5_percentiles_of_resampled_means():
    # 50 zeros and 50 ones: the mean's standard error is .05, so the 95% percentile interval
    # is about .5 -+ 1.96 * .05 = [.402, .598]; a 90% interval would be [.418, .582] and
    # [min, max] = [0, 1]. The bound that "it lies within [min, max]" could never fail.
    values = [0.0] * 50 + [1.0] * 50
    low, high = tables.bootstrap_ci(values, seed=1)
    assert 0.39 < low < 0.413 and 0.587 < high < 0.61
    assert tables.bootstrap_ci(values, seed=1) == (low, high)  # seeded: reproducible
    uneven = [(i * 7919 % 101) / 101 for i in range(40)]
    assert tables.bootstrap_ci(uneven, seed=1) != tables.bootstrap_ci(uneven, seed=2)
    assert tables.bootstrap_ci([0.7] * 5, seed=1) == (0.7, 0.7)
    assert tables.bootstrap_ci([0.3], seed=1) == (None, None)  # no interval from one user
    assert tables.bootstrap_ci(uneven, seed=1, n_boot=5) != tables.bootstrap_ci(uneven, seed=1)


def test_table2_ci_and_paired_hand_values():
    js = [judge_of("a", f"u{i}", v) for i, v in enumerate([0.0] * 50 + [1.0] * 50)]
    js += [judge_of("b", f"u{i}", 0.25) for i in range(0, 100, 2)]  # half the users
    js += [judge_of("b", "u0", 0.9, "retrieve")]
    pairs = [("a", "dump_all"), ("b", "dump_all")]
    ci = tables.table2_ci(["a", "b"], MODES, pairs, js, seed=1)
    assert list(ci.columns) == tables.CI_COLUMNS
    a = row(ci, system="a", mode="dump_all")
    assert close(a["B_mean"], 0.5) and 0.39 < a["ci_low"] < 0.413 and 0.587 < a["ci_high"] < 0.61
    assert (a["n_users"], a["n_boot"]) == (100, tables.N_BOOT)
    b = row(ci, system="b", mode="dump_all")
    assert close(b["ci_low"], 0.25) and close(b["ci_high"], 0.25) and b["n_users"] == 50
    # a listed pair without judges is an empty row
    none = tables.table2_ci(["c"], MODES, [("c", "dump_all")], js, seed=1)
    assert pd.isna(none.iloc[0]["B_mean"]) and pd.isna(none.iloc[0]["n_users"])
    # (b, retrieve) has a judge but is not a pair: empty
    assert pd.isna(row(ci, system="b", mode="retrieve")["B_mean"])
    assert tables.table2_ci(["a"], MODES, pairs, js, seed=1, n_boot=7).iloc[0]["n_boot"] == 7

    p = tables.paired(["a", "b"], MODES, js, seed=1)
    assert list(p.columns) == tables.PAIRED_COLUMNS
    r = row(p, mode="dump_all")
    # shared users u0, u2, ..., u98: a is 0 on u0..u48 (25 users), 1 on u50..u98 (25 users);
    # differences -.25 and .75, mean .25
    assert (r["system_a"], r["system_b"], r["n_users"]) == ("a", "b", 50)
    assert close(r["mean_diff"], 0.25) and r["ci_low"] < 0.25 < r["ci_high"]
    assert -0.25 < r["ci_low"] and r["ci_high"] < 0.75 and r["n_boot"] == tables.N_BOOT
    assert len(p) == 1  # retrieve: only b has u0, no pair


@pytest.mark.parametrize(
    ("job", "system"),
    [
        ("rollout/mem0_user_001", "mem0"),
        ("rollout/mem0_graph_user_001", "mem0_graph"),  # the longest matching prefix
        ("judge/mem0_graph_dump_all_user_001", "mem0_graph"),
        ("rollout/mem0", "mem0"),
        ("rollout/mem0_graph_user_001/part", "mem0_graph"),  # the tag is all after the rule
        ("rollout/mem0/part", "(shared)"),
        ("rollout/mem0x_user_001", "(shared)"),  # a prefix must end at "_"
        ("oracle/user_001", "(shared)"),
        ("no-slash", "(shared)"),
        ("", "(shared)"),
    ],
)
def test_ledger_system_prefix_matching(job, system):
    assert tables.ledger_system(job, ["mem0", "mem0_graph", "memt"]) == system


def test_table5_counts_invalid_rows_and_orders_by_system():
    rows = [
        # a failed attempt cut at max_tokens is not a "length_cut" reply
        {"job": "rollout/memt_user_001", "role": "assistant", "cached": "false",
         "prompt_tokens": "", "completion_tokens": "3", "status": "error",
         "finish_reason": "length"},
        {"job": "rollout/memt_user_001", "role": "assistant", "cached": "false",
         "prompt_tokens": "4", "completion_tokens": "", "status": "ok", "finish_reason": "stop"},
        {"job": "rollout/memt_user_001", "role": "assistant", "cached": "true",
         "prompt_tokens": "100", "completion_tokens": "100", "status": "ok",
         "finish_reason": "length"},
        {"job": "rollout/memt_user_001", "role": "critic", "cached": "false",
         "prompt_tokens": "1", "completion_tokens": "1"},
        {"role": "oracle", "cached": "false", "prompt_tokens": "2", "completion_tokens": "2"},
        {"cached": "true"},  # no job and no role: shared, role ""
        {"job": "rollout/memt_user_001", "role": "critic", "cached": "false",
         "prompt_tokens": "1", "completion_tokens": "1", "status": "ok",
         "finish_reason": "length"},
        {"job": "rollout/memt_user_001", "role": "critic", "cached": "false",
         "prompt_tokens": "2", "completion_tokens": "0", "status": "ok",
         "finish_reason": "length"},
        {"job": "rollout/amem_user_001", "role": "assistant", "cached": "false",
         "prompt_tokens": "5", "completion_tokens": "5"},
    ]  # fmt: skip
    t5 = tables.table5(rows, ["amem", "memt"])
    assert list(t5.columns) == tables.TABLE5_COLUMNS
    assert list(zip(t5.system, t5.role, strict=True)) == [
        ("amem", "assistant"),
        ("memt", "assistant"),
        ("memt", "critic"),
        ("(shared)", ""),
        ("(shared)", "oracle"),
    ]
    a = row(t5, system="memt", role="assistant")
    # 3 calls, 2 paid: prompt 0 + 4, completion 3 + 0; the cached row's tokens cost nothing
    assert [a[c] for c in tables.TABLE5_COLUMNS[2:]] == [3, 2, 4, 3, 7, 1]
    assert row(t5, system="(shared)", role="oracle")["total_tokens"] == 4
    # critic: 3 calls, all paid, prompt 1 + 1 + 2, two accepted replies cut at max_tokens
    c = row(t5, system="memt", role="critic")
    assert [c[col] for col in tables.TABLE5_COLUMNS[2:]] == [3, 3, 4, 2, 6, 2]
    assert [row(t5, system="(shared)", role="")[col] for col in ("calls", "paid_calls")] == [1, 0]
    assert tables.table5([], ["memt"]).empty


def test_empty_tables_keep_their_header():
    # a table with no row still writes its header (a reader finds its columns)
    empties = {
        tuple(tables.TABLE2_COLUMNS): tables.table2([], [], [], [], []),
        tuple(tables.TABLE3_COLUMNS): tables.table3([], MODES, [], []),
        tuple(tables.TABLE4_COLUMNS): tables.table4([], MODES, [], []),
        tuple(tables.CI_COLUMNS): tables.table2_ci([], MODES, [], [], seed=1),
        tuple(tables.PAIRED_COLUMNS): tables.paired([], MODES, [], seed=1),
        tuple(tables.TABLE13_COLUMNS): tables.table13([], [], []),
        tuple(tables.TABLE14_COLUMNS): tables.table14([], []),
        tuple(tables.GAP_COLUMNS): tables.gap([], []),
        tuple(tables.TOPK_COLUMNS): tables.topk_sweep([], [], {}),
        tuple(tables.TABLE5_COLUMNS): tables.table5([], []),
        tuple(table_notes.DEGENERATE_COLUMNS): table_notes.degenerate_labels([], [], {}),
    }
    for columns, df in empties.items():
        assert tuple(df.columns) == columns and df.empty


def test_count_columns_are_nullable_ints(imported):
    # counts stay integers ("2", never "2.0") and an empty count stays empty, never 0 or NaN
    t13 = tables.table13(SYSTEMS, imported["pairs"], imported["atts"])
    t14 = tables.table14(SYSTEMS, imported["mems"])
    topk = tables.topk_sweep(["memt"], [5, 10], {5: [judge_of("memt", "u1", 0.5, "retrieve")]})
    t5 = tables.table5([{"job": "rollout/memt_u", "role": "a", "cached": "false"}], ["memt"])
    deg = table_notes.degenerate_labels([("memt", "dump_all")], [], {})
    t4 = tables.table4(SYSTEMS, MODES, imported["pairs"], imported["atts"])
    js = [judge_of(x, f"u{i}", 0.1 * i) for x in ("a", "b") for i in range(3)]
    ci = tables.table2_ci(["a"], MODES, [("a", "dump_all")], js, seed=1)
    pa = tables.paired(["a", "b"], MODES, js, seed=1)
    for df, cols in (
        (t4, tables.COUNT_COLUMNS),
        (ci, ["n_users", "n_boot"]),
        (pa, ["n_users", "n_boot"]),
        (t13, tables.COUNT_COLUMNS),
        (t14, ["n_p50", "n_p90", "n_max"]),
        (topk, ["k", "n_users"]),
        (t5, tables.TABLE5_COLUMNS[2:]),
        (deg, ["n_labels", *table_notes.DEGENERATE_KINDS, "degenerate"]),
    ):
        assert [str(df[c].dtype) for c in cols] == ["Int64"] * len(cols), cols
    assert topk.to_csv(index=False).splitlines()[1:] == ["memt,5,0.5,,1", "memt,10,,,"]


def test_table3_reads_only_listed_pairs_and_a_pair_without_judges_is_empty():
    js = [judge_of("memt", "u1", 0.5, "retrieve")]
    js[0].per_category["skill_memory"] = 0.5
    df = tables.table3(["memt"], MODES, [("memt", "dump_all")], js)
    assert all(pd.isna(v) for v in df.iloc[0, 2:]) and all(pd.isna(v) for v in df.iloc[1, 2:])


def test_small_helpers_hand_values():
    from memprobe.spec.records import Memories

    assert tables.footprint(Memories(user_id="u", system="s", num_memories=0, memories=[])) == (
        0,
        0.0,
    )
    mem = Memories(
        user_id="u",
        system="s",
        num_memories=3,
        memories=[{"content": "abcd"}, {"content": "12"}, {"content": ""}],
    )
    assert tables.footprint(mem) == (3, 2.0)  # (4 + 2 + 0) / 3
    assert tables.number_cell(1 / 3) == 0.333333 and tables.number_cell(None) is None
    assert tables.recovery_rate(0, 0) is None
    assert (tables.recovery_rate(1, 0), tables.recovery_rate(0, 1)) == (100.0, 0.0)
    assert tables.recovery_rate(1, 3) == 25.0


def test_bootstrap_ci_uses_the_seed_and_n_boot_it_is_given():
    uneven = [(i * 7919 % 101) / 101 for i in range(40)]
    assert tables.bootstrap_ci(uneven, seed=3) == tables.bootstrap_ci(uneven, seed=3)
    # 50/50 data: means on a 0.01 grid, the 2.5/97.5 percentiles at .5 -+ 1.96 * .05
    assert tables.bootstrap_ci([0.0] * 50 + [1.0] * 50, seed=1) == pytest.approx((0.4, 0.6))
    two = tables.bootstrap_ci([0.0, 1.0], seed=1)  # two users already give an interval
    assert two[0] is not None and 0.0 <= two[0] < two[1] <= 1.0
    js = [judge_of("a", f"u{i}", v) for i, v in enumerate(uneven)]
    js += [judge_of("c", f"u{i}", 0.5) for i in range(len(uneven))]
    ci = tables.table2_ci(["a"], MODES, [("a", "dump_all")], js, seed=3, n_boot=50)
    assert (ci.iloc[0]["ci_low"], ci.iloc[0]["ci_high"]) == tuple(
        round(x, 6) for x in tables.bootstrap_ci(uneven, seed=3, n_boot=50)
    )
    # paired: a and b share no user, a and c share all: the (a, c) row is still there
    js += [judge_of("b", "other", 0.1)]
    p = tables.paired(["a", "b", "c"], ["dump_all"], js, seed=3, n_boot=50)
    assert [(r.system_a, r.system_b) for r in p.itertuples()] == [("a", "c")]
    users = sorted(f"u{i}" for i in range(len(uneven)))  # paired reads users in id order
    diffs = [uneven[int(u[1:])] - 0.5 for u in users]
    assert (p.iloc[0]["ci_low"], p.iloc[0]["ci_high"]) == tuple(
        round(x, 6) for x in tables.bootstrap_ci(diffs, seed=3, n_boot=50)
    )


def test_table2_says_which_conversations_each_row_was_built_from(imported):
    eps, prefs, mems, js = (imported[k] for k in ("episodes", "prefs", "mems", "judges"))
    t2 = tables.table2(SYSTEMS, eps, prefs, mems, js)
    # imported runs: the release's own conversations of each system's run
    assert row(t2, system="memt")["conversations"] == "release: memt_memonly_pooled_50"
    # longctx_full replayed through longctx_full_pooled_50's recordings, without preference
    run = "longctx_full_pooled_50"
    replayed = [
        e.model_copy(update={"replay": run}) if e.system == "longctx_full" else e for e in eps
    ]
    ours = [m.model_copy(update={"meta": {}}) for m in mems]
    prefs = [p for p in prefs if p.system != "longctx_full"]
    t2 = tables.table2(SYSTEMS, replayed, prefs, ours, js)
    lc, nm = row(t2, system="longctx_full"), row(t2, system="nomem")
    assert lc["conversations"] == f"replay: {run}" and nm["conversations"] == "live"
    assert pd.isna(lc["D_mean"]) and close(lc["C_mean"], 1.5)  # C: the recordings' turns
    assert tables.replayed(replayed) == {"longctx_full": run}
    flags = tables.replay_notes(tables.table2_flags(t2, js), t2, {"longctx_full": run},
                                tables.REPLAY_TABLE2)  # fmt: skip
    f_lc, f_nm = row(flags, system="longctx_full"), row(flags, system="nomem")
    assert f_lc["D_mean"].startswith("not applicable: a replay of longctx_full_pooled_50")
    assert (
        f_lc["A"]
        == f_lc["C_mean"]
        == f"the recorded run's ({run}), not this system's conversations"
    )
    assert f_lc["B_dump_all_mean"] == "" and f_nm["A"] == "" and f_nm["D_mean"] == ""
    # a note joins a flag already there (memt's dagger)
    both = tables.replay_notes(tables.table2_flags(t2, js), t2, {"memt": run},
                               {"B_dump_all_mean": "x {run}"})  # fmt: skip
    assert row(both, system="memt")["B_dump_all_mean"] == f"{tables.DAGGER}; x {run}"
    assert "longctx_full (replay: longctx_full_pooled_50)" in tables.replay_header(
        {"longctx_full": run}
    )
