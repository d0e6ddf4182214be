"""A two-dimension bank and a slot-fill over a synthetic store."""

from __future__ import annotations

from memprobe.protocol.judge import Grader, llm_grader
from memprobe.protocol.slotfill import slotfill_user
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
    return slotfill_user(
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


# The slot-fill and judge jobs of one longctx_full user in dump_all mode.
KEYS = {"system": "longctx_full", "user": "user_001", "mode": "dump_all"}


def llm_judge(llm) -> Grader:
    """The LLM judge on our judge prompt, answered by ``llm``."""
    return llm_grader(llm, str(prompt_path("recovery_judge")))
