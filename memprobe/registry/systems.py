"""Which memory systems exist, and everything the run needs to know about each one.

A system is declared once, on its own class, with :func:`declare`: its name, what it can do
(search, embedding, an LLM write path), its prompt files, its settings model (validated under
``system_settings.<name>``), the resources its jobs need and its cost priors for
``memprobe estimate``. The built-ins are the classes in :data:`BUILTIN`; a plugin is a class
(or its module) named by an entry point of the ``memprobe.systems`` group. Both load on first
use: their modules stay light at import time (no torch, no mem0), so the Snakefile can read
them to build the DAG.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from memprobe.registry import RegistryError, plugins, resolve, searched

ENTRY_POINT_GROUP = "memprobe.systems"
# The built-in systems, "module:Class"; each class carries its own declaration. (In the order
# of the paper's Table 5 rows, which ``specs()`` keeps: built-ins first, then plugins.)
BUILTIN: tuple[str, ...] = (
    "memprobe.agents.nomem:NoMemory",
    "memprobe.agents.amem:AMem",
    "memprobe.agents.longctx:LongContext",
    "memprobe.agents.mem0:Mem0",
    "memprobe.agents.memt:MemT",
)
# The built-ins' prompts: the workflow's own prompts/ (relative to where Snakemake runs, like
# every other prompt input), so a copy of the workflow with edited prompts uses its edits.
WORKFLOW_PROMPTS = Path("prompts")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)


class Settings(BaseModel):
    """Base of a system's settings model: unknown keys and non-finite numbers are errors; a
    field's docstring is its meaning in docs/configuration.md (config/field_docs.py)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class GpuPlacement(Settings):
    """Where a GPU system's jobs go on a cluster: a system whose ``Resources`` ask for GPUs
    has these in its settings (its rollout and probe jobs alone get them, docs/cluster.md)."""

    gpu_model: str | None = None
    """SLURM GPU model of this system's rollout and probe jobs (`--gpus=MODEL:1`)"""
    cpus_per_gpu: int | None = Field(default=None, ge=1)
    """SLURM `--cpus-per-gpu` of this system's rollout and probe jobs"""


class Resources(_Frozen):
    """What one system's rollout and probe jobs need beyond an ordinary job: GPUs (placed by
    its settings, a ``GpuPlacement``), and a model its own jobs serve, whose name is its
    settings' ``model`` (Mem-T-4B: the estimate's writer line)."""

    gpus: int = Field(default=0, ge=0)
    served_model: bool = False  # its write path calls a model its own jobs serve (Mem-T-4B)


class CostPriors(_Frozen):
    """The paper's budget for one system, from which ``memprobe estimate`` predicts a run.

    ``table5_m``: the system's Table 5 row (millions of prompt and completion tokens over the
    paper's 50 users); ``turns_per_user``: the release's turns per user (T); ``attribution``:
    the release's attribution S1+S2 calls per mode over 50 users.
    """

    table5_m: tuple[float, float]
    turns_per_user: float = Field(gt=0)
    writer_calls_per_write: float = Field(default=0.0, ge=0)
    first_write_saves: float = Field(default=0.0, ge=0)  # A-Mem: the first note evolves with none
    writer_in_table5: bool = True  # False: the write side ran on another model (not counted)
    writer_tokens_known: bool = True  # False: no paper table counts the write side's tokens
    probe_calls_per_query: float = Field(default=0.0, ge=0)  # a searched store that calls a model
    empty_store: bool = False  # stores nothing: slot-fill over it makes no call
    # Each write stores one item (A-Mem's notes), so a finished store counts its writes and the
    # audit can check its write side exactly; otherwise the audit reports it as unknown.
    one_item_per_write: bool = False
    attribution: dict[str, int] = Field(default_factory=dict)
    # The share of those retrieve-mode calls a run of ours pays: the release asked them over an
    # empty transcript (compat.retrieve_attribution_empty_transcript); ours ask over the real
    # one, so a target missed in both modes asks dump_all's question again and the cache
    # answers it. Counted on the release's users 001-025 (docs/release-format.md, §7).
    retrieve_attribution_paid: float = Field(default=1.0, ge=0, le=1)


class SystemSpec(_Frozen):
    name: str
    target: str  # "module:Class"
    searchable: bool  # has search(): retrieve mode applies
    llm_writer: bool = False  # its write path calls an LLM (the writer role)
    embeds: bool = False  # calls memprobe.serving.embeddings (the run's embedding server serves it)
    # ``encodes_in_job(cfg)``: whether, under this config, its jobs encode in-process instead of
    # through the run's embedding server (its settings put them on a host of their own).
    encodes_in_job: Callable[[Any], bool] | None = None
    prompts: tuple[str, ...] = ()  # its own prompt files (<prompt_dir>/<name>.md), rollout inputs
    # Where its prompt files are: a folder beside its module (a plugin ships its own), or None
    # for the repository's prompts/ (the built-ins).
    prompt_dir: str | None = None
    settings: type[BaseModel] | None = None  # validated under system_settings.<name>
    # Keys of its settings that change how its jobs run, never what they write (a server's
    # executable, a key's variable, a GPU's placement): changing one reruns nothing.
    runtime_settings: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()  # other config keys its code reads (its jobs rerun on them)
    # What the run checks of it, when it is in ``systems`` (not imported): ``check(cfg)`` when
    # the config is validated (raises ValueError: one line naming the key); ``preflight(cfg,
    # local_files)`` before the first job (problems, one line each; ``local_files``: its jobs
    # run on this machine); ``key_variables(cfg)``, the variables its jobs read keys from.
    check: Callable[[Any], None] | None = None
    preflight: Callable[[Any, bool], list[str]] | None = None
    key_variables: Callable[[Any], list[str]] | None = None
    # Its store is its memories.json dump (``load_dump``): ``memprobe search --memories``
    # searches a dump alone.
    dump_is_store: bool = False
    # Other modules of its own whose code shapes what it writes (dotted names): inputs of its
    # jobs like its module (an edit reruns its jobs); any other module of its package is not.
    parts: tuple[str, ...] = ()
    # Whether its recall can change what it later stores. A replay (rollout.replay) runs a
    # recall that can, and skips one that only reads: the reply it would feed is the
    # recording's, so its calls would be paid for nothing. Unknown (a plugin that does not
    # say) counts as "can": a skipped write would make the store wrong, a kept read only costs.
    recall_changes_store: bool = True
    resources: Resources = Field(default_factory=Resources)
    priors: CostPriors | None = None  # None: the estimate reports its calls as unknown

    @property
    def module(self) -> str:
        return self.target.split(":", 1)[0]

    def uses_run_embedder(self, cfg: Any) -> bool:
        """Whether its jobs send their encodes to the run's embedding server under ``cfg``."""
        return self.embeds and not (self.encodes_in_job and self.encodes_in_job(cfg))

    def source_files(self) -> list[str]:
        """Its module's file and its parts', declared as rule inputs so that editing one
        reruns its jobs."""
        try:
            return [module_file(m) for m in (self.module, *self.parts)]
        except ValueError as err:
            raise ValueError(f"system {self.name!r}: {err}") from None

    def prompt_files(self) -> dict[str, str]:
        """Its prompt files by name, relative to the working directory (rule inputs)."""
        if self.prompt_dir is None:
            folder = WORKFLOW_PROMPTS
        else:
            folder = Path(_origin(self.module)).parent / self.prompt_dir
        return {p: os.path.relpath(folder / f"{p}.md") for p in self.prompts}


def _origin(module: str) -> str:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"module {module} not importable")
    return spec.origin


def module_file(module: str) -> str:
    """A module's file relative to the working directory, for rule inputs.

    Relative even outside it (``../``): a storage provider (profiles/kubernetes) maps every
    input into its prefix, and an absolute path there would become prefix + absolute path.
    """
    return os.path.relpath(Path(_origin(module)).resolve())


C = TypeVar("C", bound=type)


def declare(name: str, **fields: Any) -> Callable[[C], C]:
    """Class decorator: the system's one declaration, kept on the class as ``spec``."""

    def wrap(cls: C) -> C:
        cls.spec = SystemSpec(  # type: ignore[attr-defined]
            name=name, target=f"{cls.__module__}:{cls.__qualname__}", **fields
        )
        return cls

    return wrap


def _load(target: str, where: str) -> SystemSpec:
    found = getattr(resolve(target, where), "spec", None)
    if not isinstance(found, SystemSpec):
        raise RegistryError(f"{where}: {target} carries no declaration (decorate it with declare)")
    return found


@cache
def specs() -> dict[str, SystemSpec]:
    """Every system, built-ins first; loaded once, on first use."""
    out: dict[str, SystemSpec] = {}
    for target in BUILTIN:
        s = _load(target, "built-in system")
        out[s.name] = s
    for name, target, where in plugins(ENTRY_POINT_GROUP):
        if name in out:
            raise RegistryError(f"{where}: {name!r} is a built-in system's name; rename it")
        s = _load(target, where)
        if s.name != name:
            raise RegistryError(f"{where}: its class declares the name {s.name!r}")
        out[s.name] = s
    return out


def system_names() -> list[str]:
    return sorted(specs())


def builtin(name: str) -> bool:
    """One of the paper's systems (the paper's priors are theirs, not a plugin's)."""
    s = specs().get(name)
    return s is not None and s.target in BUILTIN


def unknown(name: str) -> str:
    """Why ``name`` is not a system: what was found, and where a plugin must be installed."""
    return (
        f"unknown system {name!r}; expected one of {', '.join(system_names())} "
        f"({searched(ENTRY_POINT_GROUP)}: a plugin must be installed into the interpreter that "
        "runs snakemake, docs/plugins.md)"
    )


def spec(name: str) -> SystemSpec:
    try:
        return specs()[name]
    except KeyError:
        raise ValueError(unknown(name)) from None


def create(name: str, **kwargs: Any) -> Any:
    """Instantiate a system by name."""
    module, cls = spec(name).target.split(":", 1)
    return getattr(importlib.import_module(module), cls)(**kwargs)


def bare(name: str) -> Any:
    """An instance of a system built without its constructor (no config, no LLM clients): for
    a store loaded whole from a dump (``dump_is_store``)."""
    module, cls = spec(name).target.split(":", 1)
    kind = getattr(importlib.import_module(module), cls)
    return kind.__new__(kind)
