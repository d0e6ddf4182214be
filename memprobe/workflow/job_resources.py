"""The resources and priorities of the rules' jobs (rules/*.smk), as input functions.

- GPUs: only the rollout/probe jobs of a system whose declaration asks for them
  (memprobe/registry/systems.py ``Resources``; memt) ask for any, placed by its settings
  (``GpuPlacement``: ``gpu_model``, ``cpus_per_gpu``; docs/cluster.md). For every other job
  these return None, which drops the resource, so neither the SLURM nor the Kubernetes plugin
  sees a GPU request (both react to the mere presence of ``gpu``/``gpu_model``).
- Size: the rollout and probe jobs of a system that serves its own model
  (``Resources.served_model``; memt: Mem-T-4B, vLLM's host memory, ~500 Mem-T calls per
  rollout) get the large memory and the long runtime; Snakemake needs a number for every job
  of a rule that sets them, so the other systems' jobs get the ordinary job's size (the
  profiles' default-resources hold the same for other rules).
- LLM slots: one per LLM job (``llm_slots`` jobs at once); where the run serves the model
  itself, a share that lets no more jobs run than its server serves well
  (``Backend.capacity``), however high --cores goes.
- Priorities (docs/performance.md): the longest remaining chain first. A rollout is the long
  link of each chain, longer for a system with more calls per turn (the estimate's priors):
  a user's persona, bank and tasks first (they unlock its rollouts), then rollouts by their
  system's expected calls, then scoring in chain order, then the leaves.
"""

from __future__ import annotations

from typing import Any

from memprobe.config.schema import Config
from memprobe.llm.providers import backend
from memprobe.registry import systems as registry
from memprobe.registry.systems import Resources

# served model? -> (mem_mb, runtime in minutes)
JOB_SIZE = {True: (16000, 720), False: (4000, 120)}
# Scoring in chain order, below every rollout.
SCORING_PRIORITY = {"oracle": 6, "probe": 5, "slotfill": 4, "judge": 3, "attribution": 2}
ROLLOUT_PRIORITY = 10  # plus the system's expected conversation calls per user


def _resources(wildcards: Any) -> Resources:
    return registry.spec(wildcards.system).resources


class JobResources:
    """The rules' ``resources:`` callables for one run."""

    def __init__(self, cfg: Config, llm_slots: int | None) -> None:
        self.cfg = cfg
        served = backend(cfg.llm.backend).capacity(cfg)
        self.llm_job = 1 if served is None or not llm_slots else -(-int(llm_slots) // served.jobs)

    def _placement(self, wildcards: Any, key: str) -> Any:
        if not _resources(wildcards).gpus:
            return None
        return getattr(getattr(self.cfg.system_settings, wildcards.system, None), key, None)

    def gpu_count(self, wildcards: Any) -> int | None:
        return _resources(wildcards).gpus or None

    def gpu_model(self, wildcards: Any) -> str | None:
        return self._placement(wildcards, "gpu_model")

    def cpus_per_gpu(self, wildcards: Any) -> int | None:
        return self._placement(wildcards, "cpus_per_gpu")

    def mem_mb(self, wildcards: Any) -> int:
        return JOB_SIZE[_resources(wildcards).served_model][0]

    def runtime(self, wildcards: Any) -> int:
        return JOB_SIZE[_resources(wildcards).served_model][1]

    def probe_llm_slots(self, wildcards: Any) -> int:
        """A system whose search calls its served model takes an LLM slot in its probe."""
        return self.llm_job if _resources(wildcards).served_model else 0


class Priorities:
    """The rules' ``priority:`` values for one run."""

    def __init__(self, cfg: Config) -> None:
        from memprobe.report import estimate_calls, estimate_rates

        calls = estimate_calls.protocol_calls(cfg, estimate_rates.priors(cfg))
        roles = ("assistant", "simulator", "writer")
        self.calls = {s: sum(calls.get((s, r), 0.0) for r in roles) for s in cfg.systems}
        self.scoring = SCORING_PRIORITY
        top = ROLLOUT_PRIORITY + round(max(self.calls.values(), default=0.0))
        self.user = top + 1  # above every rollout

    @property
    def shortest_rollouts(self) -> str:
        """The system whose rollouts make the fewest calls (end first at a rate limit)."""
        return min(self.calls, key=self.calls.__getitem__)  # the config's order breaks ties

    def rollout(self, wildcards: Any) -> int:
        return ROLLOUT_PRIORITY + round(self.calls[wildcards.system])
