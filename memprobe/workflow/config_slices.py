"""What each rule's jobs read besides their files: config keys and LLM roles.

Each rule gets, as params, exactly the slice of the config its jobs read (the way PyPSA-Eur's
``config_provider`` hands each rule its keys): Snakemake's ``params`` rerun trigger then reruns
a job whose slice changed, and its reason line prints the old and new value of the changed
entry. One param per entry, each a one-key dict, so the reason names it. A job reads its slice
and nothing else (``JobConfig``): any other key stops it in one line, so no setting a job reads
can change without rerunning it.

- ``keys``: dotted config keys; a section (``tasks``) covers every key added to it later.
- ``roles``: the LLM roles the jobs call. A role's entry is its identity as the response cache
  keys it (backend, endpoint, model, temperature, max_tokens); the seed joins every LLM rule.
- ``per_mode``: keys read only by the jobs of one access mode.
- ``system``: the memory system's own settings (rollout, probe): the keys its declaration
  ``reads`` (memprobe/registry/systems.py), its ``system_settings.<system>`` block and, for a
  system that writes with an LLM, the writer role.

``RUNTIME_ONLY`` keys are in no slice (changing them reruns nothing); ``SHAPE`` keys change which
jobs exist or which files they read, which Snakemake sees by itself. Every job may read both.
tests/workflow/test_config_slices.py checks that every config key is in exactly one of these places.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from types import FunctionType
from typing import Annotated, Any

from pydantic import TypeAdapter

from memprobe.config.base import ConfigError
from memprobe.config.schema import Config, role_settings
from memprobe.llm.providers import backend
from memprobe.registry import backends
from memprobe.registry import systems as registry
from memprobe.vocabulary import ROLES

LLM_RULE_SEED = "seed"  # part of every request (and of its cache key)


@dataclass(frozen=True)
class Slice:
    keys: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    per_mode: dict[str, tuple[str, ...]] = field(default_factory=dict)
    system: bool = False


_JUDGE = Slice(
    keys=("compat.judge_unknown_labels", "judge"),
    roles=("judge",),
)

SLICES: dict[str, Slice] = {
    "persona": Slice(keys=("seed",), roles=("generator",)),
    "bank": Slice(
        keys=("dims_per_category", "bank"),
        roles=("generator",),
    ),
    # task_writer: the task generator's own role where the config has one.
    "tasks": Slice(
        keys=("tasks",),
        roles=("generator", "task_writer", "critic", "editor"),
    ),
    "oracle": Slice(roles=("oracle",)),
    "rollout": Slice(
        keys=("max_turns", "simulator"),
        roles=("simulator", "assistant"),
        system=True,
    ),
    # rollout.replay: the recorded run (its files are inputs); the system's writer only.
    "replay": Slice(keys=("rollout", "seed"), system=True),
    "preference": Slice(roles=("preference",)),
    "probe": Slice(roles=("assistant",), system=True),
    # The slot-fill budget and overflow strategy apply to dump_all only.
    "slotfill": Slice(
        roles=("slotfill",),
        per_mode={"dump_all": ("slotfill",)},
    ),
    "judge": _JUDGE,
    "attribution": Slice(
        roles=("disclosure",),
        per_mode={"retrieve": ("compat.retrieve_attribution_empty_transcript",)},
    ),
    "slotfill_sweep": Slice(roles=("slotfill",)),
    "judge_sweep": _JUDGE,
    "judge_calibration": Slice(keys=("judge",), roles=("judge",)),
    # seed: bootstrap CIs; judge.cross_check: the offline judge beside the run's, per B cell
    # llm.max_stand_in_share: too many stand-ins in a stage stop it before any table
    "tables": Slice(
        keys=("seed", "judge.cross_check", "judge.cross_check_margin", "llm.max_stand_in_share")
    ),
    "import_users": Slice(keys=("dims_per_category",)),
    "import_runs": Slice(keys=("slotfill",)),
    "import_retrieved": Slice(),
    "inspector": Slice(),
    # A run's copy of a shared user file: its params are the slices of the rules that made the
    # file (memprobe/workflow/paths.py copy_params).
    "users": Slice(),
    "audit_agreement": Slice(),  # its seed is a param of the rule already
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
    "llm.rate_limit",  # the pace of the calls, never their replies
    "progress",  # read by the Snakemake process alone
    "cluster_embedding",  # where the encodes run, never the vectors
)

# Keys that decide which jobs exist and which files they read (Snakemake sees those changes as
# new jobs or a changed set of input files), or that are checked and never read by a job.
SHAPE: tuple[str, ...] = (
    "n_users",
    "systems",
    "modes",
    "top_k",
    "results_dir",
    "run",
    "users",
    "release_dir",
    "release",
    "protocol",
    "prompts",  # which prompt file a stage reads: a rule input, so a change reruns its jobs
    "compare",  # the other runs' files are the tables' and inspector's inputs
)

# Folded into each role's identity (``role_identity``), never a slice entry of their own.
ROLE_IDENTITY: tuple[str, ...] = (
    "llm.backend",
    "llm.base_url",
    "llm.model",
    "llm.max_tokens",
    "llm.roles",
)


@cache
def runtime_only() -> frozenset[str]:
    """``RUNTIME_ONLY``, each backend's ``runtime_settings`` under its ``llm.<name>`` (a
    slot-fill budget derived from the local server's context is in the slotfill slice) and
    each system's under its ``system_settings.<name>``."""
    keys = set(RUNTIME_ONLY)
    for name in backends.names():
        keys |= {f"llm.{name}.{k}" for k in backend(name).runtime_settings}
    for name, spec in registry.specs().items():
        keys |= {f"{SYSTEM_SECTION}.{name}.{k}" for k in spec.runtime_settings}
    return frozenset(keys)


@cache
def role_identity_keys() -> frozenset[str]:
    """``ROLE_IDENTITY`` and each backend's own block ``llm.<name>``: a backend's settings
    reach a reply only through its ``identity`` and ``served`` bound, both in the role's."""
    own = {f"llm.{n}" for n in backends.names() if backend(n).settings is not None}
    return frozenset({*ROLE_IDENTITY, *own})


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
        if f"{key}.{k}" not in runtime_only()
    }


def role_identity(cfg: Config, role: str) -> dict[str, Any]:
    s = role_settings(cfg, role)
    return {
        "backend": cfg.llm.backend,
        # The endpoint as the response cache keys it, without the run's port or a credential.
        "endpoint": backend(cfg.llm.backend).identity(cfg, s["base_url"]),
        "model": s["model"],
        "temperature": s["temperature"],
        "max_tokens": s["max_tokens"],
    }


def _param_name(key: str) -> str:
    return "cfg_" + key.replace(".", "_").replace(" ", "_")


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


def _only_in_mode(mode: str, value: dict[str, Any]) -> Callable[[Any], dict[str, Any] | None]:
    return lambda wildcards: value if wildcards.mode == mode else None


# -- what one job reads -------------------------------------------------------------------------
class OutsideSlice(ConfigError, AttributeError):
    """A job read a config key outside its rule's slice: a change to it would rerun nothing."""


def job_keys(rule: str, wildcards: Mapping[str, str]) -> frozenset[str]:
    """The config keys a job of ``rule`` with these ``wildcards`` may read: its slice (what
    ``Slicer.params`` gives it) and the keys no slice needs: the shape and runtime-only keys,
    and all of ``llm`` for a job that calls an LLM (its roles' identities are in its slice)."""
    s = SLICES[rule]
    keys = {*s.keys, *s.per_mode.get(wildcards.get("mode", ""), ()), *SHAPE, *runtime_only()}
    if s.system:
        spec = registry.spec(wildcards["system"])
        keys |= {*spec.reads, f"{SYSTEM_SECTION}.{spec.name}"}
    if job_roles(rule, wildcards):
        keys |= {LLM_RULE_SEED, *role_identity_keys()}
    return frozenset(keys)


def job_roles(rule: str, wildcards: Mapping[str, str]) -> frozenset[str]:
    """The LLM roles a job of ``rule`` calls: its slice's, and the writer of a system that
    writes with an LLM."""
    s = SLICES[rule]
    writer = s.system and registry.spec(wildcards["system"]).llm_writer
    return frozenset((*s.roles, "writer") if writer else s.roles)


class JobConfig:
    """The run's config as one job may read it (``job_keys``): a key it may read reads as on
    ``Config``, any other raises ``OutsideSlice`` naming it. A top-level block is validated by
    its own model when first read; the whole config never is (``data`` is the run's validated
    config, dumped at DAG load)."""

    def __init__(
        self, rule: str, data: dict[str, Any], keys: frozenset[str], path: str = ""
    ) -> None:
        self._rule, self._data, self._keys, self._path = rule, data, keys, path
        self._blocks: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        derived = getattr(Config, name, None) if not self._path else None
        if isinstance(derived, property) and derived.fget is not None:
            return derived.fget(self)  # ks, user_ids, ...: from the keys they read, checked
        if isinstance(derived, FunctionType):
            return derived.__get__(self)
        key = f"{self._path}.{name}" if self._path else name
        if any(key == k or key.startswith(k + ".") for k in self._keys):
            return self._value(key)
        if any(k.startswith(key + ".") for k in self._keys):
            view = JobConfig(self._rule, self._data, self._keys, key)
            view._blocks = self._blocks
            return view
        raise OutsideSlice(
            f"rule {self._rule} reads the config key {key}, which is not in its slice: add it "
            f"to SLICES[{self._rule!r}] in memprobe/workflow/config_slices.py (a change to it "
            "must rerun the rule's jobs)"
        )

    def _value(self, key: str) -> Any:
        top, *rest = key.split(".")
        if top not in self._blocks:
            self._blocks[top] = self._block(top)
        value = self._blocks[top]
        for part in rest:
            value = value[part] if isinstance(value, dict) else getattr(value, part)
        return value

    def _block(self, top: str) -> Any:
        raw = self._data.get(top)
        if top == SYSTEM_SECTION:
            return _SystemSettings(raw or {})
        field = Config.model_fields[top]
        if top not in self._data:  # a config file written without its defaults
            if field.is_required():
                raise ConfigError(f"{top}: required key is missing")
            raw = field.get_default(call_default_factory=True)
        # Every field has an annotation; its validators (the llm block's backends) ride along.
        annotation: Any = (
            Annotated[field.annotation, *field.metadata] if field.metadata else field.annotation
        )
        try:
            return TypeAdapter(annotation).validate_python(raw)
        except ValueError as err:
            raise ConfigError(f"{top}: {err}".splitlines()[0]) from None


class _SystemSettings:
    """``system_settings``, each system's block validated by its own settings model on use."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self._raw = raw

    def __getattr__(self, name: str) -> Any:
        model = registry.specs()[name].settings if name in registry.specs() else None
        if model is None:
            raise AttributeError(name)  # a system without settings
        return model.model_validate(self._raw.get(name) or {})
