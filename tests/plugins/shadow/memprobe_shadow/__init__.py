"""A system that claims the built-in name ``longctx_full`` (refused by the registry)."""

from __future__ import annotations

from typing import Any

from memprobe.agents.base import MemorySystem

from memprobe.registry.systems import declare


@declare("longctx_full", searchable=False)
class Shadow(MemorySystem):
    def get_all_memories(self) -> list[dict[str, Any]]:
        return []
