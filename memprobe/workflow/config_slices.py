"""What each rule's jobs read besides their files: config keys, LLM roles, library modules.

Jobs read the whole run config from a file (memprobe/workflow/shell_job.py), which Snakemake
cannot see. So each rule also gets, as params, exactly the slice of the config its jobs read
(the way PyPSA-Eur's ``config_provider`` hands each rule its keys): Snakemake's ``params`` rerun
trigger then reruns a job whose slice changed, and its reason line prints the old and new
value of the changed entry. One param per entry, each a one-key dict, so the reason names it.

- ``keys``: dotted config keys; a section (``tasks``) covers every key added to it later.
- ``roles``: the LLM roles the jobs call. A role's entry is its identity as the response cache
  keys it (backend, endpoint, model, temperature, max_tokens); the seed joins every LLM rule.
- ``per_mode``: keys read only by the jobs of one access mode.
- ``system``: the memory system's own settings (rollout, probe): the keys its declaration
  ``reads`` (agents/registry.py), its ``system_settings.<system>`` block and, for a system that
  writes with an LLM, the writer role.
- ``modules``: the memprobe modules holding the rule's logic, declared as inputs (docs/currency.md
  says why inputs and not a version number).

``RUNTIME_ONLY`` keys are in no slice (changing them reruns nothing); ``SHAPE`` keys change which
jobs exist or which files they read, which Snakemake sees by itself.
tests/workflow/test_config_slices.py checks that every config key is in exactly one of these places.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from memprobe.agents import registry
from memprobe.config import ROLES, Config, role_settings

LLM_RULE_SEED = "seed"  # part of every request (and of its cache key)


@dataclass(frozen=True)
class Slice:
    keys: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    per_mode: dict[str, tuple[str, ...]] = field(default_factory=dict)
    system: bool = False
    modules: tuple[str, ...] = ()


# spec.rubric: the judge's scale and unknown policy, attribution's threshold, the figures'
# axes and the imported scores' levels; editing it reruns the jobs that read it.
_JUDGE = Slice(
    keys=("compat.judge_unknown_labels", "judge"),
    roles=("judge",),
    modules=("protocol.recovery", "spec.rubric", "protocol.judges", "protocol.offline_judge"),
)

SLICES: dict[str, Slice] = {
    "persona": Slice(keys=("seed",), roles=("generator",), modules=("protocol.users",)),
    "bank": Slice(
        keys=("dims_per_category", "bank"),
        roles=("generator",),
        modules=("protocol.users", "spec.taxonomy"),
    ),
    # task_writer: the task generator's own role where the config has one.
    "tasks": Slice(
        keys=("tasks",),
        roles=("generator", "task_writer", "critic", "editor"),
        modules=("protocol.users", "spec.taxonomy"),
    ),
    "oracle": Slice(roles=("oracle",), modules=("protocol.attribution",)),
    "rollout": Slice(
        keys=("max_turns", "simulator"),
        roles=("simulator", "assistant"),
        system=True,
        modules=("protocol.simulation",),
    ),
    # rollout.replay: the recorded run (its files are inputs); the system's writer only.
    "replay": Slice(
        keys=("rollout", "seed"), system=True, modules=("protocol.simulation", "release.importer")
    ),
    "preference": Slice(roles=("preference",), modules=("protocol.preference",)),
    "probe": Slice(
        roles=("assistant",), system=True, modules=("protocol.recovery", "spec.taxonomy")
    ),
    # The slot-fill budget and overflow strategy apply to dump_all only.
    "slotfill": Slice(
        roles=("slotfill",),
        per_mode={"dump_all": ("slotfill",)},
        modules=("protocol.recovery", "spec.taxonomy"),
    ),
    "judge": _JUDGE,
    "attribution": Slice(
        roles=("disclosure",),
        per_mode={"retrieve": ("compat.retrieve_attribution_empty_transcript",)},
        modules=("protocol.attribution", "spec.rubric"),
    ),
    "slotfill_sweep": Slice(roles=("slotfill",), modules=("protocol.recovery", "spec.taxonomy")),
    "judge_sweep": _JUDGE,
    "judge_calibration": Slice(
        keys=("judge",),
        roles=("judge",),
        modules=(
            "protocol.calibration",
            "spec.rubric",
            "protocol.recovery",
            "protocol.judges",
            "protocol.offline_judge",
            "release.judge_verdicts",
        ),
    ),
    "tables": Slice(
        keys=("seed",), modules=("report.tables", "report.figures", "spec.rubric")
    ),  # seed: bootstrap CIs
    "import_users": Slice(keys=("dims_per_category",), modules=("release.importer",)),
    "import_runs": Slice(keys=("slotfill",), modules=("release.importer", "spec.rubric")),
    "import_retrieved": Slice(modules=("release.importer",)),
    "inspector": Slice(modules=("report.inspect_site",)),
    "audit_agreement": Slice(modules=("report.audit",)),  # its seed is a param of the rule already
}

SYSTEM_SECTION = "system_settings"

# How and how fast a job runs, never what it writes: a reply replayed from the cache is the same
# whatever these are (none is in a cache key), so changing them reruns nothing.
RUNTIME_ONLY: tuple[str, ...] = (
    "llm.timeout_s",
    "llm.max_attempts",
    "llm.max_reasks",
    "llm.resample_invalid",
    "llm.backoff_s",
    "llm.concurrency",
    "llm.cache_dir",
    "llm.api_key_env",
    "llm.local.threads",
    "llm.local.context_tokens",  # a slot-fill budget derived from it is in the slotfill slice
    "llm.local.parallel",
    "llm.local.startup_timeout_s",
    "memt.api_key_env",
    "memt.vllm_bin",
    "memt.startup_timeout_s",
    "memt.gpu_model",
    "memt.cpus_per_gpu",
)

# Keys that decide which jobs exist and which files they read (Snakemake sees those changes as
# new jobs or a changed set of input files), or that are checked and never read by a job.
SHAPE: tuple[str, ...] = (
    "n_users",
    "systems",
    "modes",
    "k",
    "results_dir",
    "users",
    "release_dir",
    "release",
    "protocol",
    "prompts",  # which prompt file a stage reads: a rule input, so a change reruns its jobs
)

# Folded into each role's identity (``role_identity``), never a slice entry of their own.
ROLE_IDENTITY: tuple[str, ...] = (
    "llm.backend",
    "llm.base_url",
    "llm.model",
    "llm.max_tokens",
    "llm.roles",
    "llm.local.package",
    "llm.local.model_path",
    "llm.local.sha256",
)

_MISSING = object()


def _lookup(tree: dict[str, Any], key: str) -> Any:
    node: Any = tree
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _strip_runtime(key: str, value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    return {
        k: _strip_runtime(f"{key}.{k}", v)
        for k, v in value.items()
        if f"{key}.{k}" not in RUNTIME_ONLY
    }


def without_credentials(url: str) -> str:
    """scheme://host[:port]/path: no user:password, no query (a key can hide in either)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def endpoint_identity(cfg: Config, base_url: str | None) -> str:
    """The endpoint as the response cache keys it (``Endpoint.identity``, made by
    memprobe/llm/providers.py ``endpoint_for``), without the run's port or a credential."""
    if cfg.llm.backend == "fake":
        return "fake"
    if cfg.llm.backend == "local" and not base_url:
        from memprobe.serving.local_server import served_model_id

        return f"local-gguf:{served_model_id(cfg.llm.local)}"
    return without_credentials(base_url or "")


def role_identity(cfg: Config, role: str) -> dict[str, Any]:
    s = role_settings(cfg, role)
    return {
        "backend": cfg.llm.backend,
        "endpoint": endpoint_identity(cfg, s["base_url"]),
        "model": s["model"],
        "temperature": s["temperature"],
        "max_tokens": s["max_tokens"],
    }


def _param_name(key: str) -> str:
    return "cfg_" + key.replace(".", "_").replace(" ", "_")


@cache
def module_file(name: str) -> str:
    """``memprobe/<package>/<name>.py`` (``name`` dotted under memprobe) as a rule input."""
    return registry.module_file(f"memprobe.{name}")


class Slicer:
    """The slices of one validated config, built once when the DAG loads."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.tree = cfg.model_dump(mode="json")
        self._roles: dict[str, dict[str, Any]] = {}

    def entry(self, key: str) -> dict[str, Any] | None:
        """``{key: value}``, or None where this config has no such key."""
        value = _lookup(self.tree, key)
        return None if value is _MISSING else {key: _strip_runtime(key, value)}

    def role(self, role: str) -> dict[str, Any]:
        if role not in self._roles:
            self._roles[role] = {f"role {role}": role_identity(self.cfg, role)}
        return self._roles[role]

    def system(self, name: str) -> dict[str, Any]:
        """One system's own settings, merged into one dict (one param per rule)."""
        out: dict[str, Any] = {}
        # Keys its own code reads (its declaration's ``reads``), then system_settings.<name>.
        spec = registry.spec(name)
        for key in (*spec.reads, f"{SYSTEM_SECTION}.{name}"):
            out |= self.entry(key) or {}
        if spec.llm_writer:
            out |= self.role("writer")
        return out

    def params(self, rule: str) -> dict[str, Any]:
        """The params that hand ``rule`` its slice: a value, or a function of the wildcards."""
        try:
            s = SLICES[rule]
        except KeyError:
            raise ValueError(
                f"rule {rule}: no entry in memprobe/workflow/config_slices.py"
            ) from None
        out: dict[str, Any] = {}
        keys = (*s.keys, LLM_RULE_SEED) if s.roles else s.keys
        for key in dict.fromkeys(keys):
            if (value := self.entry(key)) is not None:
                out[_param_name(key)] = value
        for role in s.roles:
            if role in ROLES:
                out[_param_name(f"role {role}")] = self.role(role)
        for mode, mode_keys in s.per_mode.items():
            for key in mode_keys:
                if (value := self.entry(key)) is not None:
                    out[_param_name(key)] = _only_in_mode(mode, value)
        if s.system:
            per_system = {name: self.system(name) for name in self.cfg.systems}
            out["cfg_system"] = lambda wildcards: per_system[wildcards.system]
        return out

    def modules(self, rule: str) -> list[str]:
        return [module_file(m) for m in SLICES[rule].modules]


def _only_in_mode(mode: str, value: dict[str, Any]) -> Callable[[Any], dict[str, Any] | None]:
    return lambda wildcards: value if wildcards.mode == mode else None
