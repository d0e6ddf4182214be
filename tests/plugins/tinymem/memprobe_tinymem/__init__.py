"""tinymem: keeps a writer-made note of each user message, at most ``max_notes`` of them, and
finds notes by the words they share with a query.

The example of docs/plugins.md. Declared once on its class; its prompt file ships in this
package (prompts/tinymem_note.md) and its settings are ``system_settings.tinymem``
(:class:`TinyMemSettings`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from memprobe.agents.base import HistoryTurn, MemorySystem
from pydantic import Field

from memprobe.registry.systems import Settings, declare
from memprobe.spec.prompts import render

STORE_FILE = "tinymem.json"


class TinyMemSettings(Settings):
    max_notes: int = Field(default=50, ge=1)
    """notes kept (the oldest go first)"""
    prefix: str = "note"
    """what each note starts with"""


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


@declare(
    "tinymem",
    searchable=True,
    llm_writer=True,
    prompts=("tinymem_note",),
    prompt_dir="prompts",
    settings=TinyMemSettings,
)
class TinyMem(MemorySystem):
    def reset(self, user_id: str) -> None:
        super().reset(user_id)
        self.notes: list[dict[str, Any]] = []

    def _own(self) -> TinyMemSettings:
        return getattr(self.config.system_settings, self.name)

    def _write(self, message: str, task_index: int) -> None:
        if self.writer is None:
            raise ValueError("system tinymem needs the writer role")
        messages = render(self.prompts["tinymem_note"], message=message)
        where = f"user {self.user_id}, tinymem note {len(self.notes) + 1}"
        note = self.writer.text(messages, where=where).strip()
        own = self._own()
        self.notes.append({"content": f"{own.prefix}: {note}", "task_index": task_index})
        del self.notes[: -own.max_notes]

    def end_turn(self, task_index: int, task: str, history: list[HistoryTurn]) -> None:
        self._write(history[-1]["user"] if history else task, task_index)

    def search(self, query: str, k: int) -> list[dict[str, Any]]:
        """At most ``k`` notes, best first: ``score`` is the share of the query's words a note
        holds; ties go to the newer note. A note sharing no word is not a hit."""
        asked = words(query)
        scored = [
            (len(asked & words(n["content"])) / max(len(asked), 1), i)
            for i, n in enumerate(self.notes)
        ]
        best = sorted((s for s in scored if s[0] > 0), reverse=True)[:k]
        return [{**self.notes[i], "score": round(score, 4)} for score, i in best]

    def get_all_memories(self) -> list[dict[str, Any]]:
        return [dict(n) for n in self.notes]

    def save(self, directory: Path) -> None:
        super().save(directory)
        (directory / STORE_FILE).write_text(json.dumps(self.notes), encoding="utf-8")

    def load(self, directory: Path) -> None:
        self.notes = json.loads((directory / STORE_FILE).read_text(encoding="utf-8"))
