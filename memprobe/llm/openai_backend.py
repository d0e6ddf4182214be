"""The ``openai`` backend: any OpenAI-compatible endpoint, at ``llm.base_url`` or a role's own.

Its requests go to a provider whose limits ``llm.rate_limit`` paces. Before the first job
(its ``preflight``) every endpoint must answer HTTP, and every key variable that a remote
endpoint needs must be set: a loopback server (vLLM, the fake endpoint) usually takes no key,
a remote one always does unless its ``api_key_env`` is ``''`` (no key, on purpose).
"""

from __future__ import annotations

import os
from typing import Any

from memprobe.config.schema import Config, role_settings
from memprobe.llm import deadline
from memprobe.llm.providers import (
    BackendBase,
    Endpoint,
    OpenAICompatible,
    Provider,
    is_loopback,
    redact,
    without_credentials,
)
from memprobe.vocabulary import ROLES


class OpenAIBackend(BackendBase):
    """Any OpenAI-compatible endpoint, at ``llm.base_url`` or a role's own ``base_url``."""

    name = "openai"
    needs_base_url = True
    rate_limited = True

    def endpoint(self, cfg: Config, settings: dict[str, Any]) -> Endpoint:
        url = settings["base_url"]
        return Endpoint(self.name, url, url, settings["api_key_env"], cfg.llm.timeout_s)

    def identity(self, cfg: Config, base_url: str | None) -> str:
        return without_credentials(base_url or "")

    def provider(self, endpoint: Endpoint) -> Provider:
        return OpenAICompatible(endpoint)

    def preflight(self, cfg: Config) -> list[str]:
        problems = missing_keys(cfg)
        for url in endpoints(cfg):
            if problem := reachable(url):
                problems.append(
                    f"llm.base_url: endpoint {redact(url)} is unreachable ({redact(problem)})"
                )
        return problems

    def key_variables(self, cfg: Config) -> list[str]:
        names = {role_settings(cfg, r)["api_key_env"] for r in ROLES}
        return sorted(n for n in names if n)  # None: a role's own endpoint without a key


OPENAI = OpenAIBackend()


def endpoints(cfg: Config) -> list[str]:
    """Every endpoint the run's roles call."""
    return sorted({role_settings(cfg, r)["base_url"] for r in ROLES})


def reachable(base_url: str, timeout_s: float = 5.0) -> str | None:
    """None if something answers HTTP at ``base_url`` within ``timeout_s`` in all (any status:
    401/404 are fine, the server is there); otherwise the reason it did not. Proxies never
    for loopback."""
    import httpx2

    url = base_url.rstrip("/") + "/models"
    try:
        deadline.status(url, timeout_s, trust_env=not is_loopback(url))
    except httpx2.TimeoutException:
        return f"no answer within {timeout_s:g}s"
    except httpx2.HTTPError as err:
        return str(err) or type(err).__name__
    return None


def missing_keys(cfg: Config) -> list[str]:
    """One line per key variable that a non-loopback endpoint needs and that is unset.

    A role sent to its own remote ``base_url`` never borrows the default key, so it must name
    its own variable.
    """
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
