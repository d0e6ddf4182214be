"""A run inside an API's rate limit: wall time against its bound, 429s, calls lost, memory, CPU.

    python benchmarks/rate_limit_bench.py --users 2 --systems nomem longctx_full

Paper scale (50 users x the five systems, memt through its stand-in
(memprobe/testing/memt_standin.py, started here), 31 targets, up to 25 turns; about 110,000
calls to the provider and 50,000 to the stand-in: give it the cores its rate needs (on two,
its 48 Mem-T rollouts at once held it to about 420 requests a minute of the 1,500 below, on
their encodes; benchmarks/RESULTS.md):

    python benchmarks/rate_limit_bench.py --users 50 --dims 7/7/7/5/5 \\
        --systems nomem longctx_full amem mem0 memt --rpm 1500 --tpm 8000000 --latency 1 \\
        --llm-slots 48 --cores 48

In a temp copy of the workflow (benchmarks/run_bench.py's helpers), against
``memprobe fake-endpoint --limits rpm=R,tpm=T --latency L`` (a provider that answers 429 with
Retry-After past its limits and sends x-ratelimit-* headers), two passes on a fresh cache each:

1. **limited**: ``llm.rate_limit`` set to the provider's limits (every job of the run shares
   them, memprobe/llm/rate_limit.py), provider signals on;
2. **unlimited**: no ``llm.rate_limit``, provider signals off: only ``llm_slots`` (the brake
   before issue 29); ``--stop-unlimited-after S`` stops it at S seconds (Ctrl-C to Snakemake)
   and reports what it did until then.

``--no-limited`` / ``--no-unlimited`` skip a pass.

**The steady window** (``--window-min N``): every ``--sample-s`` (60) the bench reads the
endpoint's counters and the CPU of the run's processes; the window starts at the first sample
after ``--ramp-min`` (the users' generation, the first jobs' start-up) and lasts N minutes. Its
figures (requests admitted a minute, the share answered 429, CPU per paid call) are written as
soon as it ends, and ``--stop-after-window`` then stops the run (Ctrl-C to Snakemake, which
stops its jobs): a run longer than a session is measured on the way.

**Through SLURM** (``--executor slurm``): the same passes through ``--executor slurm
--workflow-profile profiles/slurm`` (``--jobs``, ``--slurm-init-s``: the plugin's first status
check after a submission), on the one-machine SLURM of ``.ci/local-slurm`` (docs/cluster.md).
The jobs run under slurmd, outside this bench's process tree: their CPU is not measured.

Each pass is also a record, ``benchmarks/results/<--name>.json`` (benchmarks/bench_record.py;
``--name`` unset: no record); RESULTS.md's records section is then made again from them
(benchmarks/results_md.py).

For each: wall time against the bound max(critical path, paid requests / RPM, their tokens /
TPM) (critical path: run_bench's, from the same run's DAG and ledger; requests and tokens: those
sent to the limited provider, not memt's writer calls to its stand-in), the share of requests
the endpoint answered 429, calls lost (calls that got no reply after every retry: a failed
job's ``no reply ... after N attempt(s)``), peak memory (the summed RSS of the run's process
tree, sampled every 0.5 s), disk used (results/ and the cache), CPU ms per paid call (every
process of the run over the paid calls) and Snakemake's own CPU; ``memprobe estimate``'s
prediction for the limited pass (before the run, from the priors, and after, from its rates);
and the DAG build of the paper-scale config.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_record  # noqa: E402
import results_md  # noqa: E402
import run_bench as rb  # noqa: E402

from memprobe.config.loading import set_dotted, snakemake_merge  # noqa: E402
from memprobe.config.protocols import PAPER_PROTOCOL  # noqa: E402
from memprobe.llm import cpu_cost  # noqa: E402
from memprobe.report import estimate, estimate_calls, estimate_rates, estimate_time  # noqa: E402
from memprobe.report.jobdag import Dag, critical_path  # noqa: E402
from memprobe.testing.memt_standin import StandIn  # noqa: E402

LOST = re.compile(r"no reply from .* after \d+ attempt\(s\)")
CONFIG = ("--configfile", "bench.yaml")
EMBED = "embed_service"  # the run's embedding server's command line


def kind_of(pid: int, root: int, cmd: bytes) -> str:
    """What a process of the run is, by its command line."""
    if pid == root:
        return "snakemake"
    words = cmd.split(b"\0")
    if EMBED.encode() in cmd:
        return "embedding server"
    if any(w.startswith(b"scripts/") for w in words[:3]):
        return "jobs"
    return Path(words[0].decode(errors="replace")).name or "?"


def tree_cpu(root: int) -> tuple[float, dict[int, tuple[str, float]]]:
    """CPU seconds of a process tree so far: every live process's own and its reaped
    children's (/proc/PID/stat utime, stime, cutime, cstime), so a job that has ended counts
    in its parent's; and each live process's kind and own CPU."""
    tick = os.sysconf("SC_CLK_TCK")
    total, live = 0.0, {}
    for pid in [root, *rb._descendants(root)]:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        own = (int(fields[11]) + int(fields[12])) / tick
        total += own + (int(fields[13]) + int(fields[14])) / tick
        live[pid] = (kind_of(pid, root, cmd), own)
    return total, live


def node_servers() -> dict[int, tuple[str, float]]:
    """A cluster run's node embedding servers (memprobe/serving/node_embed.py: started by a
    job, not Snakemake's descendants) and their CPU so far."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if EMBED.encode() in cmd and b"--idle-exit-s" in cmd:
            cpu = rb.proc_cpu(int(entry.name))
            if cpu == cpu:  # NaN: it ended since the listing
                found[int(entry.name)] = ("embedding server (node)", cpu)
    return found


@dataclass
class Sample:
    t: float  # seconds after the run started
    admitted: int  # the endpoint's counters so far
    rejected: int
    cpu_s: float  # the run's process tree so far (the endpoint not)
    endpoint_cpu_s: float


class Monitor(threading.Thread):
    """Every 0.5 s the peak summed RSS of the run's process tree and the CPU of its live
    processes by kind; every ``sample_s`` a :class:`Sample`."""

    def __init__(self, root: int, endpoint: int, base_url: str, sample_s: float) -> None:
        super().__init__(daemon=True)
        self.root, self.endpoint, self.base_url, self.sample_s = root, endpoint, base_url, sample_s
        self.peak = 0
        self.seen: dict[int, tuple[str, float]] = {}  # every process seen: its kind, its CPU
        self.samples: list[Sample] = []
        self.t0 = time.monotonic()
        self.done = threading.Event()
        self.errors = 0  # looks that failed (each retried)

    def sample(self) -> None:
        counts = stats(self.base_url)
        cpu, _ = tree_cpu(self.root)
        self.samples.append(
            Sample(
                round(time.monotonic() - self.t0, 1),
                counts["admitted"],
                counts["rejected"],
                round(cpu, 2),
                round(rb.proc_cpu(self.endpoint), 2),
            )
        )

    def run(self) -> None:
        # A failed look (the endpoint's stats slow to answer on a loaded machine, a process
        # gone mid-read) is retried at the next tick: a dead monitor would never see the
        # window end, and --stop-after-window would never stop the run.
        next_at = self.t0
        while True:
            try:
                pids = [self.root, *rb._descendants(self.root)]
                self.peak = max(self.peak, sum(rss(p) for p in pids))
                _, live = tree_cpu(self.root)
                live.update(node_servers())
                for pid, (kind, cpu) in live.items():  # the last CPU seen, the first kind:
                    known = self.seen.get(pid)  # an exited, unreaped one has no command line
                    self.seen[pid] = (known[0] if known and kind == "?" else kind, cpu)
                if time.monotonic() >= next_at:
                    self.sample()
                    next_at += self.sample_s
            except Exception as err:  # noqa: BLE001
                self.errors += 1
                print(f"rate_limit_bench: monitor: {err!r} (retried)", file=sys.stderr)
            if self.done.wait(0.5):
                return

    @property
    def kinds(self) -> dict[str, float]:
        """The CPU of the processes seen alive, by kind (one that lived under 0.5 s is missed:
        the rest of ``cpu_by_kind_s``)."""
        out: dict[str, float] = {}
        for kind, cpu in self.seen.values():
            out[kind] = out.get(kind, 0.0) + cpu
        return out

    def window(self, ramp_s: float, window_s: float) -> tuple[Sample, Sample] | None:
        """The window's first and last samples, once it has ended (None before)."""
        start = next((s for s in self.samples if s.t >= ramp_s), None)
        if start is None:
            return None
        end = next((s for s in self.samples if s.t >= start.t + window_s - 1.0), None)
        return (start, end) if end is not None else None


def rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def du(*paths: Path) -> int:
    return sum(f.stat().st_size for p in paths if p.exists() for f in p.rglob("*") if f.is_file())


def stats(base_url: str) -> dict[str, int]:
    root = base_url.rsplit("/v1", 1)[0]
    with urllib.request.urlopen(f"{root}/v1/rate-limit-stats", timeout=10) as resp:  # noqa: S310
        return json.loads(resp.read())


def run_args(args: argparse.Namespace) -> list[str]:
    """Snakemake's command line of a pass: the local executor, or SLURM's profile."""
    out = [rb.TARGET, "--resources", f"llm_slots={args.llm_slots}"]
    if args.executor == "slurm":
        out += ["--executor", "slurm", "--workflow-profile", "profiles/slurm"]
        out += ["--jobs", str(args.jobs or args.llm_slots)]
        out += ["--slurm-init-seconds-before-status-checks", str(args.slurm_init_s)]
        if args.max_jobs_per_timespan:
            out += ["--max-jobs-per-timespan", args.max_jobs_per_timespan]
    else:
        out += ["--cores", str(args.cores)]
    return [*out, *CONFIG, "--keep-going"]


def job_records(stats_dir: Path) -> list[dict]:
    return [json.loads(f.read_text()) for f in sorted(stats_dir.glob("*.json"))]


def job_parts(j: dict) -> dict[str, float]:
    """A job's own CPU (memprobe/llm/cpu_cost.py's record): start-up (interpreter, imports,
    config, inputs, until the first LLM client), the openai client's build, the LLM calls
    (paid, replayed: the client, cache, rate limiter, ledger, HTTP), the rest (the stage's and
    the memory system's own work, embedding requests included)."""
    calls = sum(j.get(f"{k}_cpu_s", 0.0) for k in ("paid", "replayed", "failed"))
    client = j.get("client_cpu_s", 0.0)  # inside the first paid call
    return {
        "start-up": j["startup_cpu_s"],
        "client build": client,
        "calls": calls - client,
        "other": j["cpu_s"] - j["startup_cpu_s"] - calls,
    }


def job_cpu(stats_dir: Path) -> dict[str, float]:
    out = {"jobs": 0.0, "start-up": 0.0, "client build": 0.0, "calls": 0.0, "other": 0.0}
    for j in job_records(stats_dir):
        out["jobs"] += 1
        for part, cpu in job_parts(j).items():
            out[part] += cpu
    return {k: round(v, 2) for k, v in out.items()}


def jobs_by_rule(stats_dir: Path) -> dict[str, dict[str, float]]:
    """Per rule: jobs, paid calls, and each part's CPU ms per job."""
    by: dict[str, dict[str, float]] = {}
    for j in job_records(stats_dir):
        c = by.setdefault(j["rule"], {"jobs": 0, "paid": 0})
        c["jobs"] += 1
        c["paid"] += j.get("paid", 0)
        for part, cpu in job_parts(j).items():
            c[part] = c.get(part, 0.0) + cpu
    per_job = {"jobs", "paid"}
    return {
        rule: {k: v if k in per_job else round(1000 * v / c["jobs"], 1) for k, v in c.items()}
        for rule, c in sorted(by.items())
    }


def cpu_by_kind(kinds: dict[str, float], jobs: dict[str, float], cpu: float, endpoint: float):
    """The run's CPU by process kind: Snakemake, the embedding server, the jobs (their own
    records, by part), job shells and other processes seen, and the rest (processes too short
    to be seen); the fake endpoint apart."""
    out = {k: v for k, v in kinds.items() if k != "jobs"}
    out.update({f"jobs: {k}": v for k, v in jobs.items() if k != "jobs"})
    out["unseen (short processes)"] = cpu - sum(out.values())
    out["fake endpoint (apart)"] = endpoint
    return {k: round(v, 2) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


def one_pass(args: argparse.Namespace, name: str, limited: bool) -> dict:
    wd = Path(tempfile.mkdtemp(prefix=f"memprobe-ratelimit-{name.split()[0]}-"))
    rb.copy_workflow(wd)
    limits = f"rpm={args.rpm},tpm={args.tpm}"
    endpoint, base_url = rb.start_endpoint(
        args.latency, "--limits", limits, "--outcomes", args.outcomes
    )
    standin = StandIn() if "memt" in args.systems else None  # Mem-T-4B's stand-in: no limit
    stats_dir = wd / "job-stats"
    try:
        raw = snakemake_merge([paper_protocol(), rb.bench_config(args, base_url)])
        if standin is not None:
            raw.setdefault("system_settings", {})["memt"] = {"endpoint": standin.base_url}
        raw["llm"]["max_attempts"] = args.max_attempts
        raw["llm"]["rate_limit"] = (
            {"requests_per_minute": args.rpm, "tokens_per_minute": args.tpm}
            if limited
            else {"provider_signals": False}
        )
        if args.share is not None and limited:
            raw["llm"]["rate_limit"]["share"] = args.share
        raw["progress"] = {"interval_s": args.progress_s}
        (wd / "bench.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
        cfg = estimate.load_configs([str(wd / "bench.yaml")])  # layered as the run's
        ch0, t0 = rb.children_cpu(), time.monotonic()
        ep0 = rb.proc_cpu(endpoint.pid)
        errlog = (wd / "snakemake.err").open("w")
        env = {**os.environ, "MEMPROBE_BENCH_KEY": "bench-key", cpu_cost.ENV: str(stats_dir)}
        proc = subprocess.Popen(
            [rb.SNAKEMAKE, *run_args(args)],
            cwd=wd,
            stdout=subprocess.DEVNULL,
            stderr=errlog,
            text=True,
            env=env,
            start_new_session=True,  # its own process group: a stop reaches its jobs too
        )
        monitor = Monitor(proc.pid, endpoint.pid, base_url, args.sample_s)
        monitor.start()
        ramp_s, window_s = args.ramp_min * 60, (args.window_min or 0) * 60
        cap = None if limited else args.stop_unlimited_after
        stopped = False
        while proc.poll() is None:
            try:
                time.sleep(1.0)
                over = cap is not None and time.monotonic() - t0 > cap
            except KeyboardInterrupt:  # the user's Ctrl-C stops the run as a cap would
                over = True
            ended = args.stop_after_window and monitor.window(ramp_s, window_s)
            if (over or ended) and not stopped:
                # A terminal's Ctrl-C: SIGINT to Snakemake and its jobs. Snakemake's local
                # executor does not stop running jobs itself: sent to Snakemake alone, the
                # rollouts ran on to their end (minutes after the window).
                os.killpg(proc.pid, signal.SIGINT)
                stopped = True
        wall = time.monotonic() - t0
        monitor.sample()  # the run's end
        monitor.done.set()
        monitor.join()
        errlog.close()
        err = (wd / "snakemake.err").read_text(errors="replace")
        if proc.returncode != 0 and not stopped:
            print(f"rate_limit_bench: the {name} pass failed:\n{err[-3000:]}", file=sys.stderr)
        cpu = rb.children_cpu() - ch0  # Snakemake and every process it started, reaped
        endpoint_cpu = rb.proc_cpu(endpoint.pid) - ep0
        counts = stats(base_url)
        results = wd / "results" / cfg.run.name  # docs/runs.md; its users in results/users/
        users = sorted((wd / "results" / "users").glob("*"))
        ledger = estimate_rates.read_ledger(results, *users)
        paid = [r for r in ledger if r.get("cached") == "false"]
        # The provider's limits bind only the calls sent to it: memt's writer calls go to its
        # stand-in (Mem-T-4B on its own server), which has none.
        served = cfg.system_settings.memt.model
        limited_rows = [r for r in paid if r.get("model") != served]
        tokens = sum(int(r["prompt_tokens"]) + int(r["completion_tokens"]) for r in limited_rows)
        logs = err + "".join(
            p.read_text(errors="replace") for p in (wd / "logs").rglob("*.log") if p.is_file()
        )
        critical = 0.0
        if not stopped:
            summary = rb.snakemake(
                wd, "--detailed-summary", rb.TARGET, "--configfile", "bench.yaml"
            )
            critical, _ = critical_path(Dag(summary.stdout), ledger)
        jobs = job_cpu(stats_dir)
        out = {
            "name": name,
            "ok": proc.returncode == 0,
            "stopped": stopped,
            "wall_s": wall,
            "critical_s": critical,
            "requests_s": len(limited_rows) / args.rpm * 60,
            "limited": len(limited_rows),
            "tokens_s": tokens / args.tpm * 60,
            "paid": len(paid),
            "tokens": tokens,
            "http_requests": counts["admitted"] + counts["rejected"],
            "admitted": counts["admitted"],
            "rejected": counts["rejected"],
            "lost": len(LOST.findall(logs)),
            "failed_jobs": err.count("Error in rule"),
            "peak_rss": monitor.peak,
            "disk": du(wd / "results", wd / ".cache"),
            "cpu_s": cpu,
            "endpoint_cpu_s": endpoint_cpu,
            "snakemake_cpu_s": monitor.kinds.get("snakemake", 0.0),
            "cpu_by_kind_s": cpu_by_kind(monitor.kinds, jobs, cpu, endpoint_cpu),
            "jobs_by_rule": jobs_by_rule(stats_dir),
            "jobs_measured": int(jobs["jobs"]),
            "samples": [s.__dict__ for s in monitor.samples],
            "window": window_figures(monitor, ramp_s, window_s) if args.window_min else None,
            "summary": next(
                (x for x in err.splitlines()[::-1] if x.startswith("memprobe summary")), ""
            ),
        }
        out["bound_s"] = max(out["critical_s"], out["requests_s"], out["tokens_s"])
        if limited and not stopped:
            slots = args.llm_slots
            prior = estimate_rates.priors(cfg)
            seen = estimate_rates.observed(results, cfg, users) or prior
            for key, rates in (("predicted_prior", prior), ("predicted_observed", seen)):
                lines = estimate_calls.predict(cfg, rates)
                # memt's writer calls go to its stand-in, which answers at once.
                w = estimate_time.wall_time(cfg, lines, args.latency, slots, served_latency_s=0.0)
                out[key] = {"wall_s": w.seconds, "calls": w.provider_calls, "binding": w.binding}
        return out
    finally:
        endpoint.terminate()
        endpoint.wait(timeout=10)
        if standin is not None:
            standin.close()
        if not args.keep:
            shutil.rmtree(wd, ignore_errors=True)


def window_figures(monitor: Monitor, ramp_s: float, window_s: float) -> dict | None:
    """The steady window's figures: from the first sample after the ramp to the first one
    ``window_s`` later, or to the run's end where it ended first (``complete`` false)."""
    span = monitor.window(ramp_s, window_s)
    complete = span is not None
    if span is None:
        later = [s for s in monitor.samples if s.t >= ramp_s]
        if len(later) < 2:
            return None
        span = (later[0], later[-1])
    a, b = span
    minutes = (b.t - a.t) / 60
    admitted, rejected = b.admitted - a.admitted, b.rejected - a.rejected
    return {
        "start_s": a.t,
        "window_s": round(b.t - a.t, 1),
        "complete": complete,
        "admitted_per_min": round(admitted / minutes, 1) if minutes else None,
        "share_429": round(rejected / max(1, admitted + rejected), 4),
        "admitted": admitted,
        "rejected": rejected,
        "cpu_ms_per_paid_call": round(1000 * (b.cpu_s - a.cpu_s) / max(1, admitted), 1),
        "endpoint_cpu_ms_per_paid_call": round(
            1000 * (b.endpoint_cpu_s - a.endpoint_cpu_s) / max(1, admitted), 1
        ),
    }


def dag_build(args: argparse.Namespace) -> float:
    wd = Path(tempfile.mkdtemp(prefix="memprobe-ratelimit-dag-"))
    try:
        rb.copy_workflow(wd)
        paper = wd / "config" / "paper.yaml"
        t0 = time.monotonic()
        rb.snakemake(wd, rb.TARGET, "-n", "--quiet", "--cores", "1", "--configfile", str(paper))
        return time.monotonic() - t0
    finally:
        shutil.rmtree(wd, ignore_errors=True)


def row(r: dict) -> str:
    share = r["rejected"] / r["http_requests"] if r["http_requests"] else 0.0
    done = "stopped" if r["stopped"] else "yes" if r["ok"] else "NO"
    return (
        f"| {r['name']} | {done} | {r['wall_s']:.1f} | {r['bound_s']:.1f} "
        f"({r['critical_s']:.1f} / {r['requests_s']:.1f} / {r['tokens_s']:.1f}) "
        f"| {r['wall_s'] / r['bound_s']:.2f} | {r['paid']} ({r['limited']}) | {r['tokens']:,} "
        f"| {r['rejected']} of {r['http_requests']} ({100 * share:.1f}%) | {r['lost']} "
        f"| {r['peak_rss'] / 2**20:.0f} | {r['disk'] / 2**20:.1f} "
        f"| {1000 * r['cpu_s'] / max(1, r['paid']):.1f} | {r['snakemake_cpu_s']:.1f} |"
    )


def release_outcomes(systems: list[str]) -> str:
    """The fake's replies rigged to the release's call-driving rates: the simulated user
    satisfied at r = 1 / (the systems' mean turns per episode), so episodes last 1/r turns on
    average (the 25-turn cap aside); the critic passes every task (the release's users had
    one critic pass per task, edits rare: docs/release-format.md)."""
    per_episode = [estimate_rates.turns_per_user(s) / estimate_rates.RELEASE_DIMS for s in systems]
    return f"feedback_type=satisfied:{len(per_episode) / sum(per_episode):.4f},verdict=neutral:1"


# Protocol keys that need what this machine lacks: models to download (mem0's hybrid search,
# bge-m3 for Mem-T) or a second provider (mem0's embeddings through the writer's endpoint,
# outside the run's limiter); the bench keeps the local all-MiniLM-L6-v2 for both.
NOT_HERE = (
    "system_settings.mem0.hybrid_search",
    "system_settings.mem0.embedder",
    "system_settings.memt.embedder",
    "system_settings.memt.embedder_max_seq_length",
)


def paper_protocol() -> dict:
    """config/paper.yaml's protocol keys (the judge an LLM, the paper's prompts, 3 edits...),
    nested, but those in NOT_HERE; the bench's scale and endpoint go over them."""
    out: dict = {}
    for dotted, value in PAPER_PROTOCOL.items():
        if dotted not in NOT_HERE:
            set_dotted(out, dotted, value)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    rb.scale_args(ap, concurrency=4)
    ap.add_argument("--rpm", type=int, default=300, help="the provider's requests per minute")
    ap.add_argument("--tpm", type=int, default=400_000, help="... and tokens per minute")
    ap.add_argument("--llm-slots", type=int, default=16)
    ap.add_argument("--max-attempts", type=int, default=5, help="llm.max_attempts")
    ap.add_argument("--progress-s", type=float, default=30.0, help="progress.interval_s")
    ap.add_argument("--no-unlimited", action="store_true", help="skip the pass without limiter")
    ap.add_argument("--no-limited", action="store_true", help="skip the pass with the limiter")
    ap.add_argument(
        "--stop-unlimited-after",
        type=float,
        help="stop the unlimited pass if still running after this many seconds",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temp workflow copies")
    ap.add_argument("--out", default=str(rb.ROOT / "benchmarks" / "results-rate-limit.md"))
    ap.add_argument(
        "--outcomes",
        help="the fake's rigged replies (memprobe fake-endpoint --outcomes; default: the "
        "release's: episodes as long as its turn priors, the critic passing every task)",
    )
    ap.add_argument(
        "--executor",
        choices=("local", "slurm"),
        default="local",
        help="slurm: through --executor slurm --workflow-profile profiles/slurm",
    )
    ap.add_argument("--jobs", type=int, help="SLURM jobs in flight (default: --llm-slots)")
    ap.add_argument(
        "--slurm-init-s",
        type=int,
        default=5,
        help="--slurm-init-seconds-before-status-checks (the plugin's default: 40)",
    )
    ap.add_argument(
        "--max-jobs-per-timespan",
        help="Snakemake's --max-jobs-per-timespan (e.g. 1/2s: start-ups one after another on "
        "a small one-host cluster instead of all at once); unset: Snakemake's 100/1s",
    )
    ap.add_argument(
        "--share",
        type=float,
        help="llm.rate_limit.share (unset: the run's; under a cluster executor 1/llm_slots "
        "per node: give 1 on a one-node cluster, docs/cluster.md)",
    )
    ap.add_argument("--window-min", type=float, help="the steady window, in minutes")
    ap.add_argument("--ramp-min", type=float, default=3.0, help="minutes before the window")
    ap.add_argument(
        "--stop-after-window",
        action="store_true",
        help="stop the run once its window has ended (its figures are the window's)",
    )
    ap.add_argument("--sample-s", type=float, default=60.0, help="seconds between samples")
    ap.add_argument("--name", help="write the limited pass to benchmarks/results/NAME.json")
    ap.add_argument(
        "--note", help="what the record is (a short dev pass, ...): shown in RESULTS.md"
    )
    ap.add_argument("--no-dag-build", action="store_true", help="skip the paper DAG timing")
    args = ap.parse_args()
    if args.outcomes is None:
        args.outcomes = release_outcomes(args.systems)
    if args.stop_after_window and not args.window_min:
        ap.error("--stop-after-window needs --window-min")

    runs = [] if args.no_limited else [one_pass(args, "limited", True)]
    if not args.no_unlimited:
        runs.append(one_pass(args, "unlimited (llm_slots only)", False))
    if args.name:
        for r in runs:
            suffix = "" if r["name"] == "limited" else "-unlimited"
            path = bench_record.write(record(args, r, f"{args.name}{suffix}"))
            print(f"rate_limit_bench: {path.relative_to(rb.ROOT)}", file=sys.stderr)
        results_md.main([])  # RESULTS.md's records section, made again with the new one
    dag_s = None if args.no_dag_build else dag_build(args)
    cmd = "python benchmarks/rate_limit_bench.py " + " ".join(sys.argv[1:])
    lines = [
        "# A run inside an API's rate limit",
        "",
        "Reproduce (from the repository root, with the venv active):",
        "",
        f"    {cmd}",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.cpu_count()} "
        f"CPU cores (load average {os.getloadavg()[0]:.1f} at the end; the cores were shared).",
        f"Scale: {args.users} users x {len(args.systems)} systems ({', '.join(args.systems)}), "
        f"dims {args.dims}, max_turns {args.max_turns}; fake endpoint: {args.latency:g} s per "
        f"call, limits {args.rpm} requests and {args.tpm:,} tokens per minute, replies rigged "
        f"`{args.outcomes}`; the paper's protocol keys (config/paper.yaml); `--cores "
        f"{args.cores}`, `llm_slots={args.llm_slots}`, `llm.concurrency: {args.concurrency}`, "
        f"`llm.max_attempts: {args.max_attempts}`.",
        "",
        "| pass | finished | wall (s) | bound (s) (critical path / requests÷RPM / tokens÷TPM) "
        "| wall ÷ bound | paid calls (to the limited provider) | tokens (to it) | answered 429 "
        "| calls lost | peak RSS (MiB) "
        "| disk (MiB) | CPU ms per paid call | Snakemake CPU (s) |",
        "|---|---|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
        *[row(r) for r in runs],
        "",
        "CPU per paid call: every process of the run (Snakemake, job shells, jobs, the embedding "
        "server), the fake endpoint apart, over the paid calls. Calls lost: calls that got no "
        "reply after `llm.max_attempts` tries (each fails its job). A pass `stopped` ran past "
        "`--stop-unlimited-after` or its window: its row counts what it did until then.",
        "",
    ]
    if not args.no_limited and "predicted_prior" in runs[0]:  # a stopped pass has no estimate
        lines += estimate_table(runs[0])
    if dag_s is not None:
        lines += [f"DAG build of config/paper.yaml (`snakemake -n --quiet`): {dag_s:.1f} s.", ""]
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    print(json.dumps(runs, indent=1, default=str), file=sys.stderr)


def record(args: argparse.Namespace, r: dict, name: str) -> dict:
    """A pass as a benchmark record (benchmarks/bench_record.py): the window's figures where
    one was measured, else the whole run's."""
    w = r["window"]
    local = args.executor == "local"
    whole_cpu = 1000 * r["cpu_s"] / max(1, r["paid"]) if local else None
    return {
        "name": name,
        "executor": args.executor,
        "users": args.users,
        "systems": args.systems,
        "rpm": args.rpm if r["name"] == "limited" else None,
        "wall_s": round(r["wall_s"], 1),
        "bound_s": None if r["stopped"] else round(r["bound_s"], 1),
        "window_s": w["window_s"] if w else None,
        "admitted_per_min": w["admitted_per_min"]
        if w
        else round(r["admitted"] / (r["wall_s"] / 60), 1),
        "share_429": w["share_429"] if w else round(r["rejected"] / max(1, r["http_requests"]), 4),
        "calls_lost": r["lost"],
        "cpu_ms_per_paid_call": (
            (w["cpu_ms_per_paid_call"] if w else round(whole_cpu, 1)) if local else None
        ),
        "peak_rss_mib": round(r["peak_rss"] / 2**20),
        "commit": bench_record.commit(),
        "command": bench_record.command("rate_limit_bench.py"),
        "note": args.note,
        "finished": r["ok"] and not r["stopped"],
        "stopped_after_window": r["stopped"] and r["name"] == "limited",
        "window": w,
        "tpm": args.tpm,
        "latency_s": args.latency,
        "llm_slots": args.llm_slots,
        "dims": args.dims,
        "paid_calls": r["paid"],
        "paid_calls_to_the_limited_provider": r["limited"],
        "requests": r["http_requests"],
        "answered_429": r["rejected"],
        "failed_jobs": r["failed_jobs"],
        "bound_parts_s": {
            "critical_path": round(r["critical_s"], 1),
            "requests_per_rpm": round(r["requests_s"], 1),
            "tokens_per_tpm": round(r["tokens_s"], 1),
        },
        "cpu_s": round(r["cpu_s"], 1),
        "cpu_ms_per_paid_call_whole_run": round(whole_cpu, 1) if whole_cpu else None,
        "cpu_by_kind_s": r["cpu_by_kind_s"],
        "jobs_by_rule": r["jobs_by_rule"],
        "jobs_measured": r["jobs_measured"],
        "machine": bench_record.machine(),
        "samples": r["samples"],
    }


def estimate_table(lim: dict) -> list[str]:
    """``memprobe estimate``'s predictions against the limited pass."""
    lines = [
        "## The estimate against the limited pass",
        "",
        "| `memprobe estimate` from | predicted wall (s) | bound by | measured wall (s) | "
        "error | predicted calls to the provider | measured (paid) | error |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for key, label in (("predicted_prior", "the priors (before the run)"),
                       ("predicted_observed", "this run's rates (after)")):  # fmt: skip
        p = lim[key]
        lines.append(
            f"| {label} | {p['wall_s']:.1f} | {p['binding']} | {lim['wall_s']:.1f} "
            f"| {100 * (p['wall_s'] / lim['wall_s'] - 1):+.1f}% | {p['calls']:.0f} "
            f"| {lim['limited']} | {100 * (p['calls'] / max(1, lim['limited']) - 1):+.1f}% |"
        )
    return [*lines, "", f"The run's last progress line: `{lim['summary']}`", ""]


if __name__ == "__main__":
    main()
