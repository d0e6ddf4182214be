"""Rerun precision: an edited prompt or module, or a changed setting, reruns exactly its dependents.

One finished tiny run (module fixture) is shared by every case. The expected jobs come from the
run's own file DAG (``snakemake --detailed-summary``): for a file, the jobs that declare it as an
input plus everything downstream (issue 9); for a setting (issue 13), the jobs written down here
from the scripts as its readers (not taken from memprobe/workflow/config_slices.py) plus everything
downstream of them, or nothing for a runtime-only key. Table 5 then counts only the calls of the
jobs behind the current artifacts.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from memprobe.config.loading import set_dotted
from memprobe.llm import ledger
from memprobe.report import tables
from memprobe.report.jobdag import Dag, job_key
from tests.helpers.endpoint import Endpoint
from tests.helpers.workflow import ROOT, Workflow, tiny_config

pytestmark = pytest.mark.workflow
READ_GUARD = ROOT / "tests" / "readguard"
READS = "reads.jsonl"
TARGET = "tables"
LLM_RULES = {"persona", "bank", "tasks", "oracle", "rollout", "preference", "probe",
             "slotfill", "judge", "attribution", "slotfill_sweep", "judge_sweep",
             "judge_calibration"}  # fmt: skip


@dataclass
class Finished:
    wf: Workflow
    dag: Dag
    config: dict
    seconds: float


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Finished:
    ep = Endpoint()
    try:
        root = tmp_path_factory.mktemp("current")
        config = tiny_config(ep.base_url)
        wf = Workflow(root, config)
        start = time.monotonic()
        # Every job process logs the prompt and config files it opens (tests/readguard).
        wf.run(TARGET, env={"PYTHONPATH": str(READ_GUARD), "MEMPROBE_READ_LOG": str(root / READS)})
        seconds = time.monotonic() - start
        dag = Dag(wf.run("--detailed-summary", TARGET).stdout)
        yield Finished(wf, dag, config, seconds)
    finally:
        ep.close()


def readers(dag: Dag, pick: Callable[[str, str, str, str], bool]) -> Counter:
    """The jobs ``pick(rule, system, user, rest)`` selects, plus everything downstream."""
    return dag.downstream(j for j in dag.rule if pick(*job_key(j)))


def rules(*names: str) -> Callable[[str, str, str, str], bool]:
    return lambda rule, system, user, rest: rule in names


def set_key(key: str, value) -> Callable[[dict], None]:
    def change(cfg: dict) -> None:
        set_dotted(cfg, key, value)

    return change


def new_user(dag: Dag) -> Counter:
    """A third user: the same jobs as user_001, and the tables."""
    return Counter(job_key(j)[0] for j in dag.rule if job_key(j)[2] == "user_001") + Counter(
        tables=1
    )


def new_k(dag: Dag) -> Counter:
    """k 5 -> 3: a probe job in place of each k=5 one, and whatever read the k=5 retrievals."""
    old = [p for p in {i for ins in dag.inputs.values() for i in ins} if "retrieved_k5" in p]
    got = dag.downstream(j for j, ins in dag.inputs.items() if ins & set(old))
    return got + Counter(probe=sum(r == "probe" for r in dag.rule.values()))


# (setting, how it changes, the jobs that read it or, for a shape key, the expected jobs)
CASES = [
    ("seed", set_key("seed", 8), lambda d: readers(d, rules(*LLM_RULES, "tables"))),
    ("n_users", set_key("n_users", 3), new_user),
    (
        "dims_per_category",
        set_key("dims_per_category.skill_memory", 2),
        lambda d: readers(d, rules("bank")),
    ),
    ("max_turns", set_key("max_turns", 2), lambda d: readers(d, rules("rollout"))),
    ("llm.model", set_key("llm.model", "other-model"), lambda d: readers(d, rules(*LLM_RULES))),
    (
        "llm.roles.judge.temperature",
        set_key("llm.roles.judge.temperature", 0.3),
        lambda d: readers(d, rules("judge", "judge_sweep", "judge_calibration")),
    ),
    (
        "llm.roles.simulator.model",
        set_key("llm.roles.simulator.model", "other-model"),
        lambda d: readers(d, rules("rollout")),
    ),
    (
        "compat.judge_unknown_labels",
        set_key("compat.judge_unknown_labels", True),
        lambda d: readers(d, rules("judge", "judge_sweep")),
    ),
    (
        "compat.longctx_drop_final_reply",
        set_key("compat.longctx_drop_final_reply", True),
        lambda d: readers(d, lambda r, s, u, m: r == "rollout" and s == "longctx_full"),
    ),
    (
        "compat.retrieve_attribution_empty_transcript",
        set_key("compat.retrieve_attribution_empty_transcript", True),
        lambda d: readers(d, lambda r, s, u, m: r == "attribution" and m == "retrieve"),
    ),
    (
        "slotfill.overflow",
        set_key("slotfill.overflow", "chunked"),
        lambda d: readers(d, lambda r, s, u, m: r == "slotfill" and m == "dump_all"),
    ),
    ("tasks.max_edits", set_key("tasks.max_edits", 1), lambda d: readers(d, rules("tasks"))),
    ("bank.pool_sample", set_key("bank.pool_sample", 3), lambda d: readers(d, rules("bank"))),
    ("top_k", set_key("top_k", 3), new_k),
]
# Runtime only: how a job runs, never what it writes.
RUNTIME = {"llm.concurrency": 1, "llm.timeout_s": 33.0, "llm.max_attempts": 7,
           "llm.local.threads": 1}  # fmt: skip
CASES += [(k, set_key(k, v), lambda d: Counter()) for k, v in RUNTIME.items()]


@pytest.mark.parametrize(("key", "change", "expect"), CASES, ids=[c[0] for c in CASES])
def test_a_changed_setting_schedules_exactly_its_dependent_set(finished, key, change, expect):
    cfg = copy.deepcopy(finished.config)
    change(cfg)
    finished.wf.write_config(cfg)
    try:
        got = finished.wf.scheduled(TARGET)
    finally:
        finished.wf.write_config(finished.config)
    want = dict(expect(finished.dag))
    assert want or key in RUNTIME
    assert got == want, f"{key}: scheduled {got}, dependent set {want}"


def test_the_finished_run_is_current(finished):
    assert finished.wf.scheduled(TARGET) == {}
    print(f"tiny run: {finished.seconds:.1f} s, {len(finished.dag.rule)} jobs")


def test_snakemake_names_the_changed_setting(finished):
    cfg = copy.deepcopy(finished.config)
    cfg["tasks"] = {"max_edits": 1}
    finished.wf.write_config(cfg)
    try:
        dry = finished.wf.run(TARGET, "-n")
        summary = finished.wf.run(TARGET, "--summary").stdout
        changes = finished.wf.run("--list-changes", "params").stdout  # docs/currency.md
    finally:
        finished.wf.write_config(finished.config)
    assert "before: {'tasks': {'max_edits': 3," in dry.stdout + dry.stderr
    assert "now: {'tasks': {'max_edits': 1," in dry.stdout + dry.stderr
    status = {row.split("\t")[0]: row.split("\t")[-2] for row in summary.splitlines()[1:]}
    # The tasks are made anew in a folder of their own settings (docs/runs.md): the run's copy
    # reads that new file and carries the changed setting as a param, and Snakemake's summary
    # gives it the first of those two reasons; the bank, made as before, is untouched.
    tasks, bank = (finished.wf.target(f"users/user_001/{f}.json") for f in ("tasks", "bank"))
    assert status[tasks] == "set of input files changed"
    assert status[bank] == "ok"
    # It runs and names the changed job's output; it also lists outputs whose params did not
    # change (bank.json here), so docs/currency.md should not present it as the precise view.
    assert tasks in changes
    # docs/currency.md: a deliberate rerun of a stage, whatever changed
    assert set(finished.wf.scheduled(TARGET, "-R", "judge")) >= {"judge", "attribution"}


def edited(path: Path):
    """Append a comment to a file for the duration of a with-block."""

    class Edit:
        def __enter__(self):
            self.old = path.read_bytes()
            path.write_bytes(self.old + b"\n# an edit that changes the content\n")

        def __exit__(self, *exc):
            path.write_bytes(self.old)

    return Edit()


def test_each_prompt_edit_schedules_exactly_its_dependent_set(finished):
    wf, dag = finished.wf, finished.dag
    assert {"rollout", "slotfill", "judge", "attribution"} <= set(dag.rule.values())
    prompts = sorted((wf.root / "prompts").iterdir())
    assert prompts
    used = 0
    for f in prompts:
        rel = f"prompts/{f.name}"
        want = dict(dag.dependents(rel))
        used += bool(want)
        with edited(f):
            got = wf.scheduled(TARGET)
        assert got == want, f"{rel}: scheduled {got}, dependent set {want}"
    # Most prompt files are read by this config's jobs, so the comparison is not vacuous.
    assert used >= len(prompts) // 2
    # Restoring the content (a newer mtime, same bytes) reruns nothing.
    assert wf.scheduled(TARGET) == {}


@pytest.mark.parametrize(
    ("module", "must", "never"),
    [
        ("memprobe/protocol/slotfill.py", {"slotfill", "judge"}, {"persona", "rollout", "probe"}),
        ("memprobe/protocol/judge.py", {"judge", "attribution"}, {"rollout", "slotfill"}),
        ("agents/longctx.py", {"rollout", "probe"}, {"persona", "bank", "oracle"}),
        # The task writer's module: tasks jobs (and what reads their tasks), no persona or bank.
        ("memprobe/protocol/tasks.py", {"tasks"}, {"persona", "bank"}),
    ],
)
def test_editing_a_library_module_schedules_its_jobs_and_their_dependents(
    finished, module, must, never
):
    path = ROOT / module
    declared = {i for ins in finished.dag.inputs.values() for i in ins if i.endswith(module)}
    assert len(declared) == 1, declared
    want = dict(finished.dag.dependents(declared.pop()))
    with edited(path):
        got = finished.wf.scheduled(TARGET)
    assert got == want
    assert must <= set(got) and not never & set(got)
    if module.startswith("agents/"):
        # Only that system's jobs: nomem's rollouts stay.
        assert got["rollout"] == sum(
            job_key(j)[:2] == ("rollout", "longctx_full") for j in finished.dag.rule
        )


def test_the_paper_config_schedules_the_finished_users_banks(finished):
    """Must-show 3: users 001 and 002 keep no bank built under another config."""
    paper = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    finished.wf.write_config(paper)
    try:
        proc = finished.wf.run(TARGET, "-n", env={"OPENAI_API_KEY": "unused"})
    finally:
        finished.wf.write_config(finished.config)
    out = proc.stdout + proc.stderr
    # The paper's banks are made in a folder of their own settings (docs/runs.md), none is
    # the finished run's.
    finished_banks = finished.wf.shared("bank").name
    for user in ("user_001", "user_002"):
        made = re.findall(rf"output: results/users/(bank-\w+)/{user}/bank\.json", out)
        assert made and finished_banks not in made, (user, made)


def ledger_rows(paths) -> list[dict]:
    return ledger.read_rows(paths)


def test_table5_counts_only_the_calls_behind_the_current_artifacts(finished, tmp_path):
    """Must-show 4: after a config change and a rerun, stale ledgers stay out of Table 5."""
    root = tmp_path / "changed"
    shutil.copytree(finished.wf.root, root, symlinks=True)
    cfg = copy.deepcopy(finished.config)
    cfg["n_users"] = 1  # user_002's jobs leave the DAG; their ledgers stay on disk
    cfg["top_k"] = [5, 3]  # new sweep jobs
    cfg["llm"]["roles"] = {"judge": {"temperature": 0.3}}  # the judge jobs rerun
    wf = Workflow(root, cfg)
    wf.run(TARGET)
    dag = Dag(wf.run("--detailed-summary", TARGET).stdout)
    logs = [j.split("|", 1)[1].split(",") for j in dag.rule]
    current = {root / ls[1] for ls in logs if len(ls) == 2}
    on_disk = {f for d in (wf.results, *wf.users) for f in (d / "usage").rglob("*.csv")}
    assert any("user_002" in p.name for p in on_disk - current), "nothing stale to leave out"
    assert any("judge_sweep" in str(p) for p in on_disk & current)
    table5 = (wf.results / "table5.csv").read_text()
    want = tables.table5(ledger_rows(sorted(current)), cfg["systems"])
    assert table5 == want.to_csv(index=False)
    # Every file under usage/ would have counted user_002's calls too.
    every = tables.table5(ledger_rows(sorted(on_disk)), cfg["systems"])
    assert table5 != every.to_csv(index=False)


def test_every_prompt_or_config_file_a_job_reads_is_a_declared_input(finished):
    # The cases above derive their expectations from declared inputs; this closes the gap: a
    # file a job opens without declaring it would change its output without a rerun.
    lines = (finished.wf.root / READS).read_text().splitlines()
    jobs = [r for r in map(json.loads, lines) if r["rule"] is not None]
    # Every job but the run's copies of its users (rule users: `cp`, no Python, no other file)
    copies = Counter(rule for rule in finished.dag.rule.values() if rule != "users")
    assert Counter(r["rule"] for r in jobs) == copies
    assert any("prompts/slotfill.md" in r["reads"] for r in jobs)  # the log sees reads
    undeclared = sorted(
        (r["rule"], path)
        for r in jobs
        for path in r["reads"]
        if path not in {os.path.normpath(d) for d in r["declared"]}
    )
    assert not undeclared, undeclared
