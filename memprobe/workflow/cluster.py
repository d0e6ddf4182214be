"""A run whose jobs run on other hosts (SLURM, Kubernetes; docs/cluster.md): what the
Snakefile changes for them (rules/common.smk).

- Kubernetes pods start in an empty folder and see the shared volume only through the fs
  storage provider's prefix, so a relative ``llm.cache_dir`` is anchored there: one cache for
  every pod, and resume and dedupe hold as they do locally.
- Pods get only the variables declared as envvars, which the plugin passes through a
  Kubernetes Secret (never in the job spec or argv): the key variables the config names are
  declared, where set (preflight stops a run whose key is unset); for local execution the
  declaration is undone again, whose executor would put ``export KEY=...`` in each job's
  command line.
- Nodes share no lock (SQLite file locks do not hold over NFS): each node keeps its rate-limit
  buckets on local disk, in a folder of this user's (``/tmp/memprobe-rate-limit-<uid>``, 0700,
  checked for owner), and takes 1/llm_slots of every limit.
- A probe rides with the slot-fill that reads it, where the profile groups that one
  (``probe_group``): one job and one status check fewer between a rollout and its scoring; a
  user's oracle rides in the scoring group of the system whose rollouts end first
  (``oracle_group``), not as a job of its own beside the rollouts' start.
- Under the SLURM executor, a status command that sees jobs finish, also on a cluster without
  accounting (memprobe/workflow/slurm_status.py), or one line saying why none can.
"""

from __future__ import annotations

import json
import os
from typing import Any

from memprobe.config.schema import Config
from memprobe.llm import rate_limit
from memprobe.workflow import preflight, slurm_status


def global_resource(workflow: Any, name: str) -> int | None:
    """A --resources (or profile) limit's number; None where unset (--cores on a cluster)."""
    value = workflow.global_resources.get(name)
    return getattr(value, "value", value)


def scoring_group(workflow: Any, wildcards: dict[str, str]) -> str | None:
    """The group the profile gives rule slotfill (a system x user's scoring), filled with
    ``wildcards``; None where the profile groups no slot-fill or names a wildcard not given."""
    pattern = workflow.group_settings.overwrite_groups.get("slotfill")
    if pattern is None:
        return None
    try:
        name = pattern.format(**wildcards)
    except (KeyError, IndexError):
        return None
    # Where Snakemake looks up group-components: the name with its wildcards unfilled (it
    # notes it for the profile's rules, not for a callable's result).
    workflow.parent_groupids[name] = pattern
    return name


def probe_group(
    workflow: Any, wildcards: dict[str, str], gpus: int | None, primary_k: int
) -> str | None:
    """A probe job's group: its scoring group (the retrieve-mode slot-fill reads the probe's
    file). None, a job alone, for another k's probe (the sweep's slot-fill reads it), and where
    the system's probe asks for a GPU (memt): the group would ask for it too, and a group's
    jobs must agree on the GPU model."""
    if gpus or int(wildcards["k"]) != primary_k:
        return None
    return scoring_group(workflow, wildcards)


def oracle_group(workflow: Any, user: str, host: str) -> str | None:
    """A user's oracle job's group: the scoring group of ``host`` for the user, the system whose
    rollouts end first. The other systems' attributions read the oracle too, so their
    scoring waits for that group; it is the first to start anyway."""
    return scoring_group(workflow, {"system": host, "user": user})


def jobs_elsewhere(workflow: Any) -> bool:
    """Whether the run's executor runs its jobs on other hosts (known from onstart on)."""
    executor = workflow.executor_plugin
    return bool(executor and executor.common_settings.non_local_exec)


def runs_jobs_elsewhere(executor: str) -> bool:
    """Whether the executor named ``executor`` runs its jobs on other hosts (SLURM, Kubernetes),
    known before the DAG is built (``jobs_elsewhere`` reads the workflow's, from onstart on)."""
    from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry

    return bool(ExecutorPluginRegistry().get_plugin(executor).common_settings.non_local_exec)


def anchor_cache_dir(workflow: Any, cfg: Config, config: dict[str, Any]) -> None:
    """A relative ``llm.cache_dir`` under the fs storage provider's prefix (Kubernetes pods),
    in the validated config and in Snakemake's, which the jobs read."""
    storage = workflow.storage_settings
    prefix = storage.default_storage_prefix
    if storage.default_storage_provider == "fs" and prefix and not os.path.isabs(cfg.llm.cache_dir):
        cfg.llm.cache_dir = os.path.join(prefix, cfg.llm.cache_dir)
        config["llm"]["cache_dir"] = cfg.llm.cache_dir


def declare_key_variables(workflow: Any, cfg: Config) -> list[str]:
    """Where files go through a storage provider, the set key variables as the jobs' envvars
    (the plugin's Secret); returns them, for ``forget_key_variables``."""
    if not workflow.storage_settings.default_storage_provider:
        return []
    names = [v for v in preflight.key_variables(cfg) if v in os.environ]
    workflow.register_envvars(*names)
    return names


def forget_key_variables(workflow: Any, names: list[str]) -> None:
    """Local execution (known from onstart on): no key in a job's command line."""
    if workflow.local_exec:
        workflow.envvars.difference_update(names)


def share_rate_limit_across_nodes(workflow: Any, config: dict[str, Any]) -> None:
    """``llm.rate_limit`` under a cluster executor: each node takes 1/llm_slots of every limit
    with its buckets on local disk; at most llm_slots LLM jobs run at once, however they land,
    so the shares never add up to more than the limit. A share or state_dir set in a config
    wins; a ``--config llm=...`` of yours is passed on as it is. Jobs re-read the config on
    their node: it reaches them as a --config entry of their command line."""
    slots = global_resource(workflow, "llm_slots")
    if workflow.local_exec or not slots or "llm" in workflow.config_settings.config:
        return
    given = config.setdefault("llm", {}).setdefault("rate_limit", {})
    node = {
        "share": given.get("share", 1 / int(slots)),
        "state_dir": given.get("state_dir", rate_limit.node_state_dir()),
    }
    workflow.config_settings.config_args = [
        *(workflow.config_settings.config_args or []),
        f"llm={json.dumps({'rate_limit': node})}",
    ]


def settle_slurm_status(workflow: Any) -> str | None:
    """Under the SLURM executor, the plugin's status command set to one that sees this
    cluster's jobs finish; the line that says so, if it changed. Raises
    ``slurm_status.SlurmStatusError`` where no command can."""
    if getattr(workflow.executor_plugin, "name", None) != "slurm":
        return None
    return slurm_status.settle(workflow.executor_settings)
