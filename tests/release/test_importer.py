"""Reading the authors' release: loaders, layout errors, and the real Snakemake import."""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import shutil
import uuid
from html import unescape
from pathlib import Path

import pandas as pd
import pytest
from docutils.core import publish_parts

from memprobe import CATEGORIES
from memprobe.config.base import ConfigError
from memprobe.release import importer, layout
from memprobe.report import tables
from memprobe.spec.records import RecordError
from memprobe.spec.taxonomy import load_guides, load_pool, retrieve_query
from tests.helpers.release_fixture import (
    EXPECTED_ORDER,
    FIXTURE,
    MODES,
    REPLAY_RUN,
    ROOT,
    USERS,
    cfg_model,
    import_records,
    release_config,
    release_users_config,
    replay_cfg,
)
from tests.helpers.tables import close, row


def test_bank_tasks_persona_load_in_bank_order():
    cfg = cfg_model()
    lay = layout.Layout(cfg)
    bank = importer.bank(lay, "user_002", cfg.dims_per_category)
    assert [e.dimension for e in bank.entries] == EXPECTED_ORDER
    assert bank.entries[0].short == "critical thinking skill of user_002"
    tasks = importer.tasks(lay, "user_002", bank)
    assert [t.index for t in tasks.tasks] == list(range(1, 9))
    assert [t.target_dimension for t in tasks.tasks] == EXPECTED_ORDER
    assert tasks.tasks[1].revisions == ["edited_after_fishing_flag"]
    p = importer.persona(lay, "user_002")
    assert (p.age, p.location.city, p.occupation) == (32, "Springfield", "teacher")
    assert p.stories == ["moved once.", "a new job."]


def test_wrong_counts_and_missing_user_fail_in_one_line():
    cfg = cfg_model()
    lay = layout.Layout(cfg)
    with pytest.raises(RecordError, match=r"memory_bank\.skill_memory: 2 entries, .* expects 7"):
        importer.bank(lay, "user_001", {**cfg.dims_per_category, "skill_memory": 7})
    with pytest.raises(RecordError, match="no user_id 'user_009'"):
        importer.bank(lay, "user_009")


def test_latest_merged_report_is_canonical():
    lay = layout.Layout(cfg_model())
    path = lay.merged_report("longctx_full", "dump_all")
    assert path.name == "longctx_full_20260501_090000_merged.json"
    agg = importer.report_aggregate(lay, path)
    assert agg["B_reconstruction"]["mean"]["overall"] == pytest.approx(2 / 3)


def test_imported_records_keep_the_release_values():
    cfg = cfg_model()
    lay = layout.Layout(cfg)
    bank = importer.bank(lay, "user_001", cfg.dims_per_category)
    mem = importer.memories(lay, "memt", "user_002")
    slot, judge = importer.scores(lay, "memt", "dump_all", "user_002", bank, mem)
    assert judge.flagged and slot.overflow_strategy == "flag"
    assert all(e.label == "unknown" for e in slot.entries)
    raw = json.loads(lay.recon_judge("longctx_full", "retrieve", "user_001").read_text())
    _, lj = importer.scores(
        lay,
        "longctx_full",
        "retrieve",
        "user_001",
        bank,
        importer.memories(lay, "longctx_full", "user_001"),
    )
    assert lj.overall == pytest.approx(raw["overall"]) and not lj.overflow
    att = importer.attribution(lay, "memt", "dump_all", "user_001")
    assert att.counts == {
        "ok": 2,
        "memory_failure": 3,
        "task_design_failure": 1,
        "agent_elicitation_failure": 1,
        "simulator_too_strict": 1,
    }


@pytest.mark.workflow
def test_release_import_builds_every_table_and_the_report(workflow_factory):
    wf = workflow_factory(release_config())
    wf.run("tables")
    res = wf.results
    t2 = {r["system"]: r for r in csv.DictReader(open(res / "table2.csv"))}
    assert float(t2["longctx_full"]["B_dump_all_mean"]) == pytest.approx(2 / 3, abs=1e-6)
    assert t2["nomem"]["B_retrieve_mean"] == ""  # empty, never 0
    flags = {r["system"]: r for r in csv.DictReader(open(res / "table2_flags.csv"))}
    assert flags["memt"]["B_dump_all_mean"] == "†"
    t4 = {(r["system"], r["mode"]): r for r in csv.DictReader(open(res / "table4.csv"))}
    assert float(t4[("longctx_full", "retrieve")]["recovery_rate"]) == pytest.approx(
        100 * 8 / 19, abs=1e-5
    )
    assert t4[("nomem", "retrieve")]["recovered"] == ""
    for name in (
        "table3",
        "table13",
        "table14",
        "gap",
        "table5",
        "table2_ci",
        "paired",
        "topk_sweep",
    ):
        assert (res / f"{name}.csv").is_file(), name
    assert wf.scheduled("tables") == {}  # nothing reruns

    wf.run("inspector")  # the rest of the default target, which the report covers
    wf.run("--report", wf.target("report.html"))
    html = (res / "report.html").read_text(errors="replace")
    for name in (
        "inspect.html",
        "table2.csv",
        "table3.csv",
        "table4.csv",
        "table13.csv",
        "table14.csv",
        "gap.csv",
        "table5.csv",
        "table2_ci.csv",
        "paired.csv",
        "topk_sweep.csv",
        "category_b.png",
        "dump_vs_retrieve.png",
        "attribution.png",
    ):
        assert name in html, name
    check_report_content(html, res)


# Each entry of the report (rule tables, rule inspector) and the caption it must carry.
REPORT_CAPTIONS = {
    "table2.csv": "table2.rst",
    "table3.csv": "table3.rst",
    "table4.csv": "table4.rst",
    "table13.csv": "table13.rst",
    "table14.csv": "table14.rst",
    "gap.csv": "gap.rst",
    "table5.csv": "table5.rst",
    "table2_ci.csv": "table2_ci.rst",
    "degenerate_labels.csv": "degenerate_labels.rst",
    "paired.csv": "paired.rst",
    "topk_sweep.csv": "topk_sweep.rst",
    "category_b.png": "figure_category.rst",
    "dump_vs_retrieve.png": "figure_gap.rst",
    "attribution.png": "figure_attribution.rst",
    "inspect.html": "inspect.rst",
}


def plain(markup: str) -> str:
    """HTML as its visible words."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def report_entries(html: str) -> dict[str, dict]:
    """The report's result entries (the page's embedded ``var results = {...};``) by file name."""
    found = re.search(r"^\s*var results = (\{.*\});\s*$", html, re.MULTILINE)
    assert found, "the report embeds no result entries"
    return {Path(path).name: entry for path, entry in json.loads(found.group(1)).items()}


def check_report_content(html: str, res: Path) -> None:
    """Each entry carries its caption as rendered from rules/captions/, and its file's bytes."""
    entries = report_entries(html)
    for name, caption_file in REPORT_CAPTIONS.items():
        assert name in entries, f"{name}: not an entry of the report"
        rst = (ROOT / "rules" / "captions" / caption_file).read_text()
        want = plain(publish_parts(rst, writer="html")["body"])
        assert want and want in plain(entries[name]["caption"]), f"{name}: caption {caption_file}"
    data = {n: base64.b64decode(e["data_uri"].split(";base64,", 1)[1]) for n, e in entries.items()}
    assert data["table2.csv"] == (res / "table2.csv").read_bytes()
    # a value of the table, read from the report itself (test_tables.py: longctx B_dump = 2/3)
    t2 = {r["system"]: r for r in csv.DictReader(io.StringIO(data["table2.csv"].decode()))}
    assert float(t2["longctx_full"]["B_dump_all_mean"]) == pytest.approx(2 / 3, abs=1e-6)
    t4 = {
        (r["system"], r["mode"]): r
        for r in csv.DictReader(io.StringIO(data["table4.csv"].decode()))
    }
    assert float(t4[("longctx_full", "retrieve")]["recovery_rate"]) == pytest.approx(
        100 * 8 / 19, abs=1e-5
    )
    assert data["category_b.png"].startswith(b"\x89PNG")


@pytest.mark.workflow
def test_release_users_with_our_systems(endpoint, workflow_factory):
    cfg = release_users_config(endpoint.base_url, n_users=3)
    wf = workflow_factory(cfg)
    target = wf.target("users/user_003/tasks.json")
    # imported into the shared users' folder and copied into the run's (docs/runs.md), never
    # generated by persona/bank/tasks
    assert wf.scheduled(target) == {"import_users": 1, "users": 1}
    wf.run(target)
    tasks = json.loads((wf.root / target).read_text())
    assert [t["target_dimension"] for t in tasks["tasks"]] == EXPECTED_ORDER
    assert tasks["user_id"] == USERS[2]
    # the rollout of our systems is scheduled on the imported users (their other two files
    # copied into the run first)
    episodes = wf.target("longctx_full/user_003/episodes.json")
    assert wf.scheduled(episodes) == {"users": 2, "rollout": 1}


def test_a_topk_sweep_over_imported_runs_is_one_config_error():
    with pytest.raises(ConfigError, match=r"top_k: a sweep \(top_k: \[5, 3\]\).*set one top_k"):
        cfg_model(top_k=[5, 3])
    assert cfg_model(top_k=5).ks == [5]


@pytest.mark.workflow
def test_a_topk_sweep_over_imported_runs_stops_the_dag_in_one_line(workflow_factory):
    # Before the check, the DAG build stopped on the missing retrieve_k3 judge files.
    wf = workflow_factory(release_config(top_k=[5, 3]))
    proc = wf.run("tables", "-n", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "MissingInputException" not in out
    lines = [line for line in out.splitlines() if line.startswith("memprobe:")]
    assert len(lines) == 1 and "set one top_k" in lines[0], lines


def test_import_retrieved_keeps_the_recorded_items_under_our_queries(tmp_path):
    cfg = cfg_model()
    lay = layout.Layout(cfg)
    guides = load_guides()
    got = importer.retrieved(lay, "longctx_full", "user_002", 5, guides)
    bank = importer.bank(lay, "user_002", cfg.dims_per_category)
    assert (got.user_id, got.system, got.k) == ("user_002", "longctx_full", 5)
    assert [(q.category, q.dimension) for q in got.queries] == [
        (e.category, e.dimension) for e in bank.entries
    ]
    for q in got.queries:
        assert q.query == retrieve_query(q.dimension, q.category, guides)
        assert q.items == [{"content": f"item about {q.dimension}", "score": 0.5}]
    # a retrieve record without its items is named, with the entry
    copy = tmp_path / "release"
    shutil.copytree(FIXTURE, copy)
    path = copy / "output/longctx_full_pooled_50_retrieve/recon_judge/user_002.json"
    raw = json.loads(path.read_text())
    del raw["details"][3]["retrieved_memories"]
    path.write_text(json.dumps(raw))
    with pytest.raises(RecordError, match=r"user_002.json: details.3.retrieved_memories: missing"):
        importer.retrieved(layout.Layout(cfg_model(release_dir=str(copy))), "longctx_full",
                          "user_002", 5, guides)  # fmt: skip


# The release's amem and mem0 runs, imported: the records in their release shapes and the table
# rows they give, against values derived by hand from tests/fixtures/make_release_fixture.py.
# They are systems of their own, so the numbers of tests/report/test_tables.py (nomem,
# longctx_full, memt) do not move. Per user, in bank order (skill 2, knowledge 2, episodic 2,
# self 1, preference 1), B = mean of the 5 category means.
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
    lay = layout.Layout(cfg_model(systems=NEW))
    amem = importer.memories(lay, "amem", "user_002")
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
    mem0 = importer.memories(lay, "mem0", "user_003")
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
    lay = layout.Layout(cfg)
    guides = load_guides()
    # amem, user_002: a store of 2 notes, so 2 hits per query, the store rotated by the
    # dimension's position; A-Mem's hits: category blank, cosine distance ascending.
    got = importer.retrieved(lay, "amem", "user_002", 5, guides)
    assert (got.system, got.k, len(got.queries)) == ("amem", 5, 8)
    store = importer.memories(lay, "amem", "user_002").memories
    for d, q in enumerate(got.queries):
        assert q.query == retrieve_query(q.dimension, q.category, guides)
        assert [list(h) for h in q.items] == [AMEM_HIT, AMEM_HIT]
        assert [h["id"] for h in q.items] == [uid(2, d % 2), uid(2, (d + 1) % 2)]
        assert [h["score"] for h in q.items] == [0.3, 0.4]
        assert {h["category"] for h in q.items} == {""}
        assert q.items[0]["content"] == store[d % 2]["content"]
    # mem0, user_001: 3 facts, 3 hits per query as mem0 returned them (no score)
    got = importer.retrieved(lay, "mem0", "user_001", 5, guides)
    store = importer.memories(lay, "mem0", "user_001").memories
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


COUNTS = dict(zip(CATEGORIES, (7, 7, 7, 5, 5), strict=True))


def write_release_user(root, user="user_007"):
    """One user in the release's bank-file and task-file layout (docs/release-format.md §2)."""
    pool = load_pool()
    bank = {
        cat: [
            {"dimension": name, "short": f"{name} of {user}", "explanation": f"Why {name}."}
            for name in pool.names(cat)[:n]
        ]
        for cat, n in COUNTS.items()
    }
    bank_file = root / "Deeppersona" / "data" / "user_memory_banks_pooled_final.json"
    bank_file.parent.mkdir(parents=True)
    profile = {
        "age_info": {"age": 41, "age_group": "adult"},
        "gender": "female",
        "location": {"country": "United States", "city": "Dayton"},
        "career_info": {"status": "nurse"},
        "personal_values": {"values_orientation": "positive"},
        "life_attitude": {"attitude": "steady", "attitude_details": "", "coping_mechanism": ""},
        "personal_story": {"personal_story": "Story 1: moved west."},
        "interests": {"interests": ["running"]},
    }
    bank_file.write_text(json.dumps({
        "generated_at": "2026-04-27 18:29:52", "source": "pooled", "num_users": 1,
        "users": [{"user_id": user, "base_profile": profile, "memory_bank": bank}],
    }))  # fmt: skip
    order = [(c, e) for c in CATEGORIES for e in bank[c]]
    tasks = [
        {"task": f"Help me with chore {i}.", "rationale": "r", "target_category": c,
         "target_dimension": e["dimension"], "target_short": e["short"],
         "pipeline_note": "edited_after_fishing_flag" if i % 3 == 0 else ""}
        for i, (c, e) in enumerate(order, 1)
    ]  # fmt: skip
    task_file = root / "benchmark_data" / "CustomTasksPooledFinal" / f"{user}.json"
    task_file.parent.mkdir(parents=True)
    task_file.write_text(json.dumps({"user_id": user, "generated_at": "x", "n_tasks": 31,
                                     "tasks": tasks}))  # fmt: skip
    return bank_file, task_file, [e["dimension"] for _, e in order]


def test_31_entries_load_in_bank_order(tmp_path):
    bank_file, task_file, order = write_release_user(tmp_path)
    lay = layout.Layout(cfg_model(release_dir=str(tmp_path)))
    bank = importer.bank(lay, "user_007", COUNTS)
    assert len(bank.entries) == 31
    assert [e.dimension for e in bank.entries] == order
    assert [e.category for e in bank.entries] == [c for c in CATEGORIES for _ in range(COUNTS[c])]
    tasks = importer.tasks(lay, "user_007", bank)
    assert [t.index for t in tasks.tasks] == list(range(1, 32))
    # Episode i targets bank entry i.
    assert [t.target_dimension for t in tasks.tasks] == order
    assert sum(bool(t.revisions) for t in tasks.tasks) == 10


def test_tasks_out_of_bank_order_are_rejected(tmp_path):
    bank_file, task_file, _ = write_release_user(tmp_path)
    raw = json.loads(task_file.read_text())
    raw["tasks"][0], raw["tasks"][1] = raw["tasks"][1], raw["tasks"][0]
    task_file.write_text(json.dumps(raw))
    lay = layout.Layout(cfg_model(release_dir=str(tmp_path)))
    bank = importer.bank(lay, "user_007", COUNTS)
    with pytest.raises(RecordError, match=r"tasks\[0\]\.target_dimension"):
        importer.tasks(lay, "user_007", bank)


def _broken(tmp_path: Path, edit) -> tuple[object, Path, object]:
    """A copy of the fixture whose user_001 episode 2 of the replayed run is ``edit``ed."""
    root = tmp_path / "release"
    if not root.exists():
        shutil.copytree(FIXTURE, root)
    cfg = replay_cfg(root)
    lay = layout.Layout(cfg)
    bank = importer.bank(lay, "user_001", cfg.dims_per_category)
    task = importer.tasks(lay, "user_001", bank).tasks[1]
    path = lay.recorded(REPLAY_RUN, "user_001", 2)
    raw = json.loads((FIXTURE / path.relative_to(root)).read_text())
    edit(raw)
    path.write_text(json.dumps(raw))
    return lay, path, task


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda r: r["turns"][0].pop("agent_response"), r"turns\.0\.agent_response"),
        (
            lambda r: r["turns"][0]["user_simulator"].update(feedback_type="pleased"),
            r"turns\.0\.feedback_type",
        ),
        (lambda r: r.update(task="Another task."), "task: not the task file's task 2"),
        (lambda r: r["turns"][1].update(turn=5), r"turns: numbered \[1, 5\], expected 1\.\.2"),
        (lambda r: r.update(turns=[]), "end_reason: 'satisfied' after 'no turn'"),
        (lambda r: r.update(end_reason="max_turns"), "end_reason: 'max_turns' after 'satisfied'"),
    ],
    ids=["no-reply", "bad-feedback", "other-task", "turn-numbers", "no-turns", "end-reason"],
)
def test_a_malformed_recorded_episode_is_one_line(tmp_path, edit, expected):
    lay, path, task = _broken(tmp_path, edit)
    with pytest.raises(RecordError) as err:
        importer.replayable(lay, path, task)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{path}: "), message
    assert re.search(expected, message), message
    # the untouched file replays
    assert len(importer.replayable(*_broken(tmp_path, lambda r: None)).turns) == 2
