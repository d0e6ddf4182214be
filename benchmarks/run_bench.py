"""Benchmark harness: wall time vs the critical path, calls per user, DAG build, rerun precision.

    python benchmarks/run_bench.py --users 2 --systems nomem longctx_full --dims 1/1/1/1/1

What it does, in a temp copy of the workflow (never in the checkout's results/):
1. starts ``memprobe fake-endpoint --latency L`` (every completion waits L seconds, each in its
   own thread: unlimited concurrency, like a hosted model without rate limits);
2. runs ``snakemake tables`` (the run's table2.csv, docs/runs.md) at the given scale
   with a fresh LLM cache, timing it;
3. computes the critical-path lower bound from the SAME run: the file-level job DAG comes from
   ``snakemake --detailed-summary`` (each output's rule and inputs); each job weighs the time
   during which at least one of its LLM calls was in flight (the union of the ledger intervals
   [ts - latency_s, ts] of its rows); the bound is the heaviest path through the DAG;
4. counts calls and tokens per user per system from the ledger, audits them against the
   protocol (``estimate_audit.audit``) and against ``memprobe estimate``'s prediction;
5. times ``snakemake -n`` on the paper config (DAG build);
6. for every file in prompts/: edits it, dry-runs, and compares the scheduled jobs with the
   file's dependent set in the DAG (the jobs declaring it as an input and everything
   downstream of them), then restores it;
7. CPU: every job writes its process CPU, its start-up CPU and the CPU of its LLM calls (paid,
   replayed) to ``MEMPROBE_JOB_STATS`` (memprobe/llm/cpu_cost.py); the run's children's rusage
   gives Snakemake's own share and /proc the fake endpoint's. A second pass reruns every job
   on the warm cache (``--forceall``): every call a replay;
8. writes the report (default ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memprobe import CATEGORIES  # noqa: E402
from memprobe.config.loading import load_config  # noqa: E402
from memprobe.report import estimate_audit, estimate_calls, estimate_rates  # noqa: E402
from memprobe.report.jobdag import Dag, critical_path, job_counts  # noqa: E402

PARTS = ("Snakefile", "rules", "scripts", "prompts", "config", "profiles", "envs")
BIN = Path(sys.executable).parent
SNAKEMAKE = str(BIN / "snakemake")
MEMPROBE = str(BIN / "memprobe")
TARGET = "tables"  # the rule: every table of the config's run folder (docs/runs.md)


# -- setup ------------------------------------------------------------------------------------
def copy_workflow(dest: Path) -> None:
    for part in PARTS:
        src = ROOT / part
        if src.is_dir():
            shutil.copytree(src, dest / part, dirs_exist_ok=True)
        elif src.exists():
            shutil.copy2(src, dest / part)


def start_endpoint(latency: float, *extra: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [MEMPROBE, "fake-endpoint", "--port", "0", "--latency", str(latency), *extra],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline() if proc.stdout else ""
    m = re.search(r"(http://\S+/v1)", line)
    if not m:
        proc.kill()
        raise SystemExit(f"run_bench: the fake endpoint did not start ({line!r})")
    return proc, m.group(1)


def bench_config(args: argparse.Namespace, base_url: str) -> dict:
    dims = [int(x) for x in args.dims.split("/")]
    return {
        "seed": args.seed,
        "n_users": args.users,
        "dims_per_category": dict(zip(CATEGORIES, dims, strict=True)),
        "systems": args.systems,
        "modes": ["dump_all", "retrieve"],
        "top_k": 5,
        "max_turns": args.max_turns,
        "llm": {
            "backend": "openai",
            "base_url": base_url,
            "model": "bench-model",
            "api_key_env": "MEMPROBE_BENCH_KEY",
            "concurrency": args.concurrency,
            "cache_dir": ".cache/llm",
        },
    }


def snakemake(
    wd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [SNAKEMAKE, *args],
        cwd=wd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if check and proc.returncode != 0:
        raise SystemExit(f"run_bench: snakemake {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return proc


# -- CPU ------------------------------------------------------------------------------------
def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a live process (/proc/PID/stat fields 14, 15)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _descendants(root: int) -> dict[int, tuple[str, float]]:
    """Live descendants of ``root``: pid -> (command line, CPU seconds so far)."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        kids = [c for c, p in parent.items() if p == pid and c not in tree]
        tree.update(kids)
        todo += kids
    out = {}
    for pid in tree:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        out[pid] = (cmd, proc_cpu(pid))
    return out


class Helpers(threading.Thread):
    """Samples, every second, the CPU of Snakemake's own process and of the run's embedding
    server: the server is stopped before anyone could read its rusage."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.cpu: dict[int, float] = {}
        self.embed: set[int] = set()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(1.0):
            self.cpu[self.root] = max(self.cpu.get(self.root, 0.0), proc_cpu(self.root) or 0.0)
            for pid, (cmd, cpu) in _descendants(self.root).items():
                if "embed_service" in cmd and cpu == cpu:
                    self.embed.add(pid)
                    self.cpu[pid] = cpu

    @property
    def snakemake(self) -> float:
        return self.cpu.get(self.root, 0.0)

    @property
    def embedding(self) -> float:
        return sum(self.cpu[p] for p in self.embed)


class CpuRun:
    """One timed ``snakemake`` pass with the CPU of its jobs, of Snakemake and of the endpoint."""

    def __init__(self, wd: Path, endpoint: subprocess.Popen, args: list[str], name: str) -> None:
        stats = wd / f"job-stats-{name}"
        ep0, ch0, t0 = proc_cpu(endpoint.pid), children_cpu(), time.monotonic()
        proc = subprocess.Popen(
            [SNAKEMAKE, *args],
            cwd=wd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "MEMPROBE_JOB_STATS": str(stats)},
        )
        helpers = Helpers(proc.pid)
        helpers.start()
        err = proc.communicate()[1]
        helpers.done.set()
        helpers.join()
        if proc.returncode != 0:
            raise SystemExit(f"run_bench: snakemake {' '.join(args)} failed:\n{err[-3000:]}")
        self.wall = time.monotonic() - t0
        self.snakemake_cpu, self.embedding = helpers.snakemake, helpers.embedding
        self.children = children_cpu() - ch0  # snakemake + its shells + every job
        self.endpoint = proc_cpu(endpoint.pid) - ep0
        records = [json.loads(f.read_text()) for f in sorted(stats.glob("*.json"))]
        # Snakemake's own process imports the library too: its CPU is not a job's.
        self.jobs = [r for r in records if r["rule"] != "snakemake"]
        self.name = name


def _ms(cpu: float, n: float) -> str:
    return f"{1000 * cpu / n:.1f}" if n else "-"


def cpu_table(run: CpuRun) -> list[str]:
    """CPU per job start-up and per LLM call, by stage (rule)."""
    by: dict[str, Counter] = defaultdict(Counter)
    for j in run.jobs:
        c = by[j["rule"]]
        c["jobs"] += 1
        c["cpu"] += j["cpu_s"]
        c["startup"] += j["startup_cpu_s"]
        c["clients"] += j.get("client", 0)
        c["client_cpu"] += j.get("client_cpu_s", 0.0)
        for kind in ("paid", "replayed", "failed"):
            c[kind] += j.get(kind, 0)
            c[f"{kind}_cpu"] += j.get(f"{kind}_cpu_s", 0.0)
    total: Counter = Counter()
    for c in by.values():
        total.update(c)
    rows = [
        "| stage | jobs | start-up CPU ms/job | client build ms | paid calls | CPU ms/paid call "
        "| replayed calls | CPU ms/replayed call | other CPU s | job CPU s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for rule, c in sorted(by.items()) + [("**all jobs**", total)]:
        calls = c["paid_cpu"] + c["replayed_cpu"] + c["failed_cpu"]
        other = c["cpu"] - c["startup"] - calls
        paid = c["paid_cpu"] - c["client_cpu"]  # a client is built inside the first paid call
        rows.append(
            f"| {rule} | {c['jobs']} | {_ms(c['startup'], c['jobs'])} "
            f"| {_ms(c['client_cpu'], c['clients'])} | {c['paid']} | {_ms(paid, c['paid'])} "
            f"| {c['replayed']} | {_ms(c['replayed_cpu'], c['replayed'])} | {other:.1f} "
            f"| {c['cpu']:.1f} |"
        )
    jobs_cpu = total["cpu"]
    rows += [
        "",
        f"Whole pass: wall {run.wall:.1f} s; CPU {jobs_cpu:.1f} s in jobs, "
        f"{run.snakemake_cpu:.1f} s in Snakemake's main process, "
        f"{run.embedding:.1f} s in the embedding server, "
        f"{run.children - jobs_cpu - run.snakemake_cpu - run.embedding:.1f} s elsewhere "
        "(job shells, helpers), "
        f"{run.endpoint:.1f} s in the fake endpoint (same machine); "
        f"{(run.children + run.endpoint) / run.wall:.2f} cores busy on average "
        f"of {os.cpu_count()}.",
    ]
    return rows


# -- rerun precision ------------------------------------------------------------------------
def scheduled(wd: Path, cfg: str) -> Counter:
    proc = snakemake(wd, TARGET, "-n", "--cores", "1", "--configfile", cfg)
    return Counter(job_counts(proc.stdout + proc.stderr))


def rerun_precision(wd: Path, cfg: str, dag: Dag) -> list[tuple[str, Counter, Counter]]:
    out = []
    for f in sorted((wd / "prompts").iterdir()):
        rel = f"prompts/{f.name}"
        old = f.read_bytes()
        f.write_bytes(old + b"\n# benchmark edit\n")
        try:
            got = scheduled(wd, cfg)
        finally:
            f.write_bytes(old)
        out.append((rel, dag.dependents(rel), got))
    return out


# -- report ---------------------------------------------------------------------------------
def per_user_table(ledger: list[dict], cfg) -> list[str]:
    agg: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0, 0])
    for r in ledger:
        key = r["system"] or "(per user)"
        a = agg[key]
        a[0] += 1
        a[1] += r["cached"] == "false"
        a[2] += int(r["prompt_tokens"] or 0)
        a[3] += int(r["completion_tokens"] or 0)
    n = cfg.n_users
    rows = [
        "| system | calls/user | paid/user | prompt tok/user | completion tok/user |",
        "|---|---:|---:|---:|---:|",
    ]
    for k, (c, paid, p, q) in sorted(agg.items()):
        rows.append(f"| {k} | {c / n:.1f} | {paid / n:.1f} | {p / n:.0f} | {q / n:.0f} |")
    return rows


def import_seconds(stmt: str) -> float:
    """Cumulative import time (``python -X importtime``) of the top-level modules in ``stmt``."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", stmt], capture_output=True, text=True, cwd=ROOT
    )
    tops = {m.strip() for m in stmt.removeprefix("import ").split(",")}
    total = 0
    for line in proc.stderr.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[2] in tops:
            total += int(parts[1])
    return total / 1e6


def job_spans(wd: Path) -> dict[str, tuple[int, int]]:
    """Each job's start and end (seconds after the first start), by log file, from the run's
    Snakemake log: where a chain job spent time outside its LLM calls."""
    logs = sorted((wd / ".snakemake" / "log").glob("*.snakemake.log"))
    if not logs:
        return {}
    stamp = re.compile(r"^\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]")
    now = None
    started: dict[str, tuple] = {}
    by_id: dict[str, str] = {}
    ended: dict[str, object] = {}
    pending = None
    for line in logs[0].read_text().splitlines():
        if m := stamp.match(line):
            now = time.strptime(re.sub(" +", " ", m.group(1)), "%a %b %d %H:%M:%S %Y")
        elif re.match(r"(local)?rule \w+:", line):
            pending = {"start": now}
        elif pending is not None and (m := re.match(r"\s+log: ([^\s,]+)", line)):
            pending["log"] = m.group(1)
        elif pending is not None and (m := re.match(r"\s+jobid: (\d+)", line)):
            if "log" in pending:
                started[pending["log"]] = pending["start"]
                by_id[m.group(1)] = pending["log"]
            pending = None
        elif m := re.match(r"Finished jobid: (\d+)", line):
            if m.group(1) in by_id:
                ended[by_id[m.group(1)]] = now
    if not started:
        return {}
    t0 = min(time.mktime(t) for t in started.values())
    return {
        log: (int(time.mktime(st) - t0), int(time.mktime(ended[log]) - t0))
        for log, st in started.items()
        if log in ended
    }


def chain_rows(chain: list[tuple[str, float]], spans: dict[str, tuple[int, int]]) -> list[str]:
    rows, prev_end = [], None
    for job, weight in chain:
        rule, logf = job.split("|")[0], job.split("|")[1].split(",")[0]
        start, end = spans.get(logf, ("?", "?"))
        queued = start - prev_end if isinstance(start, int) and prev_end is not None else "-"
        rows.append(f"| {logf} ({rule}) | {weight:.1f} | {start}, {end} | {queued} |")
        prev_end = end if isinstance(end, int) else None
    return rows


def scale_args(ap: argparse.ArgumentParser, concurrency: int) -> None:
    """The run's scale and the fake endpoint's latency (this harness and rate_limit_bench)."""
    ap.add_argument("--users", type=int, default=2)
    ap.add_argument("--systems", nargs="+", default=["nomem", "longctx_full"])
    ap.add_argument("--dims", default="1/1/1/1/1", help="dims per category, e.g. 7/7/7/5/5")
    ap.add_argument("--max-turns", type=int, default=25)
    ap.add_argument("--latency", type=float, default=1.0, help="seconds per completion")
    ap.add_argument("--cores", type=int, default=32, help="snakemake --cores (job slots)")
    ap.add_argument("--concurrency", type=int, default=concurrency, help="llm.concurrency")
    ap.add_argument("--seed", type=int, default=0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    scale_args(ap, concurrency=32)
    ap.add_argument("--paper-config", help="config for the DAG-build timing (config/paper.yaml)")
    ap.add_argument("--no-rerun", action="store_true", help="skip the rerun-precision pass")
    ap.add_argument("--no-replay", action="store_true", help="skip the warm-cache CPU pass")
    ap.add_argument("--no-dag-build", action="store_true", help="skip the paper DAG-build timing")
    ap.add_argument(
        "--no-priority",
        action="store_true",
        help="drop the rules' priority: lines in the copy (the scheduling baseline)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temp workflow copy")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    args = ap.parse_args()

    wd = Path(tempfile.mkdtemp(prefix="memprobe-bench-"))
    copy_workflow(wd)
    if args.no_priority:
        for smk in (wd / "rules").glob("*.smk"):
            smk.write_text(re.sub(r"(?m)^\s+priority: .*\n", "", smk.read_text()))
    endpoint, base_url = start_endpoint(args.latency)
    try:
        raw = bench_config(args, base_url)
        (wd / "bench.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
        cfg = load_config(raw)
        run_args = [TARGET, "--cores", str(args.cores), "--resources", f"llm_slots={args.cores}"]
        run_args += ["--configfile", "bench.yaml"]
        paid_run = CpuRun(wd, endpoint, run_args, "paid")
        wall = paid_run.wall
        spans = job_spans(wd)
        summary = snakemake(wd, "--detailed-summary", TARGET, "--configfile", "bench.yaml")
        dag = Dag(summary.stdout)
        # The run's folder and the users' folders it made (docs/runs.md: a fresh copy has no other)
        results = wd / "results" / cfg.run.name
        users = sorted((wd / "results" / "users").glob("*"))
        ledger = estimate_rates.read_ledger(results, *users)
        bound, chain = critical_path(dag, ledger)
        audit = estimate_audit.audit(results, cfg)
        rates = estimate_rates.observed(results, cfg, users) or estimate_rates.priors(cfg)
        predicted = estimate_calls.protocol_calls(cfg, rates)
        # Every job again on the warm cache: what a resumed or re-scored run costs per call.
        replay_run = (
            None if args.no_replay else CpuRun(wd, endpoint, [*run_args, "--forceall"], "replay")
        )

        paper = Path(args.paper_config) if args.paper_config else wd / "config" / "paper.yaml"
        dag_note = ""
        if not paper.exists():
            paper = wd / "paper-standin.yaml"
            paper.write_text(yaml.safe_dump(paper_standin(), sort_keys=False))
            dag_note = " (config/paper.yaml absent: a stand-in with the paper's scale)"
        # In a clean copy (no results: every job is built), after the run has ended, best of 3:
        # with --quiet (the DAG build) and without (plus printing every job).
        clean = wd / "dag-build"
        clean.mkdir()
        copy_workflow(clean)
        dry_args = (TARGET, "-n", "--cores", "1", "--configfile", str(paper))
        dag_s, dag_print_s = [], []
        dry = subprocess.CompletedProcess([], 0, "", "")
        for _ in range(0 if args.no_dag_build else 3):
            t1 = time.monotonic()
            snakemake(clean, *dry_args, "--quiet")
            dag_s.append(time.monotonic() - t1)
            t1 = time.monotonic()
            dry = snakemake(clean, *dry_args)
            dag_print_s.append(time.monotonic() - t1)
        n_jobs = re.search(r"^total\s+(\d+)", dry.stdout + dry.stderr, re.M)

        precision = [] if args.no_rerun else rerun_precision(wd, "bench.yaml", dag)
        # Job start-up: what every script imports, and what the eager openai/httpx import
        # (before memprobe.llm.client imported them lazily) added to it.
        imports = {
            stmt: min(import_seconds(stmt) for _ in range(3))
            for stmt in (
                "import memprobe.workflow.step",
                "import memprobe.workflow.step, openai, httpx2",
                "import memprobe.workflow.step, memprobe.report.tables",
                "import memprobe.workflow.step, memprobe.agents.longctx",
            )
        }
    finally:
        endpoint.terminate()
        endpoint.wait(timeout=10)
        if not args.keep:
            shutil.rmtree(wd, ignore_errors=True)

    cmd = "python benchmarks/run_bench.py " + " ".join(sys.argv[1:])
    lines = [
        "# Benchmark results",
        "",
        "Reproduce (from the repository root, with the venv active):",
        "",
        f"    {cmd}",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.cpu_count()} CPU "
        f"cores (load average {os.getloadavg()[0]:.1f} at the end; the cores were shared).",
        "",
        "## Wall time vs the critical path",
        "",
        f"Scale: {cfg.n_users} users x {len(cfg.systems)} systems ({', '.join(cfg.systems)}), "
        f"{cfg.n_dims} dims/user, max_turns {cfg.max_turns}, both modes, k 5; fake endpoint "
        f"latency {args.latency:g} s per call, unlimited concurrency; `--cores {args.cores}`, "
        f"{'no job priorities (baseline), ' if args.no_priority else ''}"
        f"`llm_slots={args.cores}`, `llm.concurrency: {args.concurrency}`.",
        "",
        "| wall time (s) | critical-path bound (s) | ratio | jobs |",
        "|---:|---:|---:|---:|",
        f"| {wall:.1f} | {bound:.1f} | {wall / bound:.2f} | {len(dag.rule)} |",
        "",
        "**Critical-path bound, defined.** The job DAG is the file-level DAG of the run "
        "(`snakemake --detailed-summary`: each output's rule and input files). A job's weight is "
        "its LLM time from the same run's ledger: the length of the union of the intervals "
        "`[ts - latency_s, ts]` of its paid calls and of its replays that waited for a parallel "
        "job's identical call (time during which at least one of its calls "
        "was in flight; for a job whose calls are sequential this is the sum of their "
        "latencies, for a job that maps calls concurrently it is the rounds it needed). Jobs "
        "without LLM calls weigh 0. The bound is the heaviest path through the DAG: what the run "
        "would take with free CPU, zero job start-up and zero scheduling delay.",
        "",
        "The heaviest path:",
        "",
        "`queued` = the job's start minus the end of the path's previous job (time it waited "
        "for a job slot, or for another input).",
        "",
        "| job | LLM time (s) | job start, end (s into the run; Snakemake's log, 1 s steps) "
        "| queued (s) |",
        "|---|---:|---|---:|",
        *chain_rows(chain, spans),
        "",
        "## CPU per job start-up and per LLM call, by stage",
        "",
        "Each job's own accounting (memprobe/llm/cpu_cost.py): `start-up` = its process CPU until "
        "its first LLM client was built (interpreter, imports, config, inputs; the whole job for "
        "a stage without LLM calls); `client build` = importing openai and building its client "
        "(once per role and job; counted apart from the calls); `CPU ms/paid call` and "
        "`/replayed call` = CPU of the calling thread inside the LLM layer (request, cache key, "
        "cache read/write, HTTP, validation, ledger row), waits excluded; `other` = the job's "
        "remaining CPU (its own logic). Machine: "
        f"{os.cpu_count()} cores, shared.",
        "",
        f"### Pass 1: fresh cache (`{' '.join(run_args)}`)",
        "",
        *cpu_table(paid_run),
        "",
        *(
            [
                "### Pass 2: every job again on the warm cache (`--forceall`): all replays",
                "",
                *cpu_table(replay_run),
                "",
            ]
            if replay_run
            else []
        ),
        "## Calls and tokens per user per system (ledger)",
        "",
        *per_user_table(ledger, cfg),
        "",
        "`(per user)` = persona, bank, tasks, Stage 0 oracle (shared by every system).",
        "",
        "## Calls per user per system vs the protocol",
        "",
        "`protocol` = the calls the protocol requires given what happened in this run (turns "
        "taken; slot-fills over a non-empty memory; judge calls for labels that are not "
        '"unknown"; attribution Stage 1/2 reached); `ledger` = rows in the ledger; extras are '
        "re-asks after an invalid reply and re-sampled invalid replies.",
        "",
        "| system | user | protocol | ledger | re-asks | invalid | unexplained | excess |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
        *[
            f"| {a.system} | {a.user} | {a.protocol} | {a.ledger} | {a.reasks} | {a.invalid} "
            f"| {a.unexplained} | {'-' if a.excess is None else f'{100 * a.excess:.1f}%'} |"
            for a in audit
        ],
        "",
        "`memprobe estimate` with this run's rates (calls per user):",
        "",
        "| system | role | predicted calls/user |",
        "|---|---|---:|",
        *[f"| {s} | {r} | {v:.1f} |" for (s, r), v in predicted.items()],
        "",
    ]
    if dag_s:
        lines += [
            "## DAG build",
            "",
            f"`snakemake -n {TARGET} --configfile {paper.name}`{dag_note}, "
            f"{n_jobs.group(1) if n_jobs else '?'} jobs, in a copy with no results, 3 runs each:",
            "",
            "| command | seconds (best) | all runs |",
            "|---|---:|---|",
            f"| `--quiet` (the DAG build) | {min(dag_s):.1f} | "
            f"{', '.join(f'{x:.1f}' for x in dag_s)} |",
            f"| default output (also prints all {n_jobs.group(1) if n_jobs else '?'} jobs) | "
            f"{min(dag_print_s):.1f} | {', '.join(f'{x:.1f}' for x in dag_print_s)} |",
            "",
        ]
    lines += [
        "## Job start-up (imports)",
        "",
        "`python -X importtime -c STMT`, cumulative seconds of the top-level modules, best of 3. "
        "`memprobe.llm.client` imports openai/httpx at the first call only; the second row is what "
        "every job paid before (eager import), and what a job that calls an LLM still pays.",
        "",
        "| statement | seconds |",
        "|---|---:|",
        *[f"| `{stmt}` | {sec:.2f} |" for stmt, sec in imports.items()],
        "",
    ]
    if precision:
        lines += [
            "## Rerun precision",
            "",
            "Per prompt file: append a line, `snakemake -n`, compare the scheduled jobs per rule "
            "with the file's dependent set in the DAG (jobs declaring it as an input + "
            "everything downstream), restore.",
            "",
            "| prompt file | dependent set | scheduled | equal |",
            "|---|---|---|---|",
        ]
        for rel, want, got in precision:
            fmt = lambda c: ", ".join(f"{k} {v}" for k, v in sorted(c.items())) or "-"  # noqa: E731
            lines.append(f"| {rel} | {fmt(want)} | {fmt(got)} | {'yes' if want == got else 'NO'} |")
        lines.append("")
    lines += [
        "## Calls the protocol makes pointless (skipped)",
        "",
        '- slot-fill over an empty store (dump_all) or an empty top-k list (retrieve) is "unknown" '
        "without a call (`called: false` in slotfill.json);",
        '- the judge scores a literal "unknown" label 0 by its rubric without a call '
        "(`compat.judge_unknown_labels: true` restores the release's call).",
        "",
    ]
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


def paper_standin() -> dict:
    return {
        "seed": 0,
        "n_users": 50,
        "dims_per_category": dict(zip(CATEGORIES, (7, 7, 7, 5, 5), strict=True)),
        "systems": ["nomem", "longctx_full", "amem", "mem0"],
        "modes": ["dump_all", "retrieve"],
        "top_k": 5,
        "max_turns": 25,
        "llm": {"backend": "openai", "base_url": "http://127.0.0.1:1/v1"},
    }


if __name__ == "__main__":
    main()
