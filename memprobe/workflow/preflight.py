"""Checks run once before any job (Snakefile ``onstart``): fail in one line, not per job.

Everything a run needs that a job would otherwise find missing only when it starts: each
endpoint answers, each key variable a remote endpoint needs is set, and, for memt served by
the jobs themselves, the weights, the vLLM executable and the embedder are where the config
says. The file checks apply where the jobs run on this machine (``local_files``).
"""

from __future__ import annotations

import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path

from memprobe.config.schema import Config, role_settings
from memprobe.vocabulary import ROLES


class PreflightError(RuntimeError):
    pass


def endpoints(cfg: Config) -> list[str]:
    if cfg.llm.backend != "openai" or cfg.release.import_runs:
        return []  # an import of the release's records makes no LLM call
    return sorted({role_settings(cfg, r)["base_url"] for r in ROLES})


def reachable(base_url: str, timeout_s: float = 5.0) -> str | None:
    """None if something answers HTTP at ``base_url``; otherwise the reason it did not."""
    from memprobe.llm.providers import is_loopback
    from memprobe.serving.served_process import open_direct

    url = base_url.rstrip("/") + "/models"
    opener = open_direct if is_loopback(url) else urllib.request.urlopen
    try:
        with opener(url, timeout=timeout_s):
            return None
    except urllib.error.HTTPError:
        return None  # it answered (401/404 are fine: the server is there)
    except (urllib.error.URLError, TimeoutError, OSError) as err:
        reason = getattr(err, "reason", err)
        return str(reason)


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
    names = {role_settings(cfg, r)["api_key_env"] for r in ROLES} if endpoints(cfg) else set()
    if "memt" in cfg.systems and cfg.memt.endpoint:
        names.add(cfg.memt.api_key_env)
    return sorted(n for n in names if n)  # None: a role's own endpoint without a key


def missing_keys(cfg: Config) -> list[str]:
    """One line per key variable that a non-loopback endpoint needs and that is unset.

    A loopback server (vLLM, the fake endpoint) usually takes no key; a remote one always does,
    unless its ``api_key_env`` is ``''`` (no key, on purpose). A role sent to its own remote
    ``base_url`` never borrows the default key, so it must name its own variable.
    """
    from memprobe.llm.providers import is_loopback

    if not endpoints(cfg):
        return []
    need: dict[str, list[str]] = {}
    problems = []
    for role in ROLES:
        s = role_settings(cfg, role)
        if is_loopback(s["base_url"]) or s["api_key_env"] == "":
            continue
        if s["api_key_env"] is None:
            problems.append(
                f"llm.roles.{role}.api_key_env: not set (role {role} calls its own remote "
                "endpoint, which never gets llm.api_key_env; name the variable holding its "
                "key, or '' for none)"
            )
            continue
        need.setdefault(s["api_key_env"], []).append(role)
    return problems + [
        f"llm.api_key_env: ${var} is not set (roles {', '.join(roles)} call a remote endpoint)"
        for var, roles in need.items()
        if not os.environ.get(var)
    ]


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
    from memprobe.llm.client import redact

    mem0_hybrid(cfg)
    problems = missing_keys(cfg) + (missing_files(cfg) if local_files else [])
    for url in endpoints(cfg):
        problem = reachable(url)
        if problem:
            problems.append(
                f"llm.base_url: endpoint {redact(url)} is unreachable ({redact(problem)})"
            )
    if problems:
        more = f" (and {len(problems) - 1} more: {'; '.join(problems[1:])})" if problems[1:] else ""
        raise PreflightError(problems[0] + more)
