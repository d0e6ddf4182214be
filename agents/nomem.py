"""nomem: the no-memory floor. Stores nothing, has no search."""

from __future__ import annotations

from typing import Any

from memprobe.agents.base import MemorySystem


class NoMemory(MemorySystem):
    name = "nomem"
    searchable = False
    remembers = False

    def get_all_memories(self) -> list[dict[str, Any]]:
        return []
