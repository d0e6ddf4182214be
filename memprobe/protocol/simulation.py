"""The rollout: one user's tasks, in bank order, against one memory system.

Everything but the memory module is held constant (paper §3.3): the simulator, the assistant
scaffold and episode control are shared. Memory persists across a user's tasks; a system
instance is built (and reset) per user, so nothing crosses users.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import Any

from pydantic import BaseModel, Field, create_model

from memprobe.agents.base import HistoryTurn, MemorySystem
from memprobe.llm.client import LLM
from memprobe.llm.salvage import Exhausted, cut_at_sentence, json_value, last_lenient, strip_fence
from memprobe.protocol.bank import bank_block
from memprobe.protocol.persona import persona_block
from memprobe.spec.prompts import dialogue, render
from memprobe.spec.records import (
    Bank,
    Episode,
    Episodes,
    Memories,
    Metric,
    Persona,
    StandIn,
    Tasks,
    Turn,
)
from memprobe.vocabulary import FEEDBACK_TYPES, EndReason, FeedbackType

log = logging.getLogger("memprobe")


DEFAULT_MAX_REPLY_CHARS = 1500  # simulator.max_reply_chars (config.yaml); the release set none
FALLBACK_FEEDBACK: FeedbackType = "followup"  # the release's, never a silent "satisfied"
FALLBACK_TEXT = "Can you go on?"


class SimulatorReply(BaseModel):
    feedback_type: FeedbackType
    text: str = Field(min_length=1, max_length=DEFAULT_MAX_REPLY_CHARS)


@cache
def reply_schema(max_chars: int | None) -> type[SimulatorReply]:
    """The simulator's reply with ``text`` capped at ``max_chars`` (None: no cap)."""
    if max_chars == DEFAULT_MAX_REPLY_CHARS:
        return SimulatorReply
    text = (str, Field(min_length=1, max_length=max_chars))
    return create_model("SimulatorReply", __base__=SimulatorReply, text=text)


def simulator_stand_in(
    spent: Exhausted, max_chars: int | None = DEFAULT_MAX_REPLY_CHARS
) -> tuple[SimulatorReply, StandIn]:
    """The user's turn when the re-asks ran out: the latest reply with its text cut at a
    sentence end to the cap (``max_chars``; None: no cap, nothing is cut); else its feedback
    type if valid (``followup`` otherwise, as the release fell back) and its text (or its
    prose, or a neutral nudge). A stand-in feedback type moves metrics A and C, so it is
    marked as touching them."""
    schema = reply_schema(max_chars)
    fixed = last_lenient(spent.replies, schema)
    if fixed is not None:
        value, cut = fixed
        return value, spent.stand_in("simulator", f"cut {', '.join(cut)}")
    parsed = json_value(spent.last)
    obj: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
    given = obj.get("feedback_type")
    kind: FeedbackType = given if given in FEEDBACK_TYPES else FALLBACK_FEEDBACK
    text = obj.get("text") if parsed is not None else strip_fence(spent.last)
    text = text.strip() if isinstance(text, str) else ""
    if max_chars is not None:
        text = cut_at_sentence(text, max_chars)
    parts = [] if kind == given else [f"feedback_type {kind}"]
    if not text:
        text = FALLBACK_TEXT
        parts.append(f"text {FALLBACK_TEXT!r}")
    action = "stand-in " + " and ".join(parts) if parts else "kept the latest reply's fields"
    touches: list[Metric] = ["A", "C"] if kind != given else []
    return schema(feedback_type=kind, text=text), spent.stand_in("simulator", action, touches)


RECENT_OWN = 3  # the simulator's own latest messages, shown with a do-not-repeat note


def recent_own(history: list[HistoryTurn]) -> str:
    return "\n".join(f"- {h['user']}" for h in history[-RECENT_OWN:]) or "(none yet)"


def transcript_text(history: list[HistoryTurn]) -> str:
    if not history:
        return "(no prior turns)"
    return dialogue((h["agent"], h["user"]) for h in history)


def simulate_user(
    llm: LLM,
    prompt: str,
    persona: Persona,
    bank: Bank,
    task: str,
    history: list[HistoryTurn],
    reply: str,
    turn: int,
    where: str,
    max_chars: int | None = DEFAULT_MAX_REPLY_CHARS,
    stand_ins: list[StandIn] | None = None,
) -> SimulatorReply:
    messages = render(
        prompt,
        persona=persona_block(persona),
        bank=bank_block(bank),
        task=task,
        transcript=transcript_text(history),
        recent=recent_own(history),
        turn=turn,
        reply=reply,
    )

    def stand_in(spent: Exhausted) -> SimulatorReply:
        reply, note = simulator_stand_in(spent, max_chars)
        if stand_ins is not None:
            stand_ins.append(note)
        return reply

    return llm.json(messages, reply_schema(max_chars), where=where, stand_in=stand_in)


def run_episode(
    system: MemorySystem,
    simulator: LLM,
    prompt: str,
    persona: Persona,
    bank: Bank,
    index: int,
    task: str,
    target_dimension: str,
    max_turns: int,
    max_chars: int | None = DEFAULT_MAX_REPLY_CHARS,
    stand_ins: list[StandIn] | None = None,
) -> Episode:
    history: list[HistoryTurn] = []
    turns: list[Turn] = []
    end_reason: EndReason = "max_turns"
    for turn in range(1, max_turns + 1):
        where = f"user {persona.user_id}, system {system.name}, episode {index}, turn {turn}"
        reply = system.respond(index, task, history)
        fb = simulate_user(
            simulator,
            prompt,
            persona,
            bank,
            task,
            history,
            reply,
            turn,
            where,
            max_chars,
            stand_ins,
        )
        turns.append(
            Turn(
                turn=turn,
                agent_response=reply,
                feedback_type=fb.feedback_type,
                user_text=fb.text,
                recalled=system.last_recall,
            )
        )
        history.append({"agent": reply, "user": fb.text})
        if fb.feedback_type == "satisfied":
            end_reason = "satisfied"
            break
    # The final user message comes after the agent's last call: hand it to the write path.
    system.end_episode(index, task, history)
    return Episode(
        index=index,
        task=task,
        target_dimension=target_dimension,
        end_reason=end_reason,
        turns=turns,
    )


def rollout(
    system: MemorySystem,
    simulator: LLM,
    prompt: str,
    persona: Persona,
    bank: Bank,
    tasks: Tasks,
    max_turns: int,
    max_chars: int | None = DEFAULT_MAX_REPLY_CHARS,
) -> Episodes:
    system.reset(persona.user_id)
    episodes: list[Episode] = []
    stand_ins: list[StandIn] = []
    n = len(tasks.tasks)
    for t in tasks.tasks:
        ep = run_episode(
            system,
            simulator,
            prompt,
            persona,
            bank,
            t.index,
            t.task,
            t.target_dimension,
            max_turns,
            max_chars,
            stand_ins,
        )
        episodes.append(ep)
        log.info(
            "rollout %s %s: episode %d/%d, %d turns, %s, %d memories",
            system.name,
            persona.user_id,
            t.index,
            n,
            len(ep.turns),
            ep.end_reason,
            len(system.get_all_memories()),
        )
    return Episodes(
        user_id=persona.user_id, system=system.name, episodes=episodes, recoveries=stand_ins
    )


# -- replay (rollout.replay) -----------------------------------------------------------------
def replayable(system: MemorySystem) -> None:
    """A replay drives the hooks ``respond`` calls (recall, end_turn, end_episode); a system
    that sequences its own turn in ``respond`` could write elsewhere, so it is refused."""
    if type(system).respond is not MemorySystem.respond:
        raise ValueError(
            f"rollout.replay: system {system.name} overrides MemorySystem.respond; a replay "
            "drives its hooks (recall, end_turn, end_episode) and cannot know what else it does"
        )


def replay_episode(system: MemorySystem, recorded: Episode) -> Episode:
    """One recorded episode through the system's hooks, as ``run_episode`` would call them
    had the assistant and the simulator answered what the recording holds."""
    index, task = recorded.index, recorded.task
    history: list[HistoryTurn] = []
    turns: list[Turn] = []
    for t in recorded.turns:
        system.replay_turn(index, task, history)
        turns.append(t.model_copy(update={"recalled": system.last_recall}))
        history.append({"agent": t.agent_response, "user": t.user_text})
    # The final user message, as after a live episode (docs/release-format.md §3.4).
    system.end_episode(index, task, history)
    return recorded.model_copy(update={"turns": turns})


def replay(system: MemorySystem, recorded: Episodes, run: str) -> Episodes:
    """A user's recorded episodes of ``run``, in order, through a fresh store."""
    replayable(system)
    system.reset(recorded.user_id)
    episodes: list[Episode] = []
    n = len(recorded.episodes)
    for ep in recorded.episodes:
        episodes.append(replay_episode(system, ep))
        log.info(
            "replay %s of %s %s: episode %d/%d, %d turns, %d memories",
            system.name,
            run,
            recorded.user_id,
            ep.index,
            n,
            len(ep.turns),
            len(system.get_all_memories()),
        )
    return Episodes(user_id=recorded.user_id, system=system.name, episodes=episodes, replay=run)


def memories_record(system: MemorySystem, user: str, name: str) -> Memories:
    """The store as the rollout and replay rules write it beside their episodes."""
    items = system.get_all_memories()
    return Memories(
        user_id=user, system=name, num_memories=len(items), memories=items, meta=system.meta()
    )
