"""The release's amem and mem0 runs, imported: the records in their release shapes and the table
rows they give, against values derived by hand from tests/fixtures/make_release_fixture.py.

The fixture's amem and mem0 runs are systems of their own, so the numbers of
tests/report/test_tables.py (nomem, longctx_full, memt) do not move. Per user, in bank order
(skill 2, knowledge 2, episodic 2, self 1, preference 1), B = mean of the 5 category means.
"""

from __future__ import annotations

import uuid

import pandas as pd
import pytest

from memprobe.protocol.taxonomy import load_guides, retrieve_query
from memprobe.release import importer as release
from memprobe.report import tables
from tests.release_fixture import MODES, cfg_model, import_records
from tests.report.test_tables import close, row

NEW = ["amem", "mem0"]
# docs/release-format.md §2.7 (memories.json) and §2.8 (retrieved_memories)
AMEM_ITEM = ["id", "content", "keywords", "context", "tags", "category", "timestamp"]
AMEM_HIT = ["id", "content", "keywords", "context", "tags", "category", "score"]
MEM0_ITEM = ["id", "content", "category", "metadata", "timestamp"]


@pytest.fixture(scope="module")
def imported():
    return import_records(NEW)


def uid(user_n: int, j: int) -> str:
    """The fixture's uuid4 of user n's item j."""
    return str(uuid.UUID(int=(user_n - 1) << 64 | j, version=4))


def test_both_modes_of_both_runs_are_imported(imported):
    assert imported["pairs"] == [
        ("amem", "dump_all"),
        ("amem", "retrieve"),
        ("mem0", "dump_all"),
        ("mem0", "retrieve"),
    ]


def test_memories_keep_the_release_item_shapes():
    lay = release.Layout(cfg_model(systems=NEW))
    amem = release.memories(lay, "amem", "user_002")
    assert amem.meta == {"source": "release", "run": "amem_pooled_50"}
    assert amem.num_memories == 2
    # item 1 of user_002: 90 chars, the second note, so a user message
    assert amem.memories[1] == {
        "id": uid(2, 1),
        "content": "note 1 of user_002 " + "x" * 71,
        "keywords": ["kw1", "user_002"],
        "context": "context of note 1",
        "tags": ["tag"],
        "category": "user",
        "timestamp": "202604301200",
    }
    assert all(list(m) == AMEM_ITEM for m in amem.memories)  # no links (§8.3)
    assert [m["category"] for m in amem.memories] == ["task", "user"]
    mem0 = release.memories(lay, "mem0", "user_003")
    assert mem0.meta == {"source": "release", "run": "mem0_pooled_50"}
    assert mem0.memories == [
        {
            "id": uid(3, 0),
            "content": "note 0 of user_003 " + "x" * 16,
            "category": "fact",
            "metadata": None,
            "timestamp": "2026-04-30T12:00:00.000000-07:00",
        },
        {
            "id": uid(3, 1),
            "content": "note 1 of user_003 " + "x" * 26,
            "category": "fact",
            "metadata": None,
            "timestamp": "2026-04-30T12:00:01.000000-07:00",
        },
    ]


def test_retrieved_items_keep_the_recorded_shape_order_and_scores():
    cfg = cfg_model(systems=NEW)
    lay = release.Layout(cfg)
    guides = load_guides()
    # amem, user_002: a store of 2 notes, so 2 hits per query, the store rotated by the
    # dimension's position; A-Mem's hits: category blank, cosine distance ascending.
    got = release.retrieved(lay, "amem", "user_002", 5, guides)
    assert (got.system, got.k, len(got.queries)) == ("amem", 5, 8)
    store = release.memories(lay, "amem", "user_002").memories
    for d, q in enumerate(got.queries):
        assert q.query == retrieve_query(q.dimension, q.category, guides)
        assert [list(h) for h in q.items] == [AMEM_HIT, AMEM_HIT]
        assert [h["id"] for h in q.items] == [uid(2, d % 2), uid(2, (d + 1) % 2)]
        assert [h["score"] for h in q.items] == [0.3, 0.4]
        assert {h["category"] for h in q.items} == {""}
        assert q.items[0]["content"] == store[d % 2]["content"]
    # mem0, user_001: 3 facts, 3 hits per query as mem0 returned them (no score)
    got = release.retrieved(lay, "mem0", "user_001", 5, guides)
    store = release.memories(lay, "mem0", "user_001").memories
    q = got.queries[4]  # legal_or_administrative_event: items 1, 2, 0
    assert q.dimension == "legal_or_administrative_event"
    assert q.items == [store[1], store[2], store[0]]
    assert all(list(h) == MEM0_ITEM for q in got.queries for h in q.items)


def test_imported_judge_and_attribution_records(imported):
    judges = {(j.system, j.mode, j.user_id): j for j in imported["judges"]}
    j = judges[("amem", "dump_all", "user_001")]
    # [1, 1 | .5, .5 | .25, 0 | .75 | 1]: skill 1, knowledge .5, episodic .125, self .75, pref 1
    assert j.per_category == {
        "skill_memory": 1.0,
        "knowledge_memory": 0.5,
        "episodic_memory": 0.125,
        "self_model": 0.75,
        "assistance_preference": 1.0,
    }
    assert close(j.overall, 0.675) and not j.flagged
    assert [d.score for d in j.details] == [1, 1, 0.5, 0.5, 0.25, 0, 0.75, 1]
    # mem0 retrieve user_002: [.25, .5 | .25, 0 | 0, 0 | .25 | .25] -> (.375+.125+0+.25+.25)/5
    assert close(judges[("mem0", "retrieve", "user_002")].overall, 0.2)
    assert not any(j.flagged for j in imported["judges"])  # every store fits the slot-fill
    atts = {(a.system, a.mode, a.user_id): a for a in imported["atts"]}
    # amem dump user_002 [.5, 0, 1, .5, 0, 0, .25, .75]: ok = knowledge 1 and preference;
    # relocation's task cannot invite it; prudence -> agent (A); the rest memory failures
    a = atts[("amem", "dump_all", "user_002")]
    assert a.counts == {
        "memory_failure": 4,
        "ok": 2,
        "task_design_failure": 1,
        "agent_elicitation_failure": 1,
    }
    assert [d.label for d in a.details][5:] == [
        "task_design_failure",
        "agent_elicitation_failure",
        "ok",
    ]
    # mem0 dump user_001: verbosity at .5 -> the simulator (B)
    b = atts[("mem0", "dump_all", "user_001")]
    assert b.details[7].label == "simulator_too_strict"
    assert [s["stage"] for s in b.details[7].stages] == [
        "oracle",
        "disclosure",
        "disclosure_subclass",
    ]


def test_table2_rows(imported):
    df = tables.table2(
        NEW, imported["episodes"], imported["prefs"], imported["mems"], imported["judges"]
    )
    am = row(df, system="amem")
    # every episode satisfied
    assert close(am["A"], 100.0)
    # turns per episode: 1; 2; 1 and 3 alternating = 2 -> 1.666667 +- sqrt(1/3)
    assert close(am["C_mean"], 1.666667) and close(am["C_std"], 0.57735)
    # D pooled over turns: 5; (4+5)/2 = 4.5; (4*5 + 4*(3+4+5))/16 = 4.25 -> 4.583333 +- .381881
    assert close(am["D_mean"], 4.583333) and close(am["D_std"], 0.381881)
    # B dump per user .675, .4, .775 -> .616667 +- .194186
    assert close(am["B_dump_all_mean"], 0.616667) and close(am["B_dump_all_std"], 0.194186)
    # B retrieve .525, .25, .675 -> .483333 +- .215542
    assert close(am["B_retrieve_mean"], 0.483333) and close(am["B_retrieve_std"], 0.215542)
    # E: N 4, 2, 6 -> 4; chars 40, (30+90)/2, 20 -> 40
    assert close(am["N_items"], 4.0) and close(am["chars_per_item"], 40.0)
    m0 = row(df, system="mem0")
    assert close(m0["A"], 100.0)
    # turns 1; 9/8; 2 -> 1.375 +- .544862
    assert close(m0["C_mean"], 1.375) and close(m0["C_std"], 0.544862)
    # D: 4; 8 scored turns of 5 (the unscored one left out, not a 0) = 5; 4 -> 4.333333 +- .57735
    assert close(m0["D_mean"], 4.333333) and close(m0["D_std"], 0.57735)
    # B dump .55, .3, .7 -> .516667 +- .202073; retrieve .475, .2, .625 -> .433333 +- .215542
    assert close(m0["B_dump_all_mean"], 0.516667) and close(m0["B_dump_all_std"], 0.202073)
    assert close(m0["B_retrieve_mean"], 0.433333) and close(m0["B_retrieve_std"], 0.215542)
    # E: N 3, 4, 2 -> 3; chars 50, 50, 40 -> 46.666667
    assert close(m0["N_items"], 3.0) and close(m0["chars_per_item"], 46.666667)
    flags = tables.table2_flags(df, imported["judges"])
    assert set(flags["B_dump_all_mean"]) == {""}  # no dagger


def test_table4_rows(imported):
    df = tables.table4(NEW, MODES, imported["pairs"], imported["atts"])
    got = {(r["system"], r["mode"]): r for r in df.to_dict("records")}
    counts = {k: [r[c] for c in tables.COUNT_COLUMNS] for k, r in got.items()}
    # recovered, memory, task, agent, user summed over the 3 users (see the fixture's scores)
    assert counts[("amem", "dump_all")] == [11, 9, 3, 1, 0]  # 4+2+5 ok, 3+4+2 memory
    assert counts[("amem", "retrieve")] == [7, 11, 3, 2, 1]
    assert counts[("mem0", "dump_all")] == [8, 9, 3, 2, 2]
    assert counts[("mem0", "retrieve")] == [6, 11, 3, 2, 2]
    assert close(got[("amem", "dump_all")]["recovery_rate"], 55.0)  # 11 / 20
    assert close(got[("amem", "retrieve")]["recovery_rate"], 100 * 7 / 18)
    assert close(got[("mem0", "dump_all")]["recovery_rate"], 100 * 8 / 17)
    assert close(got[("mem0", "retrieve")]["recovery_rate"], 100 * 6 / 17)


def test_table14_and_gap_rows(imported):
    t14 = tables.table14(NEW, imported["mems"])
    am = row(t14, system="amem")
    # N sorted [2, 4, 6], chars sorted [20, 40, 60]: the lower order statistic
    assert [am["n_p50"], am["n_p90"], am["n_max"]] == [4, 4, 6]
    assert close(am["chars_p50"], 40.0) and close(am["chars_max"], 60.0)
    m0 = row(t14, system="mem0")
    # N sorted [2, 3, 4]; chars sorted [40, 50, 50]
    assert [m0["n_p50"], m0["n_p90"], m0["n_max"]] == [3, 3, 4]
    assert close(m0["chars_p50"], 50.0) and close(m0["chars_mean"], 46.666667)
    g = tables.gap(NEW, imported["judges"])
    # dump - retrieve per user: amem .15, .15, .1; mem0 .075, .1, .075
    a = row(g, system="amem")
    assert close(a["mean"], 0.133333) and close(a["p50"], 0.15) and close(a["min"], 0.1)
    m = row(g, system="mem0")
    assert close(m["mean"], 0.083333) and close(m["p50"], 0.075) and close(m["max"], 0.1)
    assert not pd.isna(m["min"])
