"""Checks run once before any job (Snakefile ``onstart``): fail in one line, not per job."""

from __future__ import annotations

import urllib.error
import urllib.request

from memprobe.config import ROLES, Config, role_settings


class PreflightError(RuntimeError):
    pass


def endpoints(cfg: Config) -> list[str]:
    if cfg.llm.backend != "openai" or cfg.release.import_runs:
        return []  # an import of the release's records makes no LLM call
    return sorted({role_settings(cfg, r)["base_url"] for r in ROLES})


def reachable(base_url: str, timeout_s: float = 5.0) -> str | None:
    """None if something answers HTTP at ``base_url``; otherwise the reason it did not."""
    from memprobe.llm import is_loopback
    from memprobe.served_process import open_direct

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


def check(cfg: Config) -> None:
    from memprobe.llm import redact

    mem0_hybrid(cfg)
    for url in endpoints(cfg):
        problem = reachable(url)
        if problem:
            raise PreflightError(
                f"llm.base_url: endpoint {redact(url)} is unreachable ({redact(problem)})"
            )
