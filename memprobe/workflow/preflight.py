"""Checks run once before any job (Snakefile ``onstart``): fail in one line, not per job.

Everything a run needs that a job would otherwise find missing only when it starts, as the
run's backend and each of its systems declare it (``Backend.preflight``; ``declare(...,
preflight=)``): each endpoint answers, each key variable a remote endpoint needs is set, a
system's files and models are where the config says. The file checks apply where the jobs
run on this machine (``local_files``).
"""

from __future__ import annotations

from memprobe.config.schema import Config
from memprobe.llm.providers import backend
from memprobe.registry import systems as registry


class PreflightError(RuntimeError):
    pass


def key_variables(cfg: Config) -> list[str]:
    """The environment variables that hold the run's API keys (none are read from files)."""
    if cfg.release.import_runs:
        return []  # an import of the release's records makes no LLM call
    names = set(backend(cfg.llm.backend).key_variables(cfg))
    for spec in map(registry.spec, cfg.systems):
        names |= set(spec.key_variables(cfg)) if spec.key_variables else set()
    return sorted(names)


def check(cfg: Config, local_files: bool = True) -> None:
    """Every problem the run's backend and systems find before the first job, in one line."""
    if cfg.release.import_runs:
        return  # an import of the release's records makes no LLM call and runs no system
    problems = backend(cfg.llm.backend).preflight(cfg)
    for spec in map(registry.spec, cfg.systems):
        problems += spec.preflight(cfg, local_files) if spec.preflight else []
    if problems:
        more = f" (and {len(problems) - 1} more: {'; '.join(problems[1:])})" if problems[1:] else ""
        raise PreflightError(problems[0] + more)
