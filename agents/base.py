"""The interface every memory system implements, and the shared assistant scaffold.

The scaffold (system prompt, reply role, how the in-episode transcript is shown) is the same
for every system; a system only decides what it reads into ``memory_lines`` / ``prior`` and
what it writes in ``end_turn`` / ``end_episode``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from memprobe.config.schema import Config
from memprobe.llm.client import LLM
from memprobe.registry.systems import SystemSpec
from memprobe.spec.prompts import dialogue, prompt_path, render

HistoryTurn = dict[str, str]  # {"agent": reply, "user": user message}


def agent_input(task: str, history: list[HistoryTurn]) -> str:
    """What the assistant is asked at one turn: the task, then the transcript so far."""
    if not history:
        return task
    return f"{task}\n\n[Conversation so far]\n{dialogue((h['agent'], h['user']) for h in history)}"


def latest_user_message(task: str, history: list[HistoryTurn]) -> str:
    return history[-1]["user"] if history else task


class MemorySystem(ABC):
    """One user's assistant with its memory. One instance per user; ``reset`` empties it."""

    # The system's declaration (memprobe/registry/systems.py ``declare``): name, search, ...
    spec: ClassVar[SystemSpec]
    remembers: bool = True  # a memory system: its scaffold asks to tailor help to the person

    def __init__(
        self,
        *,
        config: Config,
        assistant: LLM | None,  # None: a store opened to be searched alone (memprobe search)
        writer: LLM | None = None,
        workdir: Path | None = None,
        prompts: dict[str, str] | None = None,
    ) -> None:
        self.config = config
        self.assistant = assistant
        self.writer = writer
        self._tune_writer()
        self.workdir = workdir
        # Prompt files come from the rule's declared inputs, so editing one reruns this job.
        self.prompts = {"assistant": str(prompt_path("assistant_system")), **(prompts or {})}
        self.user_id = ""
        self.last_recall: list[str] = []

    def _tune_writer(self) -> None:
        """Apply ``system_settings.<name>.writer`` (model, temperature, max_tokens).

        The write path's model belongs to the system (mem0 extracted with gpt-4o-mini at 0,
        A-Mem wrote at 1.0), so it overrides the global writer role for this system only.
        """
        own = getattr(getattr(self.config.system_settings, self.name, None), "writer", None)
        if self.writer is None or own is None:
            return
        for key, value in own.model_dump(exclude_none=True).items():
            setattr(self.writer, key, value)

    @property
    def name(self) -> str:
        return self.spec.name

    def _prompt(self, name: str) -> str:
        """One of the system's prompt files: the rule's input, else the repository's."""
        return self.prompts.get(name) or str(prompt_path(name))

    @property
    def tailors(self) -> bool:
        """Whether the reply scaffold asks to tailor help to the person: a memory system's
        does, unless its settings turn it off (``system_settings.<name>.tailor``)."""
        own = getattr(self.config.system_settings, self.name, None)
        return self.remembers and getattr(own, "tailor", True)

    # -- lifecycle ------------------------------------------------------------------------
    def reset(self, user_id: str) -> None:
        self.user_id = user_id

    # -- the dialogue -------------------------------------------------------------------------
    def respond(self, task_index: int, task: str, history: list[HistoryTurn]) -> str:
        """The assistant's reply at one turn, after the system's own memory reads."""
        memory_lines = self.recall(task, history)
        self.last_recall = list(memory_lines)  # recorded in the transcript by the rollout
        reply = self.reply(task, history, memory_lines=memory_lines, prior=self.prior(task_index))
        self.end_turn(task_index, task, history)
        return reply

    def replay_turn(self, task_index: int, task: str, history: list[HistoryTurn]) -> None:
        """``respond`` at a recorded turn (``rollout.replay``): the same hooks in the same
        order, without the reply call, whose text is the recording's. Recall runs only where
        it can change the store (``spec.recall_changes_store``); what it shows is recorded."""
        if self.spec.recall_changes_store:
            self.last_recall = list(self.recall(task, history))
        else:
            self.last_recall = []
        self.end_turn(task_index, task, history)

    def reply(
        self,
        task: str,
        history: list[HistoryTurn],
        *,
        memory_lines: list[str],
        prior: list[dict[str, str]],
    ) -> str:
        if memory_lines:
            block = "Memories about this user:\n" + "\n".join(f"- {m}" for m in memory_lines)
        else:
            block = ""
        tailoring = " Tailor your help to this person." if self.tailors else ""
        messages = render(
            self.prompts["assistant"], memory_block=block, tailoring=tailoring, request=""
        )
        system = messages[0]
        user = {"role": "user", "content": agent_input(task, history)}
        where = f"user {self.user_id}, turn {len(history) + 1}"
        assert self.assistant is not None, "a system that replies has its assistant role"
        return self.assistant.text([system, *prior, user], where=where)

    def recall(self, task: str, history: list[HistoryTurn]) -> list[str]:
        """Memory lines shown to the reply call (default: none)."""
        return []

    def prior(self, task_index: int) -> list[dict[str, str]]:
        """Earlier conversation replayed before the current request (default: none)."""
        return []

    def end_turn(self, task_index: int, task: str, history: list[HistoryTurn]) -> None:
        """Write hook after each reply (``history`` excludes the reply just made)."""

    def end_episode(self, task_index: int, task: str, history: list[HistoryTurn]) -> None:
        """Write hook after the episode; ``history`` is complete, final user message included."""

    # -- the probes -----------------------------------------------------------------------
    @abstractmethod
    def get_all_memories(self) -> list[dict[str, Any]]:
        """Every stored item (each with ``content``): the dump_all input and footprint E."""

    def search(self, query: str, k: int) -> list[dict[str, Any]]:
        raise NotImplementedError(f"system {self.name} has no search (retrieve mode)")

    def save(self, directory: Path) -> None:
        """Write the native store so that ``load`` can rebuild it in the probe job."""
        directory.mkdir(parents=True, exist_ok=True)

    def load(self, directory: Path) -> None:
        """Rebuild the store written by ``save``."""

    def meta(self) -> dict[str, Any]:
        """Versions and settings recorded in memories.json."""
        return {}
