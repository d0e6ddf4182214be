"""Failure attribution (paper §3.5, Table 10): why was a target not recovered?

Stage 0 (task-design oracle) is computed once per user for every dimension and shared by all
systems and modes. Stages 1 and 2 read the target episode's real transcript in both modes; the
release read an empty one in retrieve mode, which ``compat.retrieve_attribution_empty_transcript``
reproduces. A reply whose re-asks ran out gets a stand-in (the ``*_stand_in`` functions),
listed in the record's ``recoveries``, marked as touching the attribution counts when it
decided a label.
"""

from __future__ import annotations

from collections import Counter
from typing import Literal, TypeVar

from pydantic import BaseModel, Field

from memprobe.llm.client import LLM
from memprobe.llm.salvage import Exhausted, last_lenient
from memprobe.protocol.leaks import leak_share
from memprobe.spec.prompts import dialogue, render
from memprobe.spec.records import (
    Attribution,
    AttributionEntry,
    Bank,
    Episodes,
    Judge,
    Oracle,
    OracleVerdict,
    StandIn,
    Task,
    Tasks,
)
from memprobe.spec.rubric import RUBRIC
from memprobe.vocabulary import Stage

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


TOPIC_SHARE = 0.5  # share of the target's content words in the agent's replies: "came up"
R = TypeVar("R", bound=BaseModel)


def cut_or(spent: Exhausted, schema: type[R], stage: Stage) -> tuple[R, StandIn] | None:
    """The latest reply with over-long texts cut at a sentence end (its decision stands)."""
    fixed = last_lenient(spent.replies, schema)
    if fixed is None:
        return None
    value, cut = fixed
    return value, spent.stand_in(stage, f"cut {', '.join(cut)}")


def oracle_stand_in(spent: Exhausted) -> tuple[OracleReply, StandIn]:
    """Stage 0 when the re-asks ran out: can_invite, as the release fell back: the task is not
    blamed without a verdict, and stages 1 and 2 still look at the episode."""
    return cut_or(spent, OracleReply, "oracle") or (
        OracleReply(can_invite=True, reason="stand-in: no valid oracle reply"),
        spent.stand_in("oracle", "can_invite true", ("attribution",)),
    )


def disclosure_stand_in(spent: Exhausted) -> tuple[DisclosureReply, StandIn]:
    """Stage 1 when the re-asks ran out: not disclosed, as the release fell back (stage 2
    then decides between the agent and the simulator)."""
    return cut_or(spent, DisclosureReply, "disclosure") or (
        DisclosureReply(disclosed=False, reason="stand-in: no valid disclosure reply"),
        spent.stand_in("disclosure", "disclosed false", ("attribution",)),
    )


def subclass_stand_in(
    spent: Exhausted, agent_text: str, short: str
) -> tuple[SubclassReply, StandIn]:
    """Stage 2 when the re-asks ran out: B (the topic came up, the simulator held back) when
    the agent's replies hold at least half of the target's content words, else A (the agent
    never got near it). The release's "?" had no label of its own."""
    fixed = cut_or(spent, SubclassReply, "subclass")
    if fixed is not None:
        return fixed
    share = leak_share(agent_text, short)
    category: Literal["A", "B"] = "B" if share >= TOPIC_SHARE else "A"
    why = f"stand-in: {share:.2f} of the target's content words are in the agent's replies"
    action = f"category {category} from the agent's replies ({share:.2f}, threshold {TOPIC_SHARE})"
    return SubclassReply(category=category, reason=why), spent.stand_in(
        "subclass", action, ("attribution",)
    )


def run_oracle(bank: Bank, tasks: Tasks, llm: LLM, prompt: str) -> Oracle:
    first_task: dict[str, Task] = {}
    for t in tasks.tasks:
        first_task.setdefault(t.target_dimension, t)
    stand_ins: dict[str, list[StandIn]] = {}  # per dimension: map() runs them in threads

    def one(e) -> tuple[str, OracleVerdict]:
        t = first_task.get(e.dimension)
        if t is None:
            return e.dimension, OracleVerdict(can_invite=False, reason="no targeted task")

        def stand_in(spent: Exhausted) -> OracleReply:
            reply, note = oracle_stand_in(spent)
            stand_ins.setdefault(e.dimension, []).append(note)
            return reply

        r = llm.json(
            render(
                prompt, task=t.task, dimension=e.dimension, truth=e.short, explanation=e.explanation
            ),
            OracleReply,
            where=f"user {bank.user_id}, oracle {e.dimension}",
            stand_in=stand_in,
        )
        return e.dimension, OracleVerdict(can_invite=r.can_invite, reason=r.reason)

    verdicts = dict(llm.map(one, bank.entries))
    in_order = [r for e in bank.entries for r in stand_ins.get(e.dimension, [])]
    return Oracle(user_id=bank.user_id, verdicts=verdicts, recoveries=in_order)


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
    stand_ins: dict[str, list[StandIn]] = {}  # per dimension: map() runs them in threads

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
        mine = stand_ins.setdefault(d.dimension, [])
        read = [] if (empty_transcript or ep is None) else ep.turns
        agent_text = " ".join(t.agent_response for t in read)

        def stand_in_disclosure(spent: Exhausted) -> DisclosureReply:
            reply, note = disclosure_stand_in(spent)
            mine.append(note)
            return reply

        def stand_in_subclass(spent: Exhausted) -> SubclassReply:
            reply, note = subclass_stand_in(spent, agent_text, d.ground_truth)
            mine.append(note)
            return reply

        s1 = disclosure.json(
            render(prompts["disclosure"], **values),
            DisclosureReply,
            where=where,
            stand_in=stand_in_disclosure,
        )
        stages.append({"stage": "disclosure", **s1.model_dump()})
        if s1.disclosed:
            return AttributionEntry(
                **base, label="memory_failure", ep_index=task.index, stages=stages
            )
        s2 = disclosure.json(
            render(prompts["subclass"], **values),
            SubclassReply,
            where=where,
            stand_in=stand_in_subclass,
        )
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
        recoveries=[r for d in judge.details for r in stand_ins.get(d.dimension, [])],
    )
