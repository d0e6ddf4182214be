"""The run's secrets a job keeps in its environment: those its own calls use, no other.

Every job inherits Snakemake's environment, which holds every key the run uses: the variables
the config names (``llm.api_key_env``, a role's own, a system's), the local llama.cpp server's
key and the embedding server's token. A job keeps the keys of its roles' endpoints and, when it
runs a memory system, that system's and the embedding server's; the rest are taken out of its
environment before its script runs, so the tables, the inspector or a release import (no LLM
call) hold none, and nothing a job starts inherits a key it does not use.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping

from memprobe.config.schema import Config, role_settings
from memprobe.registry import systems as registry
from memprobe.serving import embed_client, local_server
from memprobe.workflow import preflight
from memprobe.workflow.config_slices import SLICES

# What the run's own servers are reached with (set by onstart; memprobe/workflow/lifecycle.py).
SERVER_SECRETS = (local_server.KEY_ENV, embed_client.TOKEN_ENV)


def run_secrets(cfg: Config) -> set[str]:
    """Every variable that holds one of the run's secrets."""
    return {*preflight.key_variables(cfg), *SERVER_SECRETS}


def kept(cfg: Config, rule: str, roles: Collection[str], wildcards: Mapping[str, str]) -> set[str]:
    """The secrets a job of ``rule`` with these LLM ``roles`` (and wildcards) uses."""
    keep = {role_settings(cfg, r)["api_key_env"] for r in roles} - {None, ""}
    if roles:
        keep.add(local_server.KEY_ENV)  # the run's own server, where backend local serves them
    system = wildcards.get("system")
    if SLICES[rule].system and system:
        spec = registry.spec(system)
        keep |= set(spec.key_variables(cfg)) if spec.key_variables else set()
        keep.add(embed_client.TOKEN_ENV)
    return keep


def withhold(cfg: Config, rule: str, roles: Collection[str], wildcards: Mapping[str, str]) -> None:
    """Take the run's secrets this job does not use out of its environment."""
    for name in run_secrets(cfg) - kept(cfg, rule, roles, wildcards):
        os.environ.pop(name, None)
