"""One pending re-evaluation of Snakemake's scheduler (memprobe/workflow/scheduler_rounds.py):
without it every finished job leaves a timer chain that starts a round a second for the rest
of the run."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest

from memprobe.workflow import scheduler_rounds


class Rounds:
    """The scheduler's side the patch touches: a round per release of ``_open_jobs``."""

    def __init__(self) -> None:
        self._open_jobs = threading.Semaphore(0)

    def count(self, within_s: float) -> int:
        n, end = 0, time.monotonic() + within_s
        while self._open_jobs.acquire(timeout=max(0.0, end - time.monotonic())):
            n += 1
        return n


def test_many_requests_for_a_round_make_one_and_the_round_it_starts_may_ask_again():
    from snakemake.scheduling.job_scheduler import JobScheduler

    scheduler_rounds.install()
    scheduler_rounds.install()  # idempotent
    s = Rounds()
    for _ in range(50):  # fifty rounds ended, as after fifty finished jobs
        JobScheduler._schedule_reevalutation(s, 0.05)
    assert s.count(0.4) == 1
    JobScheduler._schedule_reevalutation(s, 0.05)  # the round that timer started ends
    assert s.count(0.4) == 1  # Snakemake's liveness: a round within a timespan


SNAKEFILE = """
import threading
from memprobe.workflow import scheduler_rounds
if config.get("patch"):
    scheduler_rounds.install()

rule all:
    input: expand("step_{i}.txt", i=range(30))

rule step:
    output: "step_{i}.txt"
    shell: "touch {output}"

onsuccess:  # in Snakemake's own process, right after its last round
    timers = [t for t in threading.enumerate() if isinstance(t, threading.Timer)]
    open("timers.txt", "w").write(str(len(timers)))
"""


@pytest.mark.workflow
@pytest.mark.parametrize("patch", [False, True])
def test_a_real_run_keeps_one_timer_however_many_jobs_finished(tmp_path, patch):
    (tmp_path / "Snakefile").write_text(textwrap.dedent(SNAKEFILE))
    cmd = [sys.executable, "-m", "snakemake", "--cores", "4", "--quiet", "all"]
    cmd += ["--config", f"patch={patch}"] if patch else []
    subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True, timeout=300)
    timers = int((tmp_path / "timers.txt").read_text())
    if patch:
        assert timers <= 1
    else:  # Snakemake as released: a chain per finished job (why the patch exists)
        assert timers >= 10
