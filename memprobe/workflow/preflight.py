"""Checks run once before any job (Snakefile ``onstart``): fail in one line, not per job.

Everything a run needs that a job would otherwise find missing only when it starts: each
endpoint answers, each key variable a remote endpoint needs is set, and, for memt served by
the jobs themselves, the weights, the vLLM executable and the embedder are where the config
says. The file checks apply where the jobs run on this machine (``local_files``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from memprobe.config.schema import Config
from memprobe.llm.providers import backend


class PreflightError(RuntimeError):
    pass


def mem0_hybrid(cfg: Config) -> None:
    """mem0's hybrid search needs spaCy and fastembed models that would download mid-run."""
    if "mem0" not in cfg.systems or not cfg.system_settings.mem0.hybrid_search:
        return
    from memprobe.agents.mem0 import hybrid_models_missing

    missing = hybrid_models_missing()
    if missing:
        raise PreflightError(
            f"system_settings.mem0.hybrid_search: needs {', '.join(missing)} installed "
            "locally (nothing is downloaded mid-run); install them or set it to false"
        )


def key_variables(cfg: Config) -> list[str]:
    """The environment variables that hold the run's API keys (none are read from files)."""
    if cfg.release.import_runs:
        return []  # an import of the release's records makes no LLM call
    names = set(backend(cfg.llm.backend).key_variables(cfg))
    if "memt" in cfg.systems and cfg.memt.endpoint:
        names.add(cfg.memt.api_key_env)
    return sorted(names)


def _hf_cached(name: str) -> bool:
    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    hub = Path(os.environ.get("HF_HUB_CACHE", home / "hub"))
    return (hub / f"models--{name.replace('/', '--')}").is_dir()


def missing_files(cfg: Config) -> list[str]:
    """memt's files, when its jobs serve Mem-T themselves (memt.serve) or embed with a model."""
    if "memt" not in cfg.systems or cfg.release.import_runs:
        return []
    m = cfg.memt
    out = []
    if m.serve and m.model_path and not Path(m.model_path).is_dir():
        out.append(f"memt.model_path: {m.model_path} is not a directory (the Mem-T weights)")
    if m.serve and not (shutil.which(m.vllm_bin) or Path(m.vllm_bin).is_file()):
        out.append(f"memt.vllm_bin: {m.vllm_bin} is not an executable (envs/vllm.yaml)")
    if m.embedder and not (Path(m.embedder).is_dir() or _hf_cached(m.embedder)):
        out.append(
            f"memt.embedder: {m.embedder} is neither a directory nor in the Hugging Face cache "
            "(jobs run offline)"
        )
    return out


def check(cfg: Config, local_files: bool = True) -> None:
    """Every problem the run's backend and systems find before the first job, in one line."""
    if cfg.release.import_runs:
        return  # an import of the release's records makes no LLM call and runs no system
    mem0_hybrid(cfg)
    problems = backend(cfg.llm.backend).preflight(cfg)
    problems += missing_files(cfg) if local_files else []
    if problems:
        more = f" (and {len(problems) - 1} more: {'; '.join(problems[1:])})" if problems[1:] else ""
        raise PreflightError(problems[0] + more)
