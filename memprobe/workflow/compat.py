"""Every use of Snakemake's private API, in one place, for the pinned Snakemake (9.27.1,
pyproject.toml): tests/workflow/test_compat.py fails when another version is installed or a
name used here is gone, so an upgrade starts here.

- ``install_one_pending_round``: at most one pending re-evaluation of the job scheduler
  (``JobScheduler._schedule_reevalutation``, ``_open_jobs``). Snakemake ends every scheduling
  round by starting a timer (its job rate limiter's timespan, ``--max-jobs-per-timespan``,
  1 s by default) that starts another round when it fires, which starts another timer. Every
  job that finishes starts a round, so every finished job adds a chain of rounds that never
  ends: after N jobs, about N rounds a second, each evaluating every ready job's params and
  statting its inputs (benchmarks/RESULTS.md, "The paper's 50 users on this machine", has the
  measurements). A round looks at every ready job, so one pending timer is enough: the
  liveness is Snakemake's own (a round within a timespan of the last one) without the pile-up.
- ``install_cached_function_params``: each input function's parameters read once, not at
  every call. Snakemake (``snakemake.common.get_function_params``, imported by name into
  ``rules`` and ``jobs``) asks ``inspect.signature`` each time it calls an input, params or
  resources function: 37,000 times in the paper's dry run (2,402 jobs), and again for every
  ready job in every scheduling round of a run. A function's signature does not change, so
  the answer is kept per function object (weakly: a rule's functions live as long as it).
- ``job_dag``: the jobs of the DAG Snakemake builds for a set of targets without running
  anything (``WorkflowApi._workflow``, ``Workflow._prepare_dag``, ``Workflow._build_dag``), for
  ``memprobe job``.
- ``before_execute``: a check of the executor the run is for. Snakemake reads the Snakefile
  before it names the executor to the workflow, and a dry run names only its pseudo-executor
  (``dryrun``) there; ``DAGApi.execute_workflow`` gets the one the run is for (a dry run's
  too) right after the Snakefile is read, before the DAG is built.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

SNAKEMAKE_VERSION = "9.27.1"  # the pin of pyproject.toml this module is written for
_MARK = "_memprobe_one_pending_round"
_CACHED = "_memprobe_cached_params"
# Modules whose ``get_function_params`` (a module-level name, read at call time) is replaced.
FUNCTION_PARAMS_USERS = ("snakemake.common", "snakemake.rules", "snakemake.jobs")
# The private names used here: (module, class, attribute); the test checks each exists.
PRIVATE = (
    ("snakemake.scheduling.job_scheduler", "JobScheduler", "_schedule_reevalutation"),
    ("snakemake.api", "WorkflowApi", "_workflow"),
    ("snakemake.workflow", "Workflow", "_prepare_dag"),
    ("snakemake.workflow", "Workflow", "_build_dag"),
    ("snakemake.api", "DAGApi", "execute_workflow"),  # public, but its argument is what we read
)
_EXECUTOR_CHECK: list[Callable[[str], None]] = []  # the one the latest Snakefile registered


def install_one_pending_round() -> None:
    """Patch the scheduler (idempotent; a Snakemake without the method is left as it is)."""
    from snakemake.scheduling.job_scheduler import JobScheduler

    if getattr(JobScheduler, _MARK, False) or not hasattr(JobScheduler, "_schedule_reevalutation"):
        return
    lock = threading.Lock()

    def reevaluate_once(self: Any, delay: float) -> None:
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


def install_cached_function_params() -> None:
    """Patch Snakemake's parameter lookup with one that keeps each function's (idempotent)."""
    import importlib
    import weakref

    import snakemake.common

    original = snakemake.common.get_function_params
    if getattr(original, _CACHED, False):
        return
    known: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

    def cached(func: Any) -> Any:
        try:
            return known[func]
        except (KeyError, TypeError):  # TypeError: not weakly referable (kept by nobody)
            pass
        params = original(func)
        try:
            known[func] = params
        except TypeError:
            pass
        return params

    setattr(cached, _CACHED, True)
    for name in FUNCTION_PARAMS_USERS:
        importlib.import_module(name).get_function_params = cached  # type: ignore[attr-defined]


def workflow_of(workflow_api: Any) -> Any:
    """The ``Workflow`` behind a ``WorkflowApi`` (its rules, DAG and persistence)."""
    return workflow_api._workflow


def job_dag(workflow_api: Any, settings: Any) -> list[Any]:
    """The jobs of the DAG Snakemake builds for ``settings``' targets (nothing is run)."""
    workflow = workflow_of(workflow_api)
    workflow_api.dag(settings)
    workflow._prepare_dag(forceall=False, ignore_incomplete=True, lock_warn_only=True, nolock=True)
    workflow._build_dag()
    return list(workflow.dag.jobs)


def before_execute(check: Callable[[str], None] | None) -> None:
    """Call ``check`` with the executor's name (``--executor``, a profile's ``executor``, else
    ``local``) before Snakemake builds the DAG to run or dry-run; None: no check. The last
    registration wins (a process may read the Snakefile more than once)."""
    from snakemake.api import DAGApi

    _EXECUTOR_CHECK[:] = [check] if check else []
    if getattr(DAGApi.execute_workflow, _MARK, False):
        return
    execute = DAGApi.execute_workflow

    @functools.wraps(execute)
    def checked(self: Any, executor: str = "local", *args: Any, **kwargs: Any) -> Any:
        check_executor(executor)
        return execute(self, executor, *args, **kwargs)

    setattr(checked, _MARK, True)
    DAGApi.execute_workflow = checked


def check_executor(executor: str) -> None:
    """The registered check, on ``executor`` (what the patched ``execute_workflow`` does first)."""
    for check in _EXECUTOR_CHECK:
        check(executor)
