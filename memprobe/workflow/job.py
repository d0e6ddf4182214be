"""Run one job of the workflow by hand: ``memprobe job judge user=user_001 system=... mode=...``.

Snakemake builds the job (its files, params and log, exactly as a run would, from the same
Snakefile and config files) but does not run it: the rule's script runs in this process,
under a debugger if you like (``python -m pdb -m memprobe.cli job ...``), on the job's real
input files, and writes the job's real output and usage ledger through ``step.run`` as under
Snakemake. A ``shell:`` rule's script gets the very command line Snakemake would give it
(memprobe/workflow/shell_job.py); a ``script:`` rule's script gets the job's ``snakemake``
object. Inputs are never built here: a missing one is a one-line error (run Snakemake first).
"""

from __future__ import annotations

import os
import re
import runpy
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from memprobe.workflow import compat, step

SCRIPT = re.compile(r"(?:^|\s)(scripts/\S+\.py)(?:\s|$)")


class JobError(ValueError):
    pass


def parse_wildcards(pairs: list[str]) -> dict[str, str]:
    bad = [p for p in pairs if not p.partition("=")[0] or "=" not in p]
    if bad:
        raise JobError(f"{bad[0]!r}: expected WILDCARD=VALUE, e.g. user=user_001")
    return dict(p.split("=", 1) for p in pairs)


def build(
    rule: str, wildcards: dict[str, str], configfiles: list[str], snakefile: str = "Snakefile"
) -> Any:
    """The Snakemake job of ``rule`` with these wildcards, from the DAG a run builds.

    The job must be one of the run's own jobs (the default target's DAG, from the same
    config files): a job the run never makes (nomem has no retrieve mode), or one looked for
    under another config (the run's ``--configfile`` left out), is a one-line error naming
    what the run has instead. A rule outside the default target (audit_agreement) is built
    for its own output, as ``snakemake <rule>`` would.
    """
    from snakemake.api import SnakemakeApi
    from snakemake.exceptions import RuleException, WorkflowError
    from snakemake.io import apply_wildcards
    from snakemake.settings.types import (
        ConfigSettings,
        DAGSettings,
        OutputSettings,
        Quietness,
        ResourceSettings,
        StorageSettings,
    )

    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
        try:
            workflow_api = api.workflow(
                resource_settings=ResourceSettings(cores=1),
                config_settings=ConfigSettings(configfiles=[Path(f) for f in configfiles]),
                storage_settings=StorageSettings(),
                snakefile=Path(snakefile),
            )
            workflow = compat.workflow_of(workflow_api)
            names = sorted(r.name for r in workflow.rules)
            if rule not in names:
                raise JobError(f"rule {rule!r}: no such rule (rules: {', '.join(names)})")
            declared = workflow.get_rule(rule).wildcard_names
            if set(wildcards) != declared:
                want = " ".join(f"{w}=..." for w in sorted(declared)) or "no wildcards"
                raise JobError(f"rule {rule}: expected {want}, got {sorted(wildcards) or 'none'}")
            jobs = compat.job_dag(workflow_api, DAGSettings())
            if not any(j.rule.name == rule for j in jobs):  # outside the default target
                target = apply_wildcards(workflow.get_rule(rule).output[0], wildcards)
                jobs = compat.job_dag(workflow_api, DAGSettings(targets={target}))
        except (WorkflowError, RuleException) as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise JobError(f"snakemake could not build the run's jobs: {first}") from None
        given = " + ".join(map(str, workflow.configfiles))
        ours = [j for j in jobs if j.rule.name == rule]
        for job in ours:
            if dict(job.wildcards) == wildcards:
                _same_settings(workflow, job, given)
                job.smk_config = workflow.config
                return job
        like = " ".join(f"{k}={v}" for k, v in dict(ours[0].wildcards).items()) if ours else ""
        raise JobError(
            f"{rule} {' '.join(f'{k}={v}' for k, v in wildcards.items())}: not a job of the "
            f"run configured by {given} (its {rule} jobs are like {like}); give the run's "
            "--configfile, or wildcards of one of its jobs"
        )


def _same_settings(workflow: Any, job: Any, given: str) -> None:
    """The job's output and inputs were made with the settings these config files give (the
    run's own config): a file made under other settings means the wrong --configfile."""
    for made in (job, *workflow.dag.dependencies[job]):
        exists = [f for f in made.output if os.path.exists(f)]
        if exists and workflow.persistence.params_changed(made, file=exists[0]):
            raise JobError(
                f"{made.output[0]} was made with other settings than {given} give: give the "
                "run's --configfile (or rebuild it with snakemake)"
            )


def run(job: Any) -> None:
    """Run the job's script in this process, as Snakemake would have run it."""
    missing = [str(f) for f in job.input if not os.path.exists(f)]
    if missing:
        raise JobError(
            f"job {job}: input {missing[0]} is missing: build it first (`snakemake {missing[0]}`"
            " with the run's --configfile)"
        )
    rule = job.rule
    if rule.shellcmd:
        argv = shlex.split(job.shellcmd)
        match = SCRIPT.search(job.shellcmd)
        if not match:
            raise JobError(f"rule {rule.name}: its shell command runs no scripts/*.py")
        argv = argv[argv.index(match.group(1)) :]
        script, init = argv[0], {}
    elif rule.script:
        script = str(Path(rule.basedir.get_path_or_uri(secret_free=True)) / rule.script)
        argv = [script]
        init = {"snakemake": mock(job)}
    else:
        raise JobError(f"rule {rule.name}: runs no script")
    saved, by_hand = sys.argv, os.environ.get(step.BY_HAND_ENV)
    sys.argv = argv
    os.environ[step.BY_HAND_ENV] = "1"  # its ledger keeps the run's bill (step.Job)
    try:
        runpy.run_path(script, init_globals=init, run_name="__main__")
    finally:
        sys.argv = saved
        if by_hand is None:
            os.environ.pop(step.BY_HAND_ENV, None)
        else:
            os.environ[step.BY_HAND_ENV] = by_hand


def mock(job: Any) -> SimpleNamespace:
    """What Snakemake's ``script:`` directive hands a script as ``snakemake``."""
    same = ("input", "output", "params", "wildcards", "log", "threads", "resources")
    attrs = {a: getattr(job, a) for a in same}
    return SimpleNamespace(config=job.smk_config, rule=job.rule.name, **attrs)
