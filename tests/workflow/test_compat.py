"""Snakemake's private API, in one place (memprobe/workflow/compat.py), for the pinned version;
and its scheduler patch: without it every finished job leaves a timer chain that starts a
round a second for the rest of the run."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest

from memprobe.workflow import compat


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

    compat.install_one_pending_round()
    compat.install_one_pending_round()  # idempotent
    s = Rounds()
    for _ in range(50):  # fifty rounds ended, as after fifty finished jobs
        JobScheduler._schedule_reevalutation(s, 0.05)
    assert s.count(0.4) == 1
    JobScheduler._schedule_reevalutation(s, 0.05)  # the round that timer started ends
    assert s.count(0.4) == 1  # Snakemake's liveness: a round within a timespan


SNAKEFILE = """
import threading
from memprobe.workflow import compat
if config.get("patch"):
    compat.install_one_pending_round()

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


def test_the_executor_check_runs_before_snakemake_executes_with_the_intended_executor():
    """``snakemake -n --executor slurm`` passes ``slurm`` (its pseudo-executor apart): the
    registered check sees it before anything of the run happens."""
    from snakemake.api import DAGApi

    class Refused(Exception):
        pass

    def refuse(executor: str) -> None:
        raise Refused(executor)

    compat.before_execute(refuse)
    compat.before_execute(refuse)  # installed once
    try:
        with pytest.raises(Refused, match="^slurm$"):
            DAGApi.execute_workflow(object(), "slurm", pseudo_executor="dryrun")
        with pytest.raises(Refused, match="^local$"):
            DAGApi.execute_workflow(object())
    finally:
        compat.before_execute(None)
    with pytest.raises(AttributeError):  # no check: on to Snakemake's own (a stand-in self)
        DAGApi.execute_workflow(object(), "local")


def test_the_installed_snakemake_is_the_pinned_one_compat_is_written_for():
    """An upgrade of Snakemake fails here first: re-check every private name compat.py uses,
    then move the pin in pyproject.toml and compat.SNAKEMAKE_VERSION together."""
    import importlib.metadata
    import tomllib

    from tests.helpers.workflow import ROOT

    pins = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"snakemake=={compat.SNAKEMAKE_VERSION}" in pins
    assert importlib.metadata.version("snakemake") == compat.SNAKEMAKE_VERSION


@pytest.mark.parametrize(("module", "cls", "name"), compat.PRIVATE)
def test_every_private_name_compat_uses_is_there(module, cls, name):
    import importlib

    import snakemake.api  # noqa: F401  (snakemake.workflow imports itself through the api)

    assert hasattr(getattr(importlib.import_module(module), cls), name)


def test_no_module_but_compat_reaches_into_snakemake_s_privates():
    """``_prepare_dag``, ``._workflow``, ``_schedule_reevalutation``... only in compat.py."""
    import re

    from tests.helpers.workflow import ROOT

    private = re.compile(r"\._(?:prepare_dag|build_dag|workflow|schedule_reevalutation)\b")
    sources = [*(ROOT / "memprobe").rglob("*.py"), *(ROOT / "scripts").glob("*.py")]
    sources += [ROOT / "Snakefile", *(ROOT / "rules").glob("*.smk")]
    found = [
        str(p.relative_to(ROOT))
        for p in sources
        if p.name != "compat.py" and private.search(p.read_text(encoding="utf-8"))
    ]
    assert not found, found


@pytest.mark.parametrize("module", compat.FUNCTION_PARAMS_USERS)
def test_every_module_whose_parameter_lookup_compat_replaces_has_one(module):
    import importlib

    assert callable(importlib.import_module(module).get_function_params)


def test_a_function_s_parameters_are_read_once_however_often_snakemake_asks(monkeypatch):
    """The paper's dry run asks 37,000 times for the parameters of a few hundred functions."""
    import inspect

    import snakemake.common
    import snakemake.jobs
    import snakemake.rules

    for module in (snakemake.common, snakemake.rules, snakemake.jobs):
        monkeypatch.setattr(module, "get_function_params", snakemake.common.get_function_params)
    reads: list[object] = []
    signature = inspect.signature

    def counted(func, *args, **kwargs):
        reads.append(func)
        return signature(func, *args, **kwargs)

    monkeypatch.setattr(inspect, "signature", counted)
    compat.install_cached_function_params()
    compat.install_cached_function_params()  # idempotent: one layer

    def input_function(wildcards, input):
        return []

    def another(wildcards, **kwargs):
        return []

    for _ in range(3):
        assert list(snakemake.rules.get_function_params(input_function)) == ["wildcards", "input"]
        aux = snakemake.common.get_input_function_aux_params(another, {"wildcards": 1, "x": 2})
        assert aux == {"wildcards": 1, "x": 2}  # **kwargs: Snakemake passes every candidate
    assert reads == [input_function, another]
    assert snakemake.jobs.get_function_params is snakemake.rules.get_function_params
