"""Simulated users, third stage: one leak-controlled task per target (paper §3.2; rule
``tasks``).

The writer drafts a request that invites the target without naming it; a blind critic, which
sees the category and the request only, calls it neutral or fishing; an editor rewrites a
fishing one, up to ``tasks.max_edits`` times. Each task's leak share (``leaks``) is recorded.
"""

from __future__ import annotations

import logging
from typing import Literal

from pydantic import BaseModel, Field

from memprobe.llm.client import LLM
from memprobe.llm.salvage import (
    Exhausted,
    cut_at_sentence,
    json_value,
    last_lenient,
    longest_text,
    strip_fence,
)
from memprobe.protocol.leaks import leak_report, leak_share
from memprobe.protocol.persona import persona_block
from memprobe.spec.prompts import PROMPT_DIR, render
from memprobe.spec.records import (
    Bank,
    BankEntry,
    CriticVerdict,
    Persona,
    StandIn,
    Task,
    Tasks,
)
from memprobe.spec.taxonomy import load_guides
from memprobe.vocabulary import Stage

log = logging.getLogger("memprobe")

HINTS_FILE = PROMPT_DIR / "elicitation_hints.yaml"  # per category, same keys as the guides


# -- tasks -------------------------------------------------------------------------------
MAX_TASK_CHARS = 600


class TaskDraft(BaseModel):
    task: str = Field(min_length=1, max_length=MAX_TASK_CHARS)
    rationale: str = Field(default="", max_length=300)


class CriticReply(BaseModel):
    inferred_trait: str = Field(max_length=150)
    verdict: Literal["neutral", "fishing"]
    why: str = Field(default="", max_length=300)


GENERIC_TASK = "Could you help me think something through?"


def draft_stand_in(spent: Exhausted, stage: Stage) -> tuple[TaskDraft | None, StandIn]:
    """A writer's or editor's draft when the re-asks ran out: the latest reply with over-long
    fields cut at a sentence end, else the latest reply's text as the request (a model that
    answered in prose, or nested its answer); None when no reply holds any text."""
    fixed = last_lenient(spent.replies, TaskDraft)
    if fixed is not None:
        value, cut = fixed
        return value, spent.stand_in(stage, f"cut {', '.join(cut)}")
    parsed = json_value(spent.last)
    text = longest_text(parsed) if parsed is not None else strip_fence(spent.last)
    text = cut_at_sentence(text, MAX_TASK_CHARS)
    if text:
        return TaskDraft(task=text), spent.stand_in(stage, "the latest reply's text as the task")
    return None, spent.stand_in(stage, "no usable text")


def critic_stand_in(
    spent: Exhausted, task: str, short: str, threshold: float
) -> tuple[CriticReply, StandIn]:
    """The critic's verdict when the re-asks ran out: the latest reply with over-long fields
    cut, else the deterministic leak check's (fishing over ``tasks.leak_threshold``)."""
    fixed = last_lenient(spent.replies, CriticReply)
    if fixed is not None:
        value, cut = fixed
        return value, spent.stand_in("critic", f"cut {', '.join(cut)}")
    share = leak_share(task, short)
    verdict: Literal["neutral", "fishing"] = "fishing" if share > threshold else "neutral"
    why = f"stand-in: {share:.2f} of the target's content words are in the request"
    action = f"verdict {verdict} from the leak check ({share:.2f}, threshold {threshold:g})"
    return CriticReply(inferred_trait="", verdict=verdict, why=why), spent.stand_in(
        "critic", action
    )


def earlier_block(tasks: list[Task]) -> str:
    """The tasks written so far with their targets, so the writer varies the scenes."""
    lines = [f"- {t.target_category}/{t.target_dimension}: {t.task}" for t in tasks]
    return "\n".join(lines) or "(none yet)"


def make_task(
    index: int,
    entry: BankEntry,
    persona: Persona,
    earlier: list[Task],
    guides: dict[str, str],
    llms: dict[str, LLM],
    prompts: dict[str, str],
    max_edits: int,
    leak_threshold: float,
    hints: dict[str, str],
    stand_ins: list[StandIn] | None = None,
) -> Task:
    """Write one task, then criticise and edit it until neutral or ``max_edits`` is spent.

    ``verdicts[i]`` judges version i; ``revisions`` holds every replaced version in order, so
    the final ``task`` is version ``len(revisions)``. The release edited once without a new
    critique; the paper (App. D) asks for the loop, which we keep. A reply whose re-asks ran
    out gets a stand-in (``draft_stand_in``, ``critic_stand_in``), listed in ``stand_ins``;
    an edit without a usable stand-in keeps the version it was asked to edit and ends the loop.
    """
    if stand_ins is None:
        stand_ins = []
    edit_failed = False

    def write_stand_in(spent: Exhausted) -> TaskDraft:
        draft, note = draft_stand_in(spent, "task_writer")
        if draft is None:
            draft = TaskDraft(task=GENERIC_TASK)
            note.action = "a generic opening request (no reply held any text)"
        stand_ins.append(note)
        return draft

    def edit_stand_in(spent: Exhausted) -> TaskDraft:
        nonlocal edit_failed
        draft, note = draft_stand_in(spent, "editor")
        if draft is None:
            edit_failed = True
            draft = TaskDraft(task=text, rationale=rationale)
            note.action = "kept the unedited request and stopped editing (no usable text)"
        stand_ins.append(note)
        return draft

    def stand_in_critic(spent: Exhausted) -> CriticReply:
        reply, note = critic_stand_in(spent, text, entry.short, leak_threshold)
        stand_ins.append(note)
        return reply

    where = f"user {persona.user_id}, task {index} ({entry.dimension})"
    target = {
        "category": entry.category,
        "dimension": entry.dimension,
        "short": entry.short,
        "explanation": entry.explanation,
    }
    draft = llms["task_writer"].json(
        render(
            prompts["write"],
            persona=persona_block(persona, stories=False),
            earlier=earlier_block(earlier),
            guide=guides[entry.category],
            hint=hints[entry.category],
            **target,
        ),
        TaskDraft,
        where=where,
        stand_in=write_stand_in,
    )
    text, rationale = draft.task.strip(), draft.rationale.strip()
    verdicts: list[CriticVerdict] = []
    revisions: list[str] = []
    status: Literal["neutral", "fishing_budget_spent"] = "neutral"
    while True:
        # The critic is blind: it sees the category and the request, never the target.
        crit = llms["critic"].json(
            render(prompts["critic"], category=entry.category, task=text),
            CriticReply,
            where=f"{where}, critic round {len(verdicts) + 1}",
            stand_in=stand_in_critic,
        )
        verdicts.append(
            CriticVerdict(verdict=crit.verdict, inferred_trait=crit.inferred_trait, why=crit.why)
        )
        if crit.verdict == "neutral":
            break
        if len(revisions) >= max_edits:
            status = "fishing_budget_spent"
            log.warning("%s: still fishing after %d edit(s); marked", where, max_edits)
            break
        # The prompt file picks its inputs (prompts.task_edit): the release's editor read the
        # compact profile, the earlier tasks and the category guide; ours reads the stories.
        edit = llms["editor"].json(
            render(
                prompts["edit"],
                persona=persona_block(persona),
                persona_compact=persona_block(persona, stories=False),
                earlier=earlier_block(earlier),
                guide=guides[entry.category],
                **target,
                task=text,
                inferred_trait=crit.inferred_trait,
                why=crit.why,
            ),
            TaskDraft,
            where=f"{where}, edit {len(revisions) + 1}",
            stand_in=edit_stand_in,
        )
        if edit_failed:
            status = "fishing_budget_spent"
            break
        revisions.append(text)
        text, rationale = edit.task.strip(), edit.rationale.strip()
    share = leak_share(text, entry.short)
    return Task(
        index=index,
        task=text,
        rationale=rationale,
        target_category=entry.category,
        target_dimension=entry.dimension,
        target_short=entry.short,
        verdicts=verdicts,
        revisions=revisions,
        status=status,
        leak_share=share,
        leak_flag=share > leak_threshold,
    )


def make_tasks(
    persona: Persona,
    bank: Bank,
    guides: dict[str, str],
    llms: dict[str, LLM],
    prompts: dict[str, str],
    max_edits: int = 3,
    leak_threshold: float = 0.5,
    hints: dict[str, str] | None = None,
) -> Tasks:
    """One task per bank entry, in bank order (sequential: each sees the earlier scenes)."""
    hints = hints if hints is not None else load_guides(HINTS_FILE)
    tasks: list[Task] = []
    stand_ins: list[StandIn] = []
    for i, entry in enumerate(bank.entries, start=1):
        tasks.append(
            make_task(
                i,
                entry,
                persona,
                tasks,
                guides,
                llms,
                prompts,
                max_edits,
                leak_threshold,
                hints,
                stand_ins,
            )
        )
        log.info("tasks %s: %d/%d done", persona.user_id, i, len(bank.entries))
    report = leak_report(tasks, leak_threshold)
    log.info(
        "tasks %s: leak mean %.2f max %.2f, %d flagged over %.2f, %d edited, %d budget spent",
        persona.user_id,
        report.mean_share,
        report.max_share,
        len(report.flagged),
        leak_threshold,
        report.edited,
        report.budget_spent,
    )
    return Tasks(user_id=persona.user_id, tasks=tasks, leak=report, recoveries=stand_ins)
