"""The tiny workflow end to end: real Snakemake, the openai client, a loopback endpoint."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest

from memprobe.config.loading import load_config
from memprobe.llm import ledger
from memprobe.llm.client import ATTEMPT_STRIDE
from memprobe.protocol.persona import sample_attributes
from memprobe.report import estimate_calls, estimate_rates
from memprobe.report.tables import TABLE2_COLUMNS
from memprobe.testing.fake_endpoint import Faults
from memprobe.workflow import paths
from tests.helpers.endpoint import record_requests
from tests.helpers.workflow import tiny_config

pytestmark = pytest.mark.workflow

USERS = ("user_001", "user_002")


def ledger_rows(wf) -> list[dict]:
    return ledger.read_rows(wf.ledger_files())


def expected_artifacts(results: Path) -> list[Path]:
    paths = []
    for u in USERS:
        paths += [results / "users" / u / f for f in ("persona.json", "bank.json", "tasks.json")]
        paths.append(results / "oracle" / f"{u}.json")
        for system, modes in (("nomem", ["dump_all"]), ("longctx_full", ["dump_all", "retrieve"])):
            base = results / system / u
            paths += [
                base / "episodes.json",
                base / "memories.json",
                base / "store",
                base / "preference.json",
            ]
            for m in modes:
                paths += [base / m / f for f in ("slotfill.json", "judge.json", "attribution.json")]
        paths.append(results / "longctx_full" / u / "retrieved_k5.json")
    return paths


def test_tiny_run_builds_every_artifact_and_reruns_nothing(endpoint, workflow_factory):
    wf = workflow_factory(tiny_config(endpoint.base_url, progress={"interval_s": 1.0}))
    proc = wf.run(wf.target("table2.csv"))
    results = wf.results

    # The progress line while it ran, and its summary at the end: the ledgers' own figures.
    assert "memprobe progress: " in proc.stderr
    summary = next(x for x in proc.stderr.splitlines() if x.startswith("memprobe summary: "))
    rows = ledger.read_rows(wf.ledger_files())  # the run's and its users' (docs/runs.md)
    paid = [r for r in rows if r["cached"] == "false"]
    tokens = sum(int(r["prompt_tokens"]) + int(r["completion_tokens"]) for r in paid)
    jobs = re.match(r"memprobe summary: (\d+)/(\d+) jobs, ", summary)
    assert jobs and jobs[1] == jobs[2] and int(jobs[1]) > 10, summary
    assert f" {len(paid):,} calls paid ({len(rows) - len(paid):,} replayed), " in summary
    assert f" {tokens / 1e6:.2f}M tokens " in summary
    assert ", estimate " in summary  # the target goes to the tables: the estimate applies

    # The one target leaves nothing out: every other table and figure is built too.
    others = ["table3.csv", "table4.csv", "table13.csv", "table14.csv", "gap.csv", "table5.csv",
              "table2_ci.csv", "paired.csv", "topk_sweep.csv", "figures/category_b.png",
              "figures/dump_vs_retrieve.png", "figures/attribution.png"]  # fmt: skip
    missing = [str(p) for p in expected_artifacts(results) if not p.exists()]
    missing += [name for name in others if not (results / name).exists()]
    assert not missing, missing
    rows = list(csv.DictReader(open(results / "table2.csv")))
    assert list(rows[0].keys()) == TABLE2_COLUMNS
    by_system = {r["system"]: r for r in rows}
    assert set(by_system) == {"nomem", "longctx_full"}
    # nomem has no search: its retrieve cells are empty, never 0.
    assert by_system["nomem"]["B_retrieve_mean"] == ""
    assert by_system["longctx_full"]["B_retrieve_mean"] != ""
    assert float(by_system["longctx_full"]["N_items"]) > 0
    # The numbers, not only the files: nomem remembers nothing, so every slot is "unknown"
    # without a call and its B is a measured 0; each B and D is the mean of the per-user
    # records it is built from, and D is on the 1-5 scale.
    assert float(by_system["nomem"]["B_dump_all_mean"]) == 0.0
    nomem_slots = json.loads((results / "nomem/user_001/dump_all/slotfill.json").read_text())
    assert all(e["label"] == "unknown" and not e["called"] for e in nomem_slots["entries"])
    for system, row in by_system.items():
        ds = [
            json.loads((results / system / u / "preference.json").read_text())["D"] for u in USERS
        ]
        ds = [d for d in ds if d is not None]
        assert ds and all(1 <= d <= 5 for d in ds), (system, ds)
        assert float(row["D_mean"]) == pytest.approx(sum(ds) / len(ds), abs=1e-6)
        b = [
            json.loads((results / system / u / "dump_all" / "judge.json").read_text())["overall"]
            for u in USERS
        ]
        assert float(row["B_dump_all_mean"]) == pytest.approx(sum(b) / len(b), abs=1e-6)

    first = ledger_rows(wf)
    assert first and any(r["cached"] == "false" for r in first)
    # `memprobe estimate` fed this run's own ledger predicts it within 10% (calls, tokens).
    cfg = load_config(tiny_config(endpoint.base_url))
    # ... its users' ledgers found where the command looks, from the config alone (docs/runs.md)
    users = sorted(wf.root / p for p in paths.of(wf.cfg).users.values())
    assert users == wf.users
    lines = estimate_calls.predict(cfg, estimate_rates.observed(results, cfg, users))
    ok = [r for r in first if r["status"] == "ok"]
    assert sum(x.calls for x in lines) == pytest.approx(len(ok), rel=0.1)
    for field in ("prompt_tokens", "completion_tokens"):
        predicted = sum(getattr(x, field) for x in lines)
        assert predicted == pytest.approx(sum(float(r[field]) for r in ok), rel=0.1), field
    # One ledger per job, named after its wildcards in the rule's order (table5 reads them).
    assert (results / "usage" / "judge" / "longctx_full_user_001_retrieve.csv").exists()
    assert (results / "usage" / "rollout" / "nomem_user_002.csv").exists()
    assert {"role", "model", "prompt_tokens", "completion_tokens", "latency_s", "cached"} <= set(
        first[0]
    )

    # A second run schedules nothing.
    assert wf.scheduled(wf.target("table2.csv")) == {}

    # Deleting the results (the run's and the users') and rerunning with the same cache pays
    # for no call.
    table = (results / "table2.csv").read_text()
    shutil.rmtree(wf.root / "results")
    wf.run(wf.target("table2.csv"))
    second = ledger_rows(wf)
    assert second, "the rerun wrote no ledger rows"
    assert all(r["cached"] == "true" for r in second), [r for r in second if r["cached"] != "true"]
    assert (results / "table2.csv").read_text() == table

    # Editing the judge prompt reruns judge, its calibration, attribution and tables only.
    prompt = wf.root / "prompts" / "recovery_judge.md"
    prompt.write_text(prompt.read_text() + "\nBe strict.\n")
    scheduled = set(wf.scheduled(wf.target("table2.csv")))
    assert {"judge", "judge_calibration"} <= scheduled
    assert scheduled <= {
        "judge",
        "judge_calibration",
        "calibration_gate",
        "attribution",
        "tables",
        "all",
    }
    assert not scheduled & {"rollout", "probe", "slotfill", "persona", "bank", "tasks"}


def test_memories_json_and_search_cli_agree(endpoint, workflow_factory):
    import subprocess
    import sys

    wf = workflow_factory(
        tiny_config(endpoint.base_url, systems=["longctx_full"], modes=["retrieve"], n_users=1)
    )
    wf.run(wf.target("longctx_full/user_001/retrieved_k5.json"))
    mem = wf.results / "longctx_full/user_001/memories.json"
    retrieved = json.loads((wf.results / "longctx_full/user_001/retrieved_k5.json").read_text())
    # A note's own text as the query must find that note first, at cosine ~1: an expectation
    # that does not come from the search being tested.
    notes = [n["content"] for n in json.loads(mem.read_text())["memories"]]
    queries = [q["query"] for q in retrieved["queries"]] + notes[:3]
    qfile = wf.root / "queries.txt"
    qfile.write_text("\n".join(queries) + "\n")
    cli = str(Path(sys.executable).with_name("memprobe"))
    out = subprocess.run(
        [
            cli,
            "search",
            "--system",
            "longctx_full",
            "--memories",
            str(mem),
            "--k",
            "5",
            "--queries",
            str(qfile),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert len(out) == len(queries)
    for line, note in zip(out[-3:], notes[:3], strict=True):
        top = json.loads(line)[0]
        assert top["content"] == note and top["score"] == pytest.approx(1.0, abs=1e-4)
    for line, q in zip(out, retrieved["queries"], strict=False):
        items = json.loads(line)
        assert [i["content"] for i in items] == [i["content"] for i in q["items"]]
        assert all(
            abs(a["score"] - b["score"]) < 1e-5 for a, b in zip(items, q["items"], strict=True)
        )


def test_stand_ins_end_the_run_listed_and_flag_the_cells_they_touch(scripted, workflow_factory):
    # Every slot-fill reply breaks its schema (no label): each gets the stand-in "unknown".
    ep, seen = scripted({"slotfill": {"else": {"reason": "no label given"}}})
    cfg = tiny_config(ep.base_url)
    cfg["llm"].update(max_reasks=0, resample_invalid=0)
    wf = workflow_factory(cfg)
    # Issue 42: a stage whose every reply was a stand-in stops the run before its tables, in
    # one line naming the stage and its share (llm.max_stand_in_share, default 0.5)...
    stopped = wf.run("tables", check=False)
    results = wf.results
    assert stopped.returncode != 0 and not (results / "table2.csv").exists()
    (line,) = [x for x in stopped.stderr.splitlines() if "llm.max_stand_in_share" in x]
    assert "memprobe: tables: llm.max_stand_in_share: more than 0.5 of " in line, line
    n = len(seen["slotfill"])
    assert f"(slotfill {n} of {n} calls, 100%)" in line
    assert "recoveries.csv" in line and "/recoveries/" in line
    # ... and one that accepts them all (1) gets its tables, from the cache: no call again.
    asked = len(seen["slotfill"])
    proc = wf.run("tables", "--config", "llm={max_stand_in_share: 1.0}")
    assert len(seen["slotfill"]) == asked
    listed = list(csv.DictReader(open(results / "recoveries.csv")))
    assert listed and {r["stage"] for r in listed} == {"slotfill"}
    assert len(listed) == len(seen["slotfill"])  # one per call: no re-ask
    assert {r["touches"] for r in listed} == {"B"}
    last = proc.stderr.strip().splitlines()
    line = next(x for x in last if x.startswith("memprobe: ") and "stand-in" in x)
    assert f"memprobe: {len(listed)} stand-ins" in line and f"slotfill {len(listed)}" in line
    folders = line.split("listed in ", 1)[1].rstrip(")").split(", ")
    assert all((wf.root / f).is_dir() for f in folders), line  # where the files really are
    # longctx_full's B cells rest on them; nomem never called the slot-filler.
    flags = {r["system"]: r for r in csv.DictReader(open(results / "table2_flags.csv"))}
    assert "stand-ins: slotfill" in flags["longctx_full"]["B_dump_all_mean"]
    assert "stand-ins" not in flags["nomem"]["B_dump_all_mean"]
    assert "stand-ins" not in flags["longctx_full"]["A"]
    assert "replies were stand-ins" in (results / "report_header.rst").read_text()


def test_an_endpoint_whose_every_structured_reply_is_invalid_stops_the_run_in_one_line(
    scripted, workflow_factory
):
    """Issue 42 item 4, must show: every structured reply breaks its schema (an empty object),
    so every stage runs on stand-ins; the run used to end with a full set of tables."""
    roles = ["generator", "task_writer", "critic", "editor", "simulator", "preference"]
    roles += ["slotfill", "judge", "oracle", "disclosure"]
    ep, seen = scripted({role: {"else": {}} for role in roles})
    cfg = tiny_config(ep.base_url)
    cfg["llm"].update(max_reasks=0, resample_invalid=0)
    wf = workflow_factory(cfg)
    proc = wf.run("tables", check=False)
    assert proc.returncode != 0
    assert not list(wf.results.glob("table*.csv")) and not (wf.results / "recoveries.csv").exists()
    (line,) = [x for x in proc.stderr.splitlines() if "llm.max_stand_in_share" in x]
    assert "memprobe: tables: llm.max_stand_in_share: more than 0.5 of " in line, line
    for stage in ("persona", "bank", "task_writer", "simulator", "slotfill", "oracle"):
        assert f" {stage} " in line or f"({stage} " in line, line
    assert "%" in line and " 100%" in line, line


def test_a_failed_job_draws_new_samples_when_the_command_is_run_again(endpoint, workflow_factory):
    seen = record_requests(endpoint)
    name = sample_attributes(7, "user_002")["name"]
    endpoint.server.faults = Faults(poison=name)  # user_002's persona request: always 500
    wf = workflow_factory(tiny_config(endpoint.base_url))
    # the persona job's own file, in the shared users' folder (docs/runs.md)
    target = f"{paths.of(wf.cfg).users['persona']}/user_002/persona.json"
    failed = wf.run(target, check=False)
    assert failed.returncode != 0
    assert "memprobe: persona: role generator (user user_002, persona): no reply" in failed.stderr
    endpoint.server.faults = None
    done = wf.run(target)
    mine = [b["seed"] for b in seen["generator"] if name in json.dumps(b)]
    assert mine == [7, 7, 7 + ATTEMPT_STRIDE]  # two failed tries, then the next attempt's seed
    assert "1 job(s) finished on a later attempt: persona/user_002 (attempt 1)" in done.stderr
    # The finished job, run again from scratch (its output deleted), replays: no request.
    made = (wf.root / target).read_bytes()
    (wf.root / target).unlink()
    wf.run(target)
    assert len([b for b in seen["generator"] if name in json.dumps(b)]) == 3
    assert (wf.root / target).read_bytes() == made
