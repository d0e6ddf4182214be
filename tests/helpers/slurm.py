"""A real SLURM for the cluster tests: whether one answers, its jobs as scontrol shows them, and
the one-machine cluster's slurmd (``.ci/local-slurm``, docs/cluster.md).

Where no SLURM answers, the tests that need one are skipped with the reason, unless
``MEMPROBE_REQUIRE_SLURM=1`` (set by ``.ci/run``, which starts one): then they fail.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers.workflow import ROOT

LOCAL_SLURM = ROOT / ".ci" / "local-slurm"
LOCAL_CLUSTER = "memprobe-local"  # its ClusterName
REQUIRE = "MEMPROBE_REQUIRE_SLURM"
GPU = "gpu:a100"  # the gres the tests' memt jobs ask for


def _run(*argv: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def config() -> dict[str, str]:
    """``scontrol show config`` as a dict ({} where no SLURM answers)."""
    try:
        proc = _run("scontrol", "show", "config")
    except (OSError, subprocess.TimeoutExpired):
        return {}
    pairs = re.findall(r"^(\w+)\s*=\s*(.*?)\s*$", proc.stdout, flags=re.MULTILINE)
    return dict(pairs) if proc.returncode == 0 else {}


def unreachable() -> str | None:
    """Why the tests cannot use a SLURM here, or None."""
    if not shutil.which("sbatch"):
        return "no sbatch on PATH"
    try:
        proc = _run("sinfo", "-h", "-N", "-o", "%T %G")
    except subprocess.TimeoutExpired:
        return "sinfo did not answer in 30 s"
    if proc.returncode != 0:
        return f"sinfo failed: {proc.stderr.strip()[:200]}"
    nodes = [line.split() for line in proc.stdout.splitlines() if line.strip()]
    if not any(n[0].startswith(("idle", "mixed", "allocated")) for n in nodes):
        return f"no node takes jobs (sinfo: {proc.stdout.strip()[:200]})"
    if not any(GPU in n[-1] for n in nodes):
        return f"no node has the {GPU} gres the memt jobs ask for"
    return None


def require() -> None:
    """Skip (or, under ``MEMPROBE_REQUIRE_SLURM=1``, fail) where no SLURM can run the tests."""
    reason = unreachable()
    if reason is None:
        return
    message = f"no SLURM to run on: {reason}; start one with `.ci/local-slurm start` (as root)"
    if os.environ.get(REQUIRE) == "1":
        pytest.fail(message)
    pytest.skip(message)


def require_local_cluster() -> None:
    """The tests that kill slurmd need the one-machine cluster that .ci/local-slurm runs."""
    require()
    if config().get("ClusterName") != LOCAL_CLUSTER or os.geteuid() != 0:
        pytest.skip(f"kills slurmd: needs root and the {LOCAL_CLUSTER} cluster of .ci/local-slurm")


# A group id ends in the user id (profiles/slurm: user-{user}, score-{system}-{user}); the
# workflow's rule names have no underscore.
GROUP_COMMENT = re.compile(r"rule_(?P<group>[a-z]+-(?:\w+-)?user_\d+)_(?P<rules>[a-z_]+)$")


def group_blocks(log: str) -> dict[str, str]:
    """A Snakemake log's group jobs: each id and its block (the jobs it lists, indented, after
    ``Group job <id> (jobs in lexicogr. order):``)."""
    return dict(re.findall(r"Group job (\S+) \(.*\):\n((?:[ \t].*\n|\n)*)", log))


def rules_of(comment: str) -> set[str]:
    """The rules a SLURM job of this comment runs: its one rule, or its group's."""
    match = GROUP_COMMENT.match(comment)
    if match:
        return set(match.group("rules").split("_"))
    match = re.match(r"rule_(.+?)(?:_wildcards_.*)?$", comment)
    return {match.group(1)} if match else set()


@dataclass
class Job:
    """One SLURM job as ``scontrol show job`` shows it, with every state it was seen in."""

    id: int
    fields: dict[str, str]
    states: list[str] = field(default_factory=list)

    @property
    def state(self) -> str:
        return self.fields.get("JobState", "")

    @property
    def comment(self) -> str:
        """The plugin's ``rule_<rule>_wildcards_<values>``, or for a group job (profiles/slurm's
        ``groups``) ``rule_<group id>_<its rules, sorted, joined by _>``."""
        return self.fields.get("Comment", "")

    @property
    def group(self) -> str:
        """A group job's id (``user-user_001``, ``score-memt-user_001``), else ''."""
        match = GROUP_COMMENT.match(self.comment)
        return match.group("group") if match else ""

    @property
    def rules(self) -> set[str]:
        return rules_of(self.comment)

    @property
    def rule(self) -> str:
        """The job's one rule; '' for a group job."""
        return "" if self.group else next(iter(self.rules), "")

    @property
    def gpu(self) -> str:
        return self.fields.get("TresPerJob", "")


def show_jobs(workdir: Path | None = None) -> dict[int, Job]:
    """Every job SLURM still knows (MinJobAge after it ended), or those whose working dir is
    ``workdir``."""
    proc = _run("scontrol", "show", "job", "--oneliner")
    jobs = {}
    for line in proc.stdout.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if fields.get("JobId", "").isdigit() and workdir in (None, Path(fields["WorkDir"])):
            jobs[int(fields["JobId"])] = Job(int(fields["JobId"]), fields)
    return jobs


class Watch:
    """Polls the jobs submitted from one working dir from now on, in the background (scontrol
    forgets a finished job after MinJobAge), keeping each job's last fields and every state it
    was seen in."""

    def __init__(self, workdir: Path, every_s: float = 0.5) -> None:
        self.workdir = workdir
        self.after = max(show_jobs(), default=0)  # an earlier run in the same dir is not ours
        self.jobs: dict[int, Job] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, args=(every_s,), daemon=True)
        self._thread.start()

    def _poll(self, every_s: float) -> None:
        while not self._stop.is_set():
            self.refresh()
            self._stop.wait(every_s)

    def refresh(self) -> None:
        seen = {i: j for i, j in show_jobs(self.workdir).items() if i > self.after}
        with self._lock:
            for job_id, job in seen.items():
                known = self.jobs.setdefault(job_id, job)
                known.fields = job.fields
                if not known.states or known.states[-1] != job.state:
                    known.states.append(job.state)

    def snapshot(self) -> list[Job]:
        with self._lock:
            return sorted(self.jobs.values(), key=lambda j: j.id)

    def wait_for(self, what: str, test, run: subprocess.Popen, timeout_s: float = 300) -> Job:
        """The first job for which ``test(job)`` holds; fails when ``run`` (the Snakemake that
        submits them) has ended first, or after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = [j for j in self.snapshot() if test(j)]
            if found:
                return found[0]
            if run.poll() is not None:
                raise AssertionError(f"Snakemake ended ({run.returncode}) before a job {what}")
            time.sleep(0.2)
        raise AssertionError(f"no job {what} within {timeout_s:.0f}s: {self.snapshot()}")

    def idle(self, timeout_s: float = 300) -> None:
        """Wait until none of the watched jobs is pending, running or completing."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.refresh()
            if not [j for j in self.snapshot() if j.state in ACTIVE]:
                return
            time.sleep(0.5)
        raise AssertionError(f"jobs still active after {timeout_s:.0f}s: {self.snapshot()}")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.refresh()


ACTIVE = ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "REQUEUED")


def node_state() -> str:
    return _run("sinfo", "-h", "-N", "-o", "%T").stdout.split("\n")[0].strip()


def fail_the_node(timeout_s: float = 120) -> float:
    """Kill slurmd and wait until slurmctld declares the node failed (SlurmdTimeout): the
    node's running jobs end NODE_FAIL. Returns the seconds it took."""
    pidfile = Path(config().get("SlurmdPidFile", "/run/slurmd.pid"))
    t0 = time.monotonic()
    os.kill(int(pidfile.read_text().split()[0]), signal.SIGKILL)
    while time.monotonic() - t0 < timeout_s:
        if node_state().startswith("down"):
            return time.monotonic() - t0
        time.sleep(1)
    raise AssertionError(f"the node was not declared down {timeout_s:.0f}s after slurmd died")


def start_local_slurm() -> subprocess.CompletedProcess:
    """``.ci/local-slurm start``: starts what is down (here slurmd) and puts the node back."""
    return _run(str(LOCAL_SLURM), "start", timeout=120)
