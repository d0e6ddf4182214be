"""amem: our implementation of A-Mem's published algorithm (agentic notes that evolve).

Write path (the same turns the release stored): turn 1 writes the task, each later turn the
previous user message, and ``end_episode`` the final user message. Agent replies are not
stored. Each note:

1. gets LLM-written ``keywords``, ``context`` and ``tags`` (the ``writer`` role, prompt
   ``amem_analyze``);
2. is compared with its nearest neighbours (MiniLM cosine over the notes' enhanced text);
3. goes with those neighbours into an evolution call (prompt ``amem_evolve``) that may link the
   new note to some of them and rewrite their context and tags.

Links and every evolution step are kept on the notes, so they appear in the dump (the paper's
App. F lists links among the serialised fields); ``system_settings.amem.item_shape: release``
gives the release's items instead (docs/release-format.md §2.7): dump items without links,
evolution history and task index, search hits with the release's seven fields, a blank category
and a cosine distance. Unlike the release (§3.5, §8.3), the search index is rebuilt from the
notes' current enhanced text, so a neighbour update reaches ``search`` as well;
``compat.amem_stale_index`` searches each note's text as it was when the note was filed.

Read path: the latest user message (turn 1: the task) searches the store; the top 5 are shown
as ``content [tags: ...]``.
"""

from __future__ import annotations

import json
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import GenericAlias
from typing import Any, Literal

from memprobe.agents.base import HistoryTurn, MemorySystem, latest_user_message
from pydantic import BaseModel, Field, create_model

from memprobe.config.schema import WriterSettings
from memprobe.registry.systems import CostPriors, Settings, declare
from memprobe.spec.prompts import render
from memprobe.spec.records import write_atomic

STORE_FILE = "amem_notes.json"
NEIGHBOURS = 5
RECALL_K = 5


class NoteAnalysis(BaseModel):
    keywords: list[str] = Field(min_length=1, max_length=8)
    context: str = Field(min_length=1, max_length=400)
    tags: list[str] = Field(min_length=1, max_length=8)


class NeighbourUpdate(BaseModel):
    neighbour: int  # the number shown in the prompt (1-based)
    context: str = Field(min_length=1, max_length=400)
    tags: list[str] = Field(min_length=1, max_length=8)


class Evolution(BaseModel):
    should_evolve: bool
    actions: list[Literal["strengthen", "update_neighbor"]] = Field(max_length=2)
    links: list[int] = Field(default_factory=list)  # neighbour numbers to link to
    tags: list[str] = Field(default_factory=list, max_length=8)  # new note's tags if strengthened
    neighbour_updates: list[NeighbourUpdate] = Field(default_factory=list)


def evolution_schema(n: int) -> type[Evolution]:
    """Neighbour numbers constrained to 1..n, so a reply cannot name a note it was not shown."""
    # Types built at run time: list[number] and list[update], as pydantic reads them.
    number: Any = Literal[tuple(range(1, n + 1))]
    update = create_model("NeighbourUpdate", __base__=NeighbourUpdate, neighbour=(number, ...))
    links: Any = GenericAlias(list, number)
    updates: Any = GenericAlias(list, update)
    return create_model(
        "Evolution",
        __base__=Evolution,
        links=(links, Field(default_factory=list, max_length=n)),
        neighbour_updates=(updates, Field(default_factory=list, max_length=n)),
    )


def enhanced_text(note: dict[str, Any]) -> str:
    """What the index embeds: content plus the note's current LLM-written metadata."""
    text = note["content"]
    if note.get("context") and note["context"] != "General":
        text += f" context: {note['context']}"
    if note.get("keywords"):
        text += f" keywords: {', '.join(note['keywords'])}"
    if note.get("tags"):
        text += f" tags: {', '.join(note['tags'])}"
    return text


def _bullets(values: list[str]) -> str:
    return ", ".join(values) if values else "(none)"


class AMemSettings(Settings):
    """``system_settings.amem``: its write path's model (the release wrote at 1.0) and the
    shape of the items its dump and search hand to the slot-filler."""

    writer: WriterSettings = Field(default_factory=WriterSettings)
    """A-Mem's write path, over the `writer` role"""
    item_shape: Literal["ours", "release"] = "ours"
    """`ours` (links, evolution, task index) or `release` (the release's dump and 7-field search
    hits)"""


# The release's items (A-Mem's notes as its agent returned them, docs/release-format.md §2.7).
RELEASE_DUMP_FIELDS = ("id", "content", "keywords", "context", "tags", "category")
RELEASE_HIT_FIELDS = ("id", "content", "keywords", "context", "tags")


@declare(
    "amem",
    searchable=True,
    llm_writer=True,
    embeds=True,
    prompts=("amem_analyze", "amem_evolve"),
    settings=AMemSettings,
    reads=("compat.amem_stale_index",),
    recall_changes_store=False,  # search only
    priors=CostPriors(
        table5_m=(126.82, 9.04),
        turns_per_user=77.6,
        writer_calls_per_write=2.0,  # analyze + evolve
        first_write_saves=1.0,
        one_item_per_write=True,
        attribution={"dump_all": 610, "retrieve": 886},
        retrieve_attribution_paid=0.42,
    ),
)
class AMem(MemorySystem):
    def reset(self, user_id: str) -> None:
        super().reset(user_id)
        self.notes: list[dict[str, Any]] = []
        # text -> embedding, for note texts (a note whose metadata changed has a new text, so
        # a stale row is never reused) and for queries: a turn searches with the user's
        # message, then files that same message as a note and searches with it again.
        self._vectors: dict[str, Any] = {}
        self._ahead: Future | None = None  # the encode add_note started (see _encode_ahead)
        self._pool: ThreadPoolExecutor | None = None
        # Each note's enhanced text when it was filed (compat.amem_stale_index searches these).
        self._filed: dict[str, str] = {}

    # -- read path ------------------------------------------------------------------------
    def recall(self, task: str, history: list[HistoryTurn]) -> list[str]:
        hits = self.search(latest_user_message(task, history), RECALL_K)
        return [f"{h['content']}  [tags: {', '.join(h['tags'])}]" for h in hits]

    # -- write path -----------------------------------------------------------------------
    def end_turn(self, task_index: int, task: str, history: list[HistoryTurn]) -> None:
        if not history:
            self.add_note(task, "task", task_index)
        else:
            self.add_note(history[-1]["user"], "user", task_index)

    def end_episode(self, task_index: int, task: str, history: list[HistoryTurn]) -> None:
        if history:
            self.add_note(history[-1]["user"], "user", task_index)

    def add_note(self, content: str, category: str, task_index: int) -> dict[str, Any]:
        if self.writer is None:
            raise ValueError("system amem needs the writer role (its notes are LLM-written)")
        step = len(self.notes) + 1
        where = f"user {self.user_id}, amem note {step}"
        analysis = self.writer.json(
            render(self._prompt("amem_analyze"), content=content), NoteAnalysis, where=where
        )
        note: dict[str, Any] = {
            "id": f"n{step:04d}",
            "content": content,
            "category": category,
            "task_index": task_index,
            "keywords": analysis.keywords,
            "context": analysis.context,
            "tags": analysis.tags,
            "links": [],
            "evolution_history": [],
        }
        neighbours = [self.notes[i] for i, _ in self._nearest(content, NEIGHBOURS)]
        if neighbours:
            self._evolve(note, neighbours, step, where)
        self.notes.append(note)
        self._filed[note["id"]] = enhanced_text(note)
        self._encode_ahead()
        return note

    def _evolve(
        self, note: dict[str, Any], neighbours: list[dict[str, Any]], step: int, where: str
    ) -> None:
        assert self.writer is not None, "add_note checked it"
        listing = "\n".join(
            f"{i}. content: {n['content']}\n   context: {n['context']}\n"
            f"   keywords: {_bullets(n['keywords'])}\n   tags: {_bullets(n['tags'])}"
            for i, n in enumerate(neighbours, 1)
        )
        evo = self.writer.json(
            render(
                self._prompt("amem_evolve"),
                content=note["content"],
                context=note["context"],
                keywords=_bullets(note["keywords"]),
                tags=_bullets(note["tags"]),
                neighbours=listing,
                count=len(neighbours),
            ),
            evolution_schema(len(neighbours)),
            where=f"{where} (evolution)",
        )
        if not evo.should_evolve:
            return
        if "strengthen" in evo.actions:
            for i in dict.fromkeys(evo.links):  # keep order, drop repeats
                target = neighbours[i - 1]["id"]
                if target not in note["links"]:
                    note["links"].append(target)
            old_tags = note["tags"]
            if evo.tags:
                note["tags"] = list(evo.tags)
            note["evolution_history"].append(
                {
                    "step": step,
                    "action": "strengthen",
                    "links": list(note["links"]),
                    "old_tags": old_tags,
                    "new_tags": note["tags"],
                }
            )
        if "update_neighbor" in evo.actions:
            for upd in evo.neighbour_updates:
                nb = neighbours[upd.neighbour - 1]
                nb["evolution_history"].append(
                    {
                        "step": step,
                        "action": "update_neighbor",
                        "by": note["id"],
                        "old_context": nb["context"],
                        "new_context": upd.context,
                        "old_tags": nb["tags"],
                        "new_tags": list(upd.tags),
                    }
                )
                nb["context"] = upd.context
                nb["tags"] = list(upd.tags)

    # -- index ----------------------------------------------------------------------------
    def _index_texts(self) -> list[str]:
        """What the index embeds per note: its current enhanced text, or (the release's index,
        ``compat.amem_stale_index``) the text it had when it was filed."""
        if self.config.compat.amem_stale_index:
            return [self._filed[n["id"]] for n in self.notes]
        return [enhanced_text(n) for n in self.notes]

    def _missing(self, texts: list[str]) -> list[str]:
        """The texts without a vector yet, each once, in order (what a search encodes)."""
        return [t for t in dict.fromkeys(texts) if t not in self._vectors]

    def _encode_ahead(self) -> None:
        """Encode the notes a write added or changed while the next LLM call is in flight.

        The next search would encode exactly this batch (nothing changes the notes until the
        next write), so the vectors are the same; the rollout no longer waits for them between
        the simulator's reply and the assistant's call, on its critical path (issue 20). Only
        with the run's embedding server: without it, this would load torch in a thread of a
        job that may never search (a test, a rollout's last write).
        """
        from memprobe.serving import embeddings

        if not embeddings.served():
            return
        missing = self._missing(self._index_texts())  # its search took the last
        if missing:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="amem-encode")
            self._ahead = self._pool.submit(
                lambda: dict(zip(missing, embeddings.encode(missing), strict=True))
            )

    def _take_ahead(self) -> None:
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            self._vectors.update(ahead.result())  # an encode's error surfaces here

    def _nearest(self, query: str, k: int) -> list[tuple[int, float]]:
        if not self.notes:
            return []
        from memprobe.serving import embeddings  # torch loads only when a store is searched

        self._take_ahead()
        texts = self._index_texts()
        missing = self._missing(texts)
        if missing:
            self._vectors.update(zip(missing, embeddings.encode(missing), strict=True))
        import numpy as np

        matrix = np.stack([self._vectors[t] for t in texts])
        if query not in self._vectors:  # alone, as before: a batch would pad it with others
            self._vectors[query] = embeddings.encode([query])[0]
        return embeddings.top_k(self._vectors[query], matrix, k)

    # -- probes ---------------------------------------------------------------------------
    @property
    def _release_shape(self) -> bool:
        return self.config.system_settings.amem.item_shape == "release"

    def get_all_memories(self) -> list[dict[str, Any]]:
        notes = json.loads(json.dumps(self.notes))
        if self._release_shape:
            return [{f: n[f] for f in RELEASE_DUMP_FIELDS} for n in notes]
        return notes

    def search(self, query: str, k: int) -> list[dict[str, Any]]:
        hits = self._nearest(query, k)
        if self._release_shape:
            # A-Mem's search result: no category (its agent filled in ""), Chroma's distance.
            return [
                {
                    **{f: json.loads(json.dumps(self.notes[i][f])) for f in RELEASE_HIT_FIELDS},
                    "category": "",
                    "score": 1.0 - s,
                }
                for i, s in hits
            ]
        return [{**json.loads(json.dumps(self.notes[i])), "score": s} for i, s in hits]

    def save(self, directory: Path) -> None:
        super().save(directory)
        write_atomic(
            directory / STORE_FILE,
            {"user_id": self.user_id, "notes": self.notes, "filed": self._filed},
        )

    def load(self, directory: Path) -> None:
        state = json.loads((directory / STORE_FILE).read_text(encoding="utf-8"))
        self.reset(state["user_id"])
        self.notes = state["notes"]
        self._filed = state["filed"]

    def meta(self) -> dict[str, Any]:
        return {
            "embedder": "all-MiniLM-L6-v2",
            "neighbours": NEIGHBOURS,
            "recall_k": RECALL_K,
            "links": sum(len(n["links"]) for n in self.notes),
            "evolution_steps": sum(len(n["evolution_history"]) for n in self.notes),
        }
