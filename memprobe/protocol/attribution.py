"""Failure attribution (paper §3.5, Table 10): why was a target not recovered?

Stage 0 (task-design oracle) is computed once per user for every dimension and shared by all
systems and modes. Stages 1 and 2 read the target episode's real transcript in both modes; the
release read an empty one in retrieve mode, which ``compat.retrieve_attribution_empty_transcript``
reproduces. A reply that does not parse is re-asked and then fails loudly; it never becomes a
label by default.
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

from pydantic import BaseModel, Field

from memprobe.llm.client import LLM
from memprobe.spec.prompts import dialogue, render
from memprobe.spec.records import (
    Attribution,
    AttributionEntry,
    Bank,
    Episodes,
    Judge,
    Oracle,
    OracleVerdict,
    Task,
    Tasks,
)
from memprobe.spec.rubric import RUBRIC

EMPTY_TRANSCRIPT = "(empty)"


class OracleReply(BaseModel):
    can_invite: bool
    reason: str = Field(default="", max_length=400)


class DisclosureReply(BaseModel):
    disclosed: bool
    evidence: str = Field(default="", max_length=300)
    reason: str = Field(default="", max_length=300)


class SubclassReply(BaseModel):
    category: Literal["A", "B"]
    reason: str = Field(default="", max_length=300)
    evidence: str = Field(default="", max_length=300)


def run_oracle(bank: Bank, tasks: Tasks, llm: LLM, prompt: str) -> Oracle:
    first_task: dict[str, Task] = {}
    for t in tasks.tasks:
        first_task.setdefault(t.target_dimension, t)

    def one(e) -> tuple[str, OracleVerdict]:
        t = first_task.get(e.dimension)
        if t is None:
            return e.dimension, OracleVerdict(can_invite=False, reason="no targeted task")
        r = llm.json(
            render(
                prompt, task=t.task, dimension=e.dimension, truth=e.short, explanation=e.explanation
            ),
            OracleReply,
            where=f"user {bank.user_id}, oracle {e.dimension}",
        )
        return e.dimension, OracleVerdict(can_invite=r.can_invite, reason=r.reason)

    return Oracle(user_id=bank.user_id, verdicts=dict(llm.map(one, bank.entries)))


def transcript_lines(episode) -> str:
    return dialogue((t.agent_response, t.user_text) for t in episode.turns) or EMPTY_TRANSCRIPT


def attribute_user(
    judge: Judge,
    bank: Bank,
    tasks: Tasks,
    episodes: Episodes,
    oracle: Oracle,
    disclosure: LLM,
    prompts: dict[str, str],
    empty_transcript: bool = False,
) -> Attribution:
    explanation = {e.dimension: e.explanation for e in bank.entries}
    first_task: dict[str, Task] = {}
    for t in tasks.tasks:
        first_task.setdefault(t.target_dimension, t)
    episode_by_index = {e.index: e for e in episodes.episodes}

    def one(d) -> AttributionEntry:
        base = {"category": d.category, "dimension": d.dimension, "score": d.score}
        if RUBRIC.recovered(d.score):
            return AttributionEntry(**base, label="ok", ep_index=None, stages=[])
        task = first_task.get(d.dimension)
        if task is None:
            return AttributionEntry(**base, label="no_targeted_task", ep_index=None, stages=[])
        verdict = oracle.verdicts[d.dimension]
        stages = [{"stage": "oracle", **verdict.model_dump()}]
        if not verdict.can_invite:
            return AttributionEntry(
                **base, label="task_design_failure", ep_index=task.index, stages=stages
            )
        ep = episode_by_index.get(task.index)
        transcript = EMPTY_TRANSCRIPT if (empty_transcript or ep is None) else transcript_lines(ep)
        where = f"user {judge.user_id}, system {judge.system}, {judge.mode}, {d.dimension}"
        # Every stage sees the target's short and explanation, as in the protocol.
        values = {
            "dimension": d.dimension,
            "truth": d.ground_truth,
            "explanation": explanation[d.dimension],
            "task": task.task,
            "transcript": transcript,
        }
        s1 = disclosure.json(
            render(prompts["disclosure"], **values),
            DisclosureReply,
            where=where,
        )
        stages.append({"stage": "disclosure", **s1.model_dump()})
        if s1.disclosed:
            return AttributionEntry(
                **base, label="memory_failure", ep_index=task.index, stages=stages
            )
        s2 = disclosure.json(render(prompts["subclass"], **values), SubclassReply, where=where)
        stages.append({"stage": "disclosure_subclass", **s2.model_dump()})
        label: Literal["agent_elicitation_failure", "simulator_too_strict"] = (
            "agent_elicitation_failure" if s2.category == "A" else "simulator_too_strict"
        )
        return AttributionEntry(**base, label=label, ep_index=task.index, stages=stages)

    details = disclosure.map(one, judge.details)
    return Attribution(
        user_id=judge.user_id,
        system=judge.system,
        mode=judge.mode,
        counts=dict(Counter(d.label for d in details)),
        details=details,
    )
