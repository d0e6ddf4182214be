"""Run a script as a ``shell:`` job: the job's files and values travel as one JSON argument.

Why not Snakemake's ``script:`` directive for the per-user rules: for each job it resolves the
script through its source cache while building the DAG (about 1 ms a job, 20% of the paper
DAG's build time) and every job then imports Snakemake to unpickle its ``snakemake`` object.
A ``shell:`` job costs neither. The rule hands the script what ``script:`` would have:

- ``params: job=script_job(...)`` (rules/common.smk) renders the named inputs, outputs,
  wildcards and the rule's own params as compact JSON;
- the config is the run's validated config, written once per distinct config to
  ``.snakemake/memprobe/config-<sha>.json`` at DAG load and named by ``MEMPROBE_CONFIG_FILE``
  in the environment that jobs inherit: not a param, so a config edit (say
  ``llm.concurrency``) does not make every job look stale. A job reads only its rule's slice
  of it, which is a param of the rule (memprobe/workflow/config_slices.py), so it reruns when
  that changes;
- the command line (``run_script`` in rules/common.smk) is ``PYTHON scripts/<rule>.py RULE LOG
  USAGE JOB_JSON``: the job's log and its usage ledger, run by the interpreter that runs
  Snakemake (no venv to activate), or the rule's conda environment's under ``--sdm conda``.
  No secret is ever part of it: keys stay in the environment.

``memprobe job RULE WILDCARD=VALUE ...`` (memprobe/workflow/job.py) runs the same command line
in-process, by hand.

``SpecJob`` offers the attributes of the ``snakemake`` object that ``step.Job`` reads, so a
script runs the same under either directive.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memprobe.config.schema import Config

CONFIG_ENV = "MEMPROBE_CONFIG_FILE"
CONFIG_DIR = Path(".snakemake") / "memprobe"


class Named(list):
    """A list of values that also answers by name, like Snakemake's Namedlist."""

    def __init__(self, items: list[Any], names: dict[str, Any]) -> None:
        super().__init__(items)
        self._names = names

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_names"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, key):
        if isinstance(key, str):
            return self._names[key]
        return super().__getitem__(key)

    def keys(self):
        return self._names.keys()

    def items(self):
        return self._names.items()


def render(wildcards, input, output, params: dict[str, Any]) -> str:
    """The JSON argument of one job (called by the params function at DAG build)."""

    def named(files) -> dict[str, Any]:
        return {"all": list(map(str, files)), "names": dict(files.items())}

    return json.dumps(
        {
            "input": named(input),
            "output": named(output),
            "wildcards": dict(wildcards.items()),
            "params": params,
        },
        separators=(",", ":"),  # keys keep Snakemake's order: job names join the wildcards
    )


def export_config(cfg: Config) -> Path:
    """Write the run's validated config where jobs will read it; set ``MEMPROBE_CONFIG_FILE``."""
    blob = json.dumps(cfg.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    path = CONFIG_DIR / f"config-{hashlib.sha256(blob.encode()).hexdigest()[:16]}.json"
    if not path.exists():
        from memprobe.spec.records import write_atomic

        write_atomic(path, blob)
    os.environ[CONFIG_ENV] = str(path.resolve())
    return path


class SpecJob:
    """The ``snakemake`` object's attributes, rebuilt from the command line of a shell job."""

    def __init__(self, rule: str, log: str, usage: str, spec: str) -> None:
        data = json.loads(spec)
        self.rule = rule
        self.log = Named([log, usage], {"usage": usage})
        self.input = Named(data["input"]["all"], data["input"]["names"])
        self.output = Named(data["output"]["all"], data["output"]["names"])
        self.wildcards = Named(list(data["wildcards"].values()), data["wildcards"])
        self.params = Named(list(data["params"].values()), data["params"])


def run_config() -> dict[str, Any]:
    """The run's validated config as ``export_config`` wrote it (each job reads its slice)."""
    path = os.environ.get(CONFIG_ENV)
    if not path:
        raise RuntimeError(
            f"{CONFIG_ENV} is not set: run this script through snakemake (or `memprobe job`)"
        )
    return json.loads(Path(path).read_text(encoding="utf-8"))
