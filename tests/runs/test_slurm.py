"""The SLURM route on a real SLURM (docs/cluster.md): Debian's slurm-wlm on this host, started by
``.ci/local-slurm`` (slurmctld and slurmd, no accounting database, a typed GPU gres
``gpu:a100:1`` backed by /dev/null), driven by the real snakemake-executor-plugin-slurm
through ``profiles/slurm`` as shipped.

One smoke run (1 user, nomem and memt on the Mem-T stand-in, 2 turns) goes through SLURM while
it is disturbed three ways, each the way a cluster disturbs a run: slurmd dies during the user's
group job (persona, bank, tasks) until slurmctld declares the node failed (its jobs end
NODE_FAIL), the memt rollout is cancelled with ``scancel`` while it runs, and the submitting
Snakemake is killed while a scoring group job (preference, slot-fill, judge, attribution) runs
(``snakemake --unlock`` and the same command resume it). The same config run
with the local executor is the reference: the tables must be the same, and the endpoints
must have been asked the same requests, each as often (nothing paid twice).
Where no SLURM answers these tests are skipped (tests/helpers/slurm.py), except in CI.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from memprobe.llm import rate_limit
from memprobe.serving import node_embed
from memprobe.testing.background import Background
from memprobe.testing.memt_standin import StandIn
from memprobe.workflow import shell_job
from tests.helpers import slurm
from tests.helpers.endpoint import Endpoint
from tests.helpers.workflow import SNAKEMAKE, Workflow, tiny_config

pytestmark = pytest.mark.workflow

SLURM = ["--executor", "slurm", "--workflow-profile", "profiles/slurm"]
CAP = 2  # llm_slots: LLM jobs at once
MEMT_ROLLOUT = "rule_rollout_wildcards_memt_user_001"
USER_GROUP = "user-user_001"  # profiles/slurm's groups: persona, bank and tasks in one job
HOLD_S = 90  # the fake endpoint's reply delay while the node fails (it is declared in ~35 s)
GPU_TRES = "gres:gpu:a100:1"
MEMT_GPU = ("rollout", "probe")  # memt's rules that hold the GPU, and encode
FALLBACK = "loading the embedding model in this job"  # memprobe/serving/embeddings.py


def count_requests(background: Background) -> list[str]:
    """Every POST body the server gets, hashed, in order."""
    seen: list[str] = []
    base = background.server.RequestHandlerClass

    class Counting(base):  # type: ignore[misc, valid-type]
        def do_POST(self) -> None:
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(hashlib.sha256(data).hexdigest())
            self.rfile = io.BytesIO(data)
            super().do_POST()

    background.server.RequestHandlerClass = Counting
    return seen


@dataclass
class Servers:
    endpoint: Endpoint
    standin: StandIn
    asked: list[str]  # the fake endpoint's requests
    memt_asked: list[str]  # the stand-in's

    def requests(self) -> Counter:
        return Counter(self.asked) + Counter(self.memt_asked)

    def reset(self) -> None:
        self.asked.clear()
        self.memt_asked.clear()


@pytest.fixture(scope="module")
def servers():
    ep, standin = Endpoint(), StandIn()
    yield Servers(ep, standin, count_requests(ep), count_requests(standin))
    ep.close()
    standin.close()


def smoke_config(servers: Servers) -> dict:
    raw = tiny_config(servers.endpoint.base_url, systems=["nomem", "memt"], n_users=1)
    raw["max_turns"] = 2
    raw.setdefault("system_settings", {})["memt"] = {
        "endpoint": servers.standin.base_url,
        "gpu_model": "a100",
        "cpus_per_gpu": 2,
    }
    return raw


def tables(wf: Workflow) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(wf.results.glob("*.csv"))}


@dataclass
class Reference:
    tables: dict[str, str]
    requests: Counter
    wall_s: float


@pytest.fixture(scope="module")
def reference(servers, tmp_path_factory) -> Reference:
    """The same config with the local executor."""
    slurm.require()
    wf = Workflow(tmp_path_factory.mktemp("local"), smoke_config(servers))
    servers.reset()
    t0 = time.monotonic()
    wf.run("tables", "--cores", "8", timeout=900)
    return Reference(tables(wf), servers.requests(), time.monotonic() - t0)


def calls(table5: str) -> int:
    return sum(int(row["calls"]) for row in csv.DictReader(io.StringIO(table5)))


BILLED = ("paid_calls", "prompt_tokens", "completion_tokens", "total_tokens")


def unbilled(full: str, short: str) -> int:
    """How many paid calls Table 5 ``short`` lacks against ``full``: rows that differ only
    in fewer paid calls and tokens (anything else differing fails here)."""
    rows = [list(csv.DictReader(io.StringIO(t))) for t in (full, short)]
    assert [(r["system"], r["role"]) for r in rows[0]] == [
        (r["system"], r["role"]) for r in rows[1]
    ]
    lost = 0
    for a, b in zip(*rows, strict=True):
        rest = [k for k in a if k not in (*BILLED, "calls")]
        assert [a[k] for k in rest] == [b[k] for k in rest], (a, b)
        assert all(int(b[k]) <= int(a[k]) for k in BILLED), (a, b)
        assert (int(a["paid_calls"]) == int(b["paid_calls"])) == all(a[k] == b[k] for k in BILLED)
        lost += int(a["paid_calls"]) - int(b["paid_calls"])
    return lost


def finished_comments(log: str, comments: dict[int, str]) -> set[str]:
    """From a Snakemake log, the comments of the SLURM jobs it saw finish: a job's, by the
    SLURM job id it was submitted as; a group job's, once each of its jobs finished."""
    submitted = {
        int(a): int(b)
        for a, b in re.findall(r"Job (\d+) has been submitted with SLURM jobid (\d+)", log)
    }
    finished = {int(n) for n in re.findall(r"Finished jobid: (\d+)", log)}
    seen = {comments[submitted[n]] for n in finished if n in submitted}
    for group, block in slurm.group_blocks(log).items():
        if {int(n) for n in re.findall(r"jobid: (\d+)", block)} <= finished:
            seen |= {c for c in comments.values() if c.startswith(f"rule_{group}_")}
    return seen


def local_scripts(root: Path) -> list[int]:
    """The pids of the `script:` jobs (tables) running on this host in ``root``."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            if ".snakemake/scripts/" in cmdline and os.readlink(proc / "cwd") == str(root):
                pids.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return pids


def wait_until(what: str, test, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while not test():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:.0f}s")
        time.sleep(0.2)


@dataclass
class Disrupted:
    wf: Workflow
    started: float  # time.time() before the first invocation
    jobs: list[slurm.Job]  # every SLURM job of the run, across its invocations
    failed_node: list[int]  # the jobs running when the node was declared failed
    node_down_s: float
    restarted: subprocess.CompletedProcess  # .ci/local-slurm start, after the failure
    cancelled: int
    killed_at: int  # the last SLURM job id the killed Snakemake had submitted
    seen_finished: set[str]  # the comments of the jobs it had seen finish
    locked: subprocess.CompletedProcess  # the same command, before --unlock
    unlocked: subprocess.CompletedProcess
    second: str  # the log of the second invocation, killed while the tables job ran
    resumed: subprocess.CompletedProcess  # --unlock and the same command, once more
    requests: Counter

    def by_comment(self, comment: str) -> list[slurm.Job]:
        return [j for j in self.jobs if j.comment == comment]


@pytest.fixture(scope="module")
def disrupted(servers, reference, tmp_path_factory) -> Disrupted:
    slurm.require_local_cluster()
    wf = Workflow(tmp_path_factory.mktemp("slurm"), smoke_config(servers))
    cmd = [SNAKEMAKE, "tables", *SLURM, "--configfile", str(wf.config_path), "--jobs", "8"]
    cmd += ["--resources", f"llm_slots={CAP}", "--slurm-init-seconds-before-status-checks", "2"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}

    def again(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*cmd, *extra], cwd=wf.root, env=env, capture_output=True, text=True, timeout=900
        )

    def start(log: Path) -> subprocess.Popen:
        with open(log, "w") as out:
            return subprocess.Popen(cmd, cwd=wf.root, env=env, stdout=out, stderr=subprocess.STDOUT)

    servers.reset()
    started = time.time()
    watch = slurm.Watch(wf.root)
    logs = [wf.root / "first-invocation.log", wf.root / "second-invocation.log"]
    runs = [start(logs[0])]
    try:
        # 1. slurmd dies while the user's group job waits on a reply, until the node is declared
        # failed: the endpoint holds its replies meanwhile, so the job is still running then.
        watch.wait_for(
            "the user's group running",
            lambda j: j.group == USER_GROUP and j.state == "RUNNING",
            runs[0],
        )
        servers.endpoint.server.latency = HOLD_S
        asked = len(servers.asked)
        wait_until("the user group's request", lambda: len(servers.asked) > asked)
        running = [j.id for j in watch.snapshot() if j.state == "RUNNING"]
        node_down_s = slurm.fail_the_node()
        servers.endpoint.server.latency = 0.0
        restarted = slurm.start_local_slurm()
        # 2. the memt rollout, cancelled while it runs (after its first Mem-T call).
        rollout = watch.wait_for(
            "memt rollout running",
            lambda j: j.comment == MEMT_ROLLOUT and j.state == "RUNNING",
            runs[0],
        )
        wait_until("the rollout's first Mem-T call", lambda: bool(servers.memt_asked))
        subprocess.run(["scancel", str(rollout.id)], check=True, timeout=30)
        # 3. Snakemake killed while a scoring group runs; its jobs in flight run to their end.
        watch.wait_for(
            "scoring running", lambda j: "judge" in j.rules and j.state == "RUNNING", runs[0]
        )
        runs[0].send_signal(signal.SIGKILL)
        runs[0].wait(timeout=60)
        watch.idle()
        last_submitted = max(map(int, re.findall(r"SLURM jobid (\d+)", logs[0].read_text())))
        locked = again()
        unlocked = again("--unlock")
        # 4. The same command, killed again while its tables job (a localrule, run on this
        # host) writes; that job runs on to its end, its outputs left marked incomplete.
        runs.append(start(logs[1]))
        tables_log = wf.logs / "tables" / "tables.log"
        wait_until(
            "the tables job",
            lambda: (tables_log.exists() and local_scripts(wf.root)) or runs[1].poll() is not None,
        )
        assert runs[1].poll() is None, f"ended before its tables job: {logs[1].read_text()[-2000:]}"
        runs[1].send_signal(signal.SIGKILL)
        runs[1].wait(timeout=60)
        wait_until("the orphaned tables job's end", lambda: not local_scripts(wf.root))
        again("--unlock")
        resumed = again()
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
        watch.close()
    jobs = watch.snapshot()
    comments = {j.id: j.comment for j in jobs}
    killed_log = logs[0].read_text()
    return Disrupted(
        wf,
        started,
        jobs,
        running,
        node_down_s,
        restarted,
        rollout.id,
        last_submitted,
        finished_comments(killed_log, comments),
        locked,
        unlocked,
        logs[1].read_text(),
        resumed,
        servers.requests(),
    )


def test_a_cluster_without_accounting_finishes_a_one_job_run(servers, tmp_path):
    """The profile as shipped, on a SLURM without accounting whose sacct binary is there: the
    plugin would ask sacct and never see the job finish; the run switches it to squeue, says
    so in one line, and ends (memprobe/workflow/slurm_status.py)."""
    slurm.require()
    assert slurm.config().get("AccountingStorageType") == "accounting_storage/none"
    wf = Workflow(tmp_path, smoke_config(servers))
    t0 = time.monotonic()
    proc = wf.run("judge_calibration", *SLURM, "--jobs", "1", timeout=300, check=False)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stderr.splitlines() if "keeps no job accounting" in ln]
    assert lines == [
        "memprobe: this SLURM keeps no job accounting (accounting_storage/none): job states "
        "come from squeue, which lists a finished job for MinJobAge=600s (as "
        "--slurm-status-command squeue)"
    ]
    assert (wf.results / "judge_calibration.csv").exists()
    print(f"\none job through SLURM without accounting: {elapsed:.0f}s")


def test_only_memt_rollout_and_probe_ask_for_the_gpu(disrupted):
    """scontrol's record of every submission: memt's rollout and probe hold the typed GPU and
    its CPUs (memt.gpu_model, memt.cpus_per_gpu) with memt's size; every other job none, the
    ordinary size; all in the profile's partition and account."""
    gpu, other = [], []
    for job in disrupted.jobs:
        memt_gpu_job = job.rule in ("rollout", "probe") and "_memt_" in job.comment
        (gpu if memt_gpu_job else other).append(job)
        f = job.fields
        assert (f["Partition"], f["Account"]) == ("cpu", "memprobe"), f
        if job.group:  # Snakemake sizes a group: its jobs' runtimes add up
            continue
        size = ("16000M", "12:00:00") if memt_gpu_job else ("4000M", "02:00:00")
        assert (f["MinMemoryNode"], f["TimeLimit"]) == size, f
    assert {j.rule for j in gpu} == {"rollout", "probe"}
    assert all(j.gpu == GPU_TRES and j.fields["CpusPerTres"] == "gres:gpu:2" for j in gpu)
    assert other and not [j for j in other if j.gpu or j.fields.get("CpusPerTres")]
    assert {"score-memt-user_001", "score-nomem-user_001"} <= {j.group for j in other}
    assert "tables" not in {j.rule for j in disrupted.jobs}  # a localrule: never submitted


def test_llm_jobs_never_exceed_llm_slots(disrupted):
    """Snakemake caps the LLM jobs in flight on the whole cluster (llm_slots); each node's rate
    limiter takes 1/llm_slots of llm.rate_limit, in node-local files."""
    llm = [
        j
        for j in disrupted.jobs
        if j.rule not in ("users", "tables", "probe") or "_memt_" in j.comment
    ]
    times = [(j.fields["StartTime"], j.fields["EndTime"]) for j in llm]
    events = sorted([(s, 1) for s, _ in times] + [(e, -1) for _, e in times])
    cur = peak = 0
    for _, step in events:  # within a second, an end counts before a start
        cur += step
        peak = max(peak, cur)
    assert len(llm) >= 8 and 1 <= peak <= CAP, (peak, times)
    limits = [
        json.loads(p.read_text())["llm"].get("rate_limit")
        for p in (disrupted.wf.root / shell_job.CONFIG_DIR).glob("config-*.json")
    ]
    steps = [x for x in limits if x and x["state_dir"] == rate_limit.node_state_dir()]
    assert steps and all(float(x["share"]) == 1 / CAP for x in steps), limits


def test_the_tables_equal_the_local_runs_and_nothing_was_paid_twice(disrupted, reference):
    assert disrupted.resumed.returncode == 0, disrupted.resumed.stderr[-3000:]
    ours, local = tables(disrupted.wf), reference.tables
    # Table 5's calls count a job's replayed calls too: the cut-off jobs' next runs replayed
    # theirs. Every other cell, its paid calls and tokens included, is the local run's, but
    # for a cut-off job killed between caching a paid reply and billing it (cache first, so
    # that no rerun pays twice): at most one paid call short per cut-off job (docs/cluster.md).
    ours_calls, local_calls = (t.pop("table5.csv") for t in (ours, local))
    assert ours == local
    cut_off = len(disrupted.failed_node) + 1  # the jobs on the failed node, the cancelled one
    assert 0 <= unbilled(local_calls, ours_calls) <= cut_off
    assert calls(ours_calls) > calls(local_calls)
    # Every request the local run made; again only a request a job was cut off waiting for
    # (on the failed node, by scancel), at most once each: every call that had its reply was
    # replayed from the cache by the job's next run, also after the killed Snakemake.
    assert not reference.requests - disrupted.requests
    again = disrupted.requests - reference.requests
    assert set(again.values()) <= {1} and sum(again.values()) <= cut_off, again


def test_memt_s_jobs_encode_on_their_node_s_embedding_server(disrupted):
    """cluster_embedding.server: node (the default): memt's rollout and probe (Mem-T on an
    endpoint encodes with the run's embedder) send their texts to the node's server, started
    by the first of them (memprobe/serving/node_embed.py); no job loads the model itself."""
    folder = node_embed.node_dir()
    started = [p for p in folder.glob("*.log") if p.stat().st_mtime >= disrupted.started]
    assert started, f"no node embedding server started in {folder}"
    for rule in MEMT_GPU:  # they ran
        assert list((disrupted.wf.logs / rule / "memt").glob("*.log")), rule
    fell_back = [p for p in disrupted.wf.logs.rglob("*.log") if FALLBACK in p.read_text()]
    assert not fell_back, fell_back


def test_a_failed_node_s_jobs_are_resubmitted(disrupted):
    """slurmd killed while the user's group job runs: slurmctld declares the node failed after
    SlurmdTimeout, the group job ends NODE_FAIL, the plugin reports it failed and Snakemake
    resubmits it (the profile's retries), which runs once .ci/local-slurm started slurmd again
    and the node registered."""
    assert disrupted.restarted.returncode == 0, disrupted.restarted.stderr
    failed = [j for j in disrupted.jobs if j.id in disrupted.failed_node]
    assert USER_GROUP in {j.group for j in failed}
    for job in failed:
        assert job.state == "NODE_FAIL", job
        again = [j for j in disrupted.by_comment(job.comment) if j.id > job.id]
        assert [j.state for j in again] == ["COMPLETED"], (job, again)
    print(f"\nnode declared failed {disrupted.node_down_s:.0f}s after slurmd died")


def test_a_cancelled_rollout_is_resubmitted(disrupted):
    """scancel on the running memt rollout: CANCELLED, resubmitted once (the profile's
    retries), completed; its calls before the cancel were replayed (see the test above)."""
    rollouts = disrupted.by_comment(MEMT_ROLLOUT)
    assert [j.id for j in rollouts][0] == disrupted.cancelled
    assert [j.state for j in rollouts] == ["CANCELLED", "COMPLETED"], rollouts
    assert "RUNNING" in rollouts[0].states


def test_a_killed_snakemake_resumes_after_unlock(disrupted):
    """The submitting Snakemake killed while SLURM jobs run: they run to their end and stay
    done; the same command stops at its lock, `snakemake --unlock` lifts it, and the same
    command goes on without redoing any job. Killed again while its tables job (a localrule)
    writes: that job's outputs are left marked incomplete, and the next run redoes it
    (the profile's rerun-incomplete) instead of stopping."""
    assert disrupted.locked.returncode != 0
    assert "--unlock" in disrupted.locked.stderr, disrupted.locked.stderr[-2000:]
    assert disrupted.unlocked.returncode == 0, disrupted.unlocked.stderr[-2000:]
    first = {j.comment for j in disrupted.jobs if j.id <= disrupted.killed_at}
    later = {j.comment for j in disrupted.jobs if j.id > disrupted.killed_at}
    assert later and not first & later, first & later  # nothing submitted twice
    in_flight = first - disrupted.seen_finished  # running when it was killed
    assert any("judge" in slurm.rules_of(c) for c in in_flight), in_flight
    assert all(j.state == "COMPLETED" for c in in_flight for j in disrupted.by_comment(c))
    # the second kill: the tables job had started; the last run redid it and ended
    assert "localrule tables:" in disrupted.second
    assert disrupted.resumed.returncode == 0, disrupted.resumed.stderr[-3000:]
    assert "localrule tables:" in disrupted.resumed.stderr
