"""Which names a named run may take: none of the default run's own entries (docs/runs.md).

The default run has no name and writes into ``results/`` and ``logs/`` themselves (PyPSA-Eur's
empty ``run: name``), so ``snakemake results/table2.csv`` builds it; a named run writes into
``results/<name>/`` and ``logs/<name>/``. A name that is also an entry of the default run's
(a system's folder ``results/nomem/``, ``figures/``, ``usage/``, a rule's log folder
``logs/judge/``) would mix the two runs' files in one folder, so it stops the run at DAG load
in one line (``users``, the shared users' folder, the config itself refuses).

The entries are read from the workflow's own rules (the first path component of every output
and log under the run's folders), so a new rule's folder is taken as soon as it exists. The
rules of other configs (a release import has other rules) add their rule names (every job
log is ``logs/<rule>/...``, and ``config_slices.SLICES`` names every rule), a ``{system}``
folder takes every registered system's name, and the few files written outside rules (the
run's server logs, the cluster profile's log folder) are listed here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memprobe.config.schema import Config
from memprobe.protocol.calibration import STOP_REPLIES
from memprobe.registry import systems as registry
from memprobe.serving.local_server import STATE_FILE
from memprobe.workflow.config_slices import SLICES

# Written by the Snakefile's hooks, the report and the cluster profiles, not by a rule:
# (folder, name) -> what it is.
OUTSIDE_RULES = {
    ("logs", "local_server.log"): "the run's llama.cpp server log",
    ("logs", STATE_FILE): "the run's llama.cpp server's address",
    ("logs", "embed_server.log"): "the run's embedding server log",
    ("logs", "judge_calibration_onstart.log"): "the judge calibration check's log",
    ("logs", STOP_REPLIES): "the judge calibration check's replies",
    ("logs", "local-server.log"): "the log of `memprobe local-server`",
    ("logs", "slurm"): "the SLURM profile's job logs, its slurm-logdir",
    ("results", "report.html"): "the report (snakemake --report)",
}
WILDCARD = re.compile(r"\{(\w+)(?:,[^}]*)?\}")


def _first(pattern: str, folder: str) -> str | None:
    """The first component of ``pattern`` under ``folder``, or None when it lies elsewhere."""
    prefix = folder.rstrip("/") + "/"
    return pattern[len(prefix) :].split("/")[0] if pattern.startswith(prefix) else None


def _matches(name: str, component: str) -> bool:
    """Whether ``name`` is a path component the pattern ``component`` can produce."""
    if "{" not in component:
        return name == component
    regex, systems = "", registry.system_names()
    for i, part in enumerate(WILDCARD.split(component)):
        if i % 3 == 0:  # literal text between wildcards
            regex += re.escape(part)
        elif i % 3 == 1:  # the wildcard's name: {system} is any registered system's folder
            regex += "|".join(map(re.escape, systems)) if part == "system" else ".+"
    return re.fullmatch(regex, name) is not None


def clash(cfg: Config, rule_files: Iterable[tuple[str, str]]) -> str | None:
    """What the default run keeps at ``cfg.run.name`` (a line), or None if it is free.

    ``rule_files``: (rule, pattern) for every output and log of the workflow's rules, under
    this run's folders (``cfg.run_dir``, ``cfg.logs_dir``)."""
    name = cfg.run.name
    if not name:
        return None
    results = cfg.results_dir
    taken: dict[str, str] = {}
    if name in registry.system_names():
        taken[f"{results}/{name}"] = f"system {name}'s files"
    for rule, pattern in rule_files:
        for folder, where, what in (
            (cfg.run_dir, results, "files"),
            (cfg.logs_dir, "logs", "logs"),
        ):
            first = _first(pattern, folder)
            if first is not None and _matches(name, first):
                taken.setdefault(f"{where}/{name}", f"rule {rule}'s {what}")
    if name in SLICES:
        taken.setdefault(f"logs/{name}", f"rule {name}'s logs")
    for (folder, entry), what in OUTSIDE_RULES.items():
        if name == entry:
            taken.setdefault(f"{results if folder == 'results' else folder}/{name}", what)
    if not taken:
        return None
    where, what = next(iter(taken.items()))
    return (
        f"run.name: {name!r} is also the default run's {where} ({what}), so the two runs' "
        "files would mix; choose another name"
    )
