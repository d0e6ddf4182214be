"""A two-dimension bank and a slot-fill over a synthetic store."""

from __future__ import annotations

from memprobe.protocol import recovery
from memprobe.spec import taxonomy
from memprobe.spec.prompts import prompt_path
from memprobe.spec.records import (
    Bank,
    BankEntry,
)

BANK = Bank(
    user_id="user_001",
    entries=[
        BankEntry(
            category="skill_memory",
            dimension="critical_thinking_skill",
            short="Checks sources twice",
            explanation="SECRET-EXPLANATION",
        ),
        BankEntry(
            category="assistance_preference",
            dimension="verbosity_preference",
            short="Wants bullet points",
            explanation="SECRET-EXPLANATION-2",
        ),
    ],
)


GUIDES = taxonomy.load_guides()


def store(n: int, chars: int) -> list[dict]:
    return [{"content": f"note {i} " + "y" * chars} for i in range(n)]


def slotfill(memories, llm, mode="dump_all", **kw):
    return recovery.slotfill_user(
        user_id="user_001",
        system="memt",
        mode=mode,
        bank=BANK,
        guides=GUIDES,
        llm=llm,
        prompt=str(prompt_path("slotfill")),
        memories=memories,
        **kw,
    )
