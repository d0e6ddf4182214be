"""nomem: the no-memory floor. Stores nothing, has no search."""

from __future__ import annotations

from typing import Any

from memprobe.agents.base import MemorySystem

from memprobe.registry.systems import CostPriors, declare


@declare(
    "nomem",
    searchable=False,
    priors=CostPriors(
        table5_m=(61.05, 6.07),
        turns_per_user=74.1,
        empty_store=True,
        attribution={"dump_all": 1544},
    ),
)
class NoMemory(MemorySystem):
    remembers = False

    def get_all_memories(self) -> list[dict[str, Any]]:
        return []
