"""Which servers a run starts: those its scheduled jobs use, and no other (the Snakefile's
``onstart``).

A run that only builds the inspector, the tables or the audit table makes no LLM call and
embeds nothing, so it starts neither the local llama.cpp server nor the embedding server, and
checks no endpoint. What a rule's jobs call is read from the one place that declares it: the
LLM roles of its config slice (memprobe/workflow/config_slices.py) and, for the rules that run
a memory system, that system's declaration (memprobe/registry/systems.py: an LLM write path,
embedding).
The judge role is called only by an LLM judge (``judge.form: llm``); the offline judge
(``form: scorer``, or beside the LLM with ``judge.cross_check``) embeds instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from memprobe.config.schema import Config
from memprobe.registry import systems as registry
from memprobe.workflow.config_slices import SLICES


@dataclass(frozen=True)
class Needs:
    roles: frozenset[str]  # the LLM roles the scheduled jobs call
    systems: frozenset[str]  # the memory systems the scheduled jobs run
    served_llm: bool  # a role is served by a model the run serves itself (its backend starts it)
    # a scheduled job's memory system encodes through the run's server, or its offline judge
    embeddings: bool
    judging: bool  # a scheduled job grades labels with the run's judge (any form)

    @property
    def anything(self) -> bool:
        """Whether any scheduled job calls an endpoint or runs a memory system."""
        return bool(self.roles or self.systems)


def needs(cfg: Config, jobs: Iterable[tuple[str, Mapping[str, str]]]) -> Needs:
    """What the jobs (rule name, wildcards) will call, for this config."""
    roles: set[str] = set()
    systems: set[str] = set()
    for rule, wildcards in jobs:
        piece = SLICES.get(rule)
        if piece is None:  # a rule that reads no config slice calls nothing
            continue
        roles.update(piece.roles)
        if piece.system:
            systems.add(wildcards["system"])
    for name in systems:
        if registry.spec(name).llm_writer:
            roles.add("writer")
    judging = "judge" in roles
    offline_judge = judging and (cfg.judge.form == "scorer" or cfg.judge.cross_check)
    if cfg.judge.form == "scorer":
        roles.discard("judge")
    return Needs(
        roles=frozenset(roles),
        systems=frozenset(systems),
        served_llm=any(cfg.served_context(r) for r in roles),
        embeddings=offline_judge or any(registry.spec(s).uses_run_embedder(cfg) for s in systems),
        judging=judging,
    )
