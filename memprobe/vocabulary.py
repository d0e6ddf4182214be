"""The protocol's closed vocabularies, written once: memory categories, access modes, LLM roles
and the simulator's feedback types.

Each is a ``Literal`` type (for records, replies and the config, so a JSON schema sent to a
model lists the same values) and a tuple of its values in order (for loops, tables and
Snakemake's wildcard constraints).
"""

from __future__ import annotations

from typing import Literal, get_args

# The five memory categories of the paper (§3.1), in the tables' order.
Category = Literal[
    "skill_memory",
    "knowledge_memory",
    "episodic_memory",
    "self_model",
    "assistance_preference",
]
CATEGORIES: tuple[str, ...] = get_args(Category)

# How a store is read for scoring: the whole dump, or top-k search per dimension.
Mode = Literal["dump_all", "retrieve"]
MODES: tuple[Mode, ...] = get_args(Mode)

# Every LLM role a run calls (each has its endpoint settings, temperature and ledger rows).
Role = Literal[
    "generator",
    "task_writer",
    "critic",
    "editor",
    "simulator",
    "assistant",
    "writer",
    "preference",
    "slotfill",
    "judge",
    "oracle",
    "disclosure",
]
ROLES: tuple[Role, ...] = get_args(Role)

# The simulated user's reaction to a reply; "satisfied" ends the episode.
FeedbackType = Literal[
    "correction",
    "add_context",
    "too_deep",
    "too_shallow",
    "followup",
    "expose_gap",
    "satisfied",
]
FEEDBACK_TYPES: tuple[str, ...] = get_args(FeedbackType)
EndReason = Literal["satisfied", "max_turns"]

# The stages whose replies can get a stand-in when their re-asks run out (records.StandIn),
# in the protocol's order: the run's last lines and the report count them in this order.
Stage = Literal[
    "persona",
    "bank",
    "task_writer",
    "critic",
    "editor",
    "simulator",
    "preference",
    "slotfill",
    "judge",
    "oracle",
    "disclosure",
    "subclass",
]
STAGES: tuple[Stage, ...] = get_args(Stage)
# The role each stage's structured calls go to: a stage's share of stand-ins is counted over its
# role's calls (memprobe/spec/stand_in_log.py, llm.max_stand_in_share).
STAGE_ROLE: dict[Stage, Role] = {
    "persona": "generator",
    "bank": "generator",
    "task_writer": "task_writer",
    "critic": "critic",
    "editor": "editor",
    "simulator": "simulator",
    "preference": "preference",
    "slotfill": "slotfill",
    "judge": "judge",
    "oracle": "oracle",
    "disclosure": "disclosure",
    "subclass": "disclosure",
}
