"""Reading the authors' release: loaders, layout errors, and the real Snakemake import."""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import shutil
from html import unescape
from pathlib import Path

import pytest
from docutils.core import publish_parts

from memprobe.config import ConfigError
from memprobe.protocol.records import RecordError
from memprobe.protocol.taxonomy import load_guides, retrieve_query
from memprobe.release import importer as release
from tests.release_fixture import (
    FIXTURE,
    ROOT,
    USERS,
    cfg_model,
    release_config,
    release_users_config,
)

EXPECTED_ORDER = [
    "critical_thinking_skill",
    "reading_comprehension_skill",
    "financial_literacy_knowledge",
    "procedural_knowledge",
    "legal_or_administrative_event",
    "relocation_event",
    "prudence_self_view",
    "verbosity_preference",
]


def test_bank_tasks_persona_load_in_bank_order():
    cfg = cfg_model()
    lay = release.Layout(cfg)
    bank = release.bank(lay.bank_file, "user_002", cfg.dims_per_category)
    assert [e.dimension for e in bank.entries] == EXPECTED_ORDER
    assert bank.entries[0].short == "critical thinking skill of user_002"
    tasks = release.tasks(lay.task_file("user_002"), "user_002", bank)
    assert [t.index for t in tasks.tasks] == list(range(1, 9))
    assert [t.target_dimension for t in tasks.tasks] == EXPECTED_ORDER
    assert tasks.tasks[1].revisions == ["edited_after_fishing_flag"]
    p = release.persona(lay.bank_file, "user_002")
    assert (p.age, p.location.city, p.occupation) == (32, "Springfield", "teacher")
    assert p.stories == ["moved once.", "a new job."]


def test_wrong_counts_and_missing_user_fail_in_one_line():
    cfg = cfg_model()
    lay = release.Layout(cfg)
    with pytest.raises(RecordError, match=r"memory_bank\.skill_memory: 2 entries, .* expects 7"):
        release.bank(lay.bank_file, "user_001", {**cfg.dims_per_category, "skill_memory": 7})
    with pytest.raises(RecordError, match="no user_id 'user_009'"):
        release.bank(lay.bank_file, "user_009")


def test_missing_release_file_is_named(tmp_path):
    copy = tmp_path / "release"
    shutil.copytree(FIXTURE, copy)
    (copy / "output/longctx_full_pooled_50_retrieve/attribution/user_003.json").unlink()
    with pytest.raises(RecordError, match="missing .*retrieve/attribution/user_003.json"):
        release.check_layout(cfg_model(release_dir=str(copy)))


def test_latest_merged_report_is_canonical():
    lay = release.Layout(cfg_model())
    path = lay.merged_report("longctx_full", "dump_all")
    assert path.name == "longctx_full_20260501_090000_merged.json"
    agg = release.report_aggregate(path)
    assert agg["B_reconstruction"]["mean"]["overall"] == pytest.approx(2 / 3)


def test_imported_records_keep_the_release_values():
    cfg = cfg_model()
    lay = release.Layout(cfg)
    bank = release.bank(lay.bank_file, "user_001", cfg.dims_per_category)
    mem = release.memories(lay, "memt", "user_002")
    slot, judge = release.scores(lay, "memt", "dump_all", "user_002", bank, mem)
    assert judge.flagged and slot.overflow_strategy == "flag"
    assert all(e.label == "unknown" for e in slot.entries)
    raw = json.loads(lay.recon_judge("longctx_full", "retrieve", "user_001").read_text())
    _, lj = release.scores(
        lay,
        "longctx_full",
        "retrieve",
        "user_001",
        bank,
        release.memories(lay, "longctx_full", "user_001"),
    )
    assert lj.overall == pytest.approx(raw["overall"]) and not lj.overflow
    att = release.attribution(lay, "memt", "dump_all", "user_001")
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
    res = wf.root / "results"
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

    wf.run("inspect")  # the rest of the default target, which the report covers
    wf.run("--report", "results/report.html")
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


# Each entry of the report (rule tables, rule inspect) and the caption it must carry.
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
    target = "results/users/user_003/tasks.json"
    assert wf.scheduled(target) == {"import_users": 1}  # never persona/bank/tasks generation
    wf.run(target)
    tasks = json.loads((wf.root / target).read_text())
    assert [t["target_dimension"] for t in tasks["tasks"]] == EXPECTED_ORDER
    assert tasks["user_id"] == USERS[2]
    # the rollout of our systems is scheduled on the imported users
    assert wf.scheduled("results/longctx_full/user_003/episodes.json") == {"rollout": 1}


def test_a_topk_sweep_over_imported_runs_is_one_config_error():
    with pytest.raises(ConfigError, match=r"k: a top-k sweep \(k: \[5, 3\]\).*set one k"):
        cfg_model(k=[5, 3])
    assert cfg_model(k=5).ks == [5]


@pytest.mark.workflow
def test_a_topk_sweep_over_imported_runs_stops_the_dag_in_one_line(workflow_factory):
    # Before the check, the DAG build stopped on the missing retrieve_k3 judge files.
    wf = workflow_factory(release_config(k=[5, 3]))
    proc = wf.run("tables", "-n", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "MissingInputException" not in out
    lines = [line for line in out.splitlines() if line.startswith("memprobe:")]
    assert len(lines) == 1 and "set one k" in lines[0], lines


def test_import_retrieved_keeps_the_recorded_items_under_our_queries(tmp_path):
    cfg = cfg_model()
    lay = release.Layout(cfg)
    guides = load_guides()
    got = release.retrieved(lay, "longctx_full", "user_002", 5, guides)
    bank = release.bank(lay.bank_file, "user_002", cfg.dims_per_category)
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
        release.retrieved(release.Layout(cfg_model(release_dir=str(copy))), "longctx_full",
                          "user_002", 5, guides)  # fmt: skip


def test_release_runs_maps_a_system_to_another_run_folder(tmp_path):
    lay = release.Layout(cfg_model())
    assert lay.run_id("memt") == "memt_memonly_pooled_50"  # the release's agent name
    assert lay.run_id("longctx_full") == "longctx_full_pooled_50"
    copy = tmp_path / "release"
    shutil.copytree(FIXTURE, copy)
    out = copy / "output"
    for old in sorted(copy.rglob("longctx_full_pooled_50*"), reverse=True):
        if old.is_dir():  # output/<run>, output/<run>_retrieve, memory/<run>, ...
            old.rename(old.with_name(old.name.replace("longctx_full_pooled_50", "longctx_rerun_7")))
    cfg = cfg_model(
        release_dir=str(copy),
        release={"import_runs": True, "runs": {"longctx_full": "longctx_rerun_7"}},
    )
    lay = release.Layout(cfg)
    assert lay.output_dir("longctx_full", "dump_all") == out / "longctx_rerun_7"
    assert lay.output_dir("longctx_full", "retrieve") == out / "longctx_rerun_7_retrieve"
    mem = release.memories(lay, "longctx_full", "user_001")
    assert mem.meta == {"source": "release", "run": "longctx_rerun_7"}
    assert mem.memories == release.memories(release.Layout(cfg_model()), "longctx_full",
                                            "user_001").memories  # fmt: skip
