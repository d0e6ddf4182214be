"""longctx_full: keep every turn verbatim, replay it all in the reply, MiniLM search.

Notes are ``[Task k] <task>``, ``Agent: <reply>`` and ``User: <message>`` in chronological
order. By default the final agent reply of each task is stored too; the release dropped it
(docs/release-format.md §3.5), which ``compat.longctx_drop_final_reply`` reproduces. The
release's longctx reply prompt had no line asking to tailor the help to the person (its
memory systems' prompts had one): ``system_settings.longctx_full.tailor: false``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from memprobe.agents.base import HistoryTurn, MemorySystem

from memprobe.registry.systems import CostPriors, Settings, declare
from memprobe.serving import embeddings
from memprobe.spec.records import write_atomic

STORE_FILE = "notes.json"


class LongContextSettings(Settings):
    """``system_settings.longctx_full``: its reply scaffold."""

    # The reply scaffold's "Tailor your help to this person" (ours: every memory system's).
    tailor: bool = True
    """its reply scaffold asks to tailor the help (the release's longctx prompt did not)"""


@declare(
    "longctx_full",
    searchable=True,
    embeds=True,
    settings=LongContextSettings,
    reads=("compat.longctx_drop_final_reply",),
    dump_is_store=True,  # its notes are exactly its memories.json (load_dump)
    priors=CostPriors(
        table5_m=(238.12, 4.82),
        turns_per_user=77.7,
        attribution={"dump_all": 569, "retrieve": 958},
        retrieve_attribution_paid=0.42,
    ),
)
class LongContext(MemorySystem):
    _matrix: np.ndarray | None = None  # the notes' embeddings, computed at the first search

    def reset(self, user_id: str) -> None:
        super().reset(user_id)
        self.notes: list[dict[str, Any]] = []
        self.episodes: list[tuple[str, list[dict[str, str | None]]]] = []

    def prior(self, task_index: int) -> list[dict[str, str]]:
        messages: list[dict[str, str]] = []
        for task, turns in self.episodes:
            messages.append({"role": "user", "content": task})
            for t in turns:
                if t["agent"] is not None:
                    messages.append({"role": "assistant", "content": t["agent"]})
                messages.append({"role": "user", "content": t["user"] or ""})
        return messages

    def end_episode(self, task_index: int, task: str, history: list[HistoryTurn]) -> None:
        turns: list[dict[str, str | None]] = [dict(h) for h in history]
        if self.config.compat.longctx_drop_final_reply and turns:
            turns[-1]["agent"] = None
        self.episodes.append((task, turns))
        self.notes.append(
            {"content": f"[Task {task_index}] {task}", "category": "task", "task_index": task_index}
        )
        for i, t in enumerate(turns, start=1):
            if t["agent"] is not None:
                self.notes.append(
                    {
                        "content": f"Agent: {t['agent']}",
                        "category": "agent_reply",
                        "task_index": task_index,
                        "turn": i,
                    }
                )
            self.notes.append(
                {
                    "content": f"User: {t['user']}",
                    "category": "user_reply",
                    "task_index": task_index,
                    "turn": i,
                }
            )

    def get_all_memories(self) -> list[dict[str, Any]]:
        return [dict(n) for n in self.notes]

    def search(self, query: str, k: int) -> list[dict[str, Any]]:
        if not self.notes:
            return []
        if self._matrix is None or len(self._matrix) != len(self.notes):
            self._matrix = embeddings.encode([n["content"] for n in self.notes])
        qvec = embeddings.encode([query])[0]
        return [{**self.notes[i], "score": s} for i, s in embeddings.top_k(qvec, self._matrix, k)]

    def save(self, directory: Path) -> None:
        super().save(directory)
        write_atomic(
            directory / STORE_FILE,
            {"notes": self.notes, "episodes": [list(e) for e in self.episodes]},
        )

    def load(self, directory: Path) -> None:
        state = json.loads((directory / STORE_FILE).read_text(encoding="utf-8"))
        self.notes = state["notes"]
        self.episodes = [(t, turns) for t, turns in state["episodes"]]
        self._matrix = None

    def load_dump(self, memories: list[dict[str, Any]]) -> None:
        """Search over a memories.json dump alone (the release's notes are exactly its dump)."""
        self.notes = [dict(m) for m in memories]
        self._matrix = None
