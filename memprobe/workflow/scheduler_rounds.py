"""At most one pending re-evaluation of Snakemake's job scheduler.

Snakemake (9.27.1, the newest release) ends every scheduling round by starting a timer (its
job rate limiter's timespan, ``--max-jobs-per-timespan``, 1 s by default) that starts another
round when it fires, which starts another timer. Every job that finishes starts a round, so
every finished job adds a chain of rounds that never ends: after N jobs, about N rounds a
second, each evaluating every ready job's params and statting its inputs. On 2 cores, 20
users x 5 systems had 74 live timer threads and about 40 rounds a second after 70 finished
jobs; 10 users took 559 s of Snakemake CPU, 14.8 s with this (benchmarks/RESULTS.md, "The
paper's 50 users on this machine").

A round looks at every ready job, so one pending timer is enough: the liveness is Snakemake's
own (a round within a timespan of the last one) without the pile-up. Installed by
rules/common.smk; a Snakemake without the private method is left as it is.
"""

from __future__ import annotations

import threading

_MARK = "_memprobe_one_pending_round"


def install() -> None:
    from snakemake.scheduling.job_scheduler import JobScheduler

    if getattr(JobScheduler, _MARK, False) or not hasattr(JobScheduler, "_schedule_reevalutation"):
        return
    lock = threading.Lock()

    def reevaluate_once(self, delay: float) -> None:
        with lock:
            if getattr(self, "_memprobe_round_pending", False):
                return
            self._memprobe_round_pending = True

        def fire() -> None:
            with lock:  # cleared first: the round this starts may ask for the next one
                self._memprobe_round_pending = False
            self._open_jobs.release()

        timer = threading.Timer(delay, fire)
        timer.daemon = True  # Snakemake's exit never waits on one
        timer.start()

    JobScheduler._schedule_reevalutation = reevaluate_once
    setattr(JobScheduler, _MARK, True)
