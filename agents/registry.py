"""Which memory systems exist, and what the DAG needs to know about them at load time.

This module must stay import-light (no torch, no mem0): the Snakefile reads it to build the
DAG. The system classes are imported only inside jobs, by :func:`create`.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

ENTRY_POINT_GROUP = "memprobe.systems"


@dataclass(frozen=True)
class SystemSpec:
    name: str
    target: str  # "module:Class"
    searchable: bool  # has search(): retrieve mode applies
    gpu: bool = False  # rollout/probe jobs need a GPU (memt)
    llm_writer: bool = False  # its write path calls an LLM
    embeds: bool = False  # calls memprobe.serving.embeddings (the run's embedding server serves it)
    prompts: tuple[str, ...] = ()  # its own prompt files (prompts/<name>.md), rollout inputs

    @property
    def module(self) -> str:
        return self.target.split(":", 1)[0]

    def source_file(self) -> str:
        """The module file, declared as a rule input so that editing it reruns its jobs."""
        try:
            return module_file(self.module)
        except ValueError as err:
            raise ValueError(f"system {self.name!r}: {err}") from None


def module_file(module: str) -> str:
    """A module's file relative to the working directory, for rule inputs.

    Relative even outside it (``../``): a storage provider (profiles/kubernetes) maps every
    input into its prefix, and an absolute path there would become prefix + absolute path.
    """
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"module {module} not importable")
    return os.path.relpath(Path(spec.origin).resolve())


BUILTIN: dict[str, SystemSpec] = {
    s.name: s
    for s in (
        SystemSpec("nomem", "memprobe.agents.nomem:NoMemory", searchable=False),
        SystemSpec(
            "longctx_full", "memprobe.agents.longctx:LongContext", searchable=True, embeds=True
        ),
        SystemSpec(
            "amem",
            "memprobe.agents.amem:AMem",
            searchable=True,
            llm_writer=True,
            embeds=True,
            prompts=("amem_analyze", "amem_evolve"),
        ),
        SystemSpec("mem0", "memprobe.agents.mem0:Mem0", searchable=True, llm_writer=True),
        SystemSpec(
            "memt",
            "memprobe.agents.memt:MemT",
            searchable=True,
            gpu=True,
            llm_writer=True,
            embeds=True,
            prompts=("memt_formation", "memt_update", "memt_retrieve"),
        ),
    )
}


@cache
def _plugins() -> dict[str, SystemSpec]:
    found: dict[str, SystemSpec] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        cls = ep.load()
        found[ep.name] = SystemSpec(
            ep.name,
            ep.value,
            searchable=bool(getattr(cls, "searchable", True)),
            gpu=bool(getattr(cls, "gpu", False)),
            llm_writer=bool(getattr(cls, "llm_writer", False)),
            embeds=bool(getattr(cls, "embeds", False)),
            prompts=tuple(getattr(cls, "prompt_files", ())),
        )
    return found


def specs() -> dict[str, SystemSpec]:
    return {**_plugins(), **BUILTIN}


def system_names() -> list[str]:
    return sorted(specs())


def spec(name: str) -> SystemSpec:
    try:
        return specs()[name]
    except KeyError:
        raise ValueError(
            f"unknown system {name!r}; expected one of {', '.join(system_names())}"
        ) from None


def create(name: str, **kwargs: Any):
    """Instantiate a system by name (imports its module only now)."""
    module, cls = spec(name).target.split(":", 1)
    return getattr(importlib.import_module(module), cls)(**kwargs)
