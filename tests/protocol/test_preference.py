"""Metric D for our own runs: per-turn scores, "na", the turn-weighted pooled D, Table 2's D.

Each expected value is derived by hand in the comment next to it.
"""

from __future__ import annotations

import pydantic
import pytest

from memprobe.llm.client import client_for
from memprobe.protocol import preference
from memprobe.report import tables
from memprobe.spec import records
from memprobe.spec.prompts import prompt_path
from memprobe.spec.records import Bank, BankEntry, Episode, Episodes, Preference, Turn
from tests.helpers.jobs import ScriptJob
from tests.helpers.paper import paper_config, stage_prompt
from tests.helpers.protocol import SKILL, user_text
from tests.helpers.recording_llm import RecordingLLM

BANK = Bank(
    user_id="user_001",
    entries=[
        BankEntry(
            category="assistance_preference",
            dimension="verbosity_preference",
            short="Wants bullet points",
            explanation="Long prose tires them",
        ),
        BankEntry(
            category="skill_memory",
            dimension="critical_thinking_skill",
            short="NOT-A-PREFERENCE",
            explanation="NOT-A-PREFERENCE-EXPL",
        ),
        BankEntry(
            category="assistance_preference",
            dimension="tone_preference",
            short="Plain tone",
            explanation="Dislikes flattery",
        ),
    ],
)
PROMPT = str(prompt_path("preference_judge"))


def episodes(replies: list[list[str]], system: str = "memt") -> Episodes:
    return Episodes(
        user_id="user_001",
        system=system,
        episodes=[
            Episode(
                index=i,
                task=f"TASK-{i}",
                target_dimension="verbosity_preference",
                end_reason="satisfied",
                turns=[
                    Turn(turn=t, agent_response=r, feedback_type="satisfied", user_text="ok")
                    for t, r in enumerate(turns, 1)
                ],
            )
            for i, turns in enumerate(replies, 1)
        ],
    )


# Scores per reply text, for preference 1 and 2 (listed out of order: the judge may).
SCORES = {
    "R-A": [(2, "na"), (1, 5)],  # turn score 5 (na left out)
    "R-B": [(1, 2), (2, 3)],  # 2.5
    "R-C": [(1, 1), (2, "na")],  # 1
    "R-D": [(1, "na"), (2, "na")],  # None: no preference could show
}


def answer(messages, schema):
    text = messages[-1]["content"]
    reply = next(r for r in SCORES if f"REPLY\n{r}" in text)
    return {
        "per_pref": [{"idx": i, "score": s, "reason": f"{reply}-{i}"} for i, s in SCORES[reply]]
    }


def test_d_is_the_turn_weighted_mean_of_turn_scores_with_na_left_out():
    llm = RecordingLLM(answer)
    out = preference.judge_preferences(
        episodes([["R-A", "R-B"], ["R-C", "R-D"]]), BANK, llm, PROMPT
    )
    assert len(llm.requests) == 4  # one call per turn
    turns = [t for e in out.episodes for t in e.turns]
    assert [t.score for t in turns] == [5.0, 2.5, 1.0, None]
    assert [[p.idx for p in t.per_pref] for t in turns] == [[1, 2]] * 4  # sorted by idx
    assert turns[0].per_pref[1].score == "na" and turns[0].per_pref[0].reason == "R-A-1"
    # turn-weighted: (5 + 2.5 + 1) / 3 = 2.833333; the episode mean would be (3.75 + 1) / 2
    # = 2.375 and the pooled per-preference mean (5 + 2 + 3 + 1) / 4 = 2.75
    assert out.D == pytest.approx(8.5 / 3)
    assert [e.index for e in out.episodes] == [1, 2]
    assert [len(e.turns) for e in out.episodes] == [2, 2]


def test_the_judge_sees_only_the_preferences_the_task_and_one_reply():
    llm = RecordingLLM(answer)
    preference.judge_preferences(episodes([["R-A", "R-B"]]), BANK, llm, PROMPT)
    first, second = llm.prompt_text(0), llm.prompt_text(1)
    assert (
        "PREFERENCES\n1. [verbosity_preference] Wants bullet points — Long prose tires them\n"
        "2. [tone_preference] Plain tone — Dislikes flattery\n"
    ) in first
    assert "NOT-A-PREFERENCE" not in first
    assert "TASK-1" in first and "R-A" in first and "R-B" not in first
    assert "R-B" in second and "R-A" not in second
    assert llm.wheres == [
        "user user_001, system memt, episode 1, turn 1",
        "user user_001, system memt, episode 1, turn 2",
    ]


def test_a_user_without_preferences_costs_no_call_and_has_no_d():
    bank = Bank(user_id="user_001", entries=[BANK.entries[1]])
    llm = RecordingLLM(answer)
    out = preference.judge_preferences(episodes([["R-A"], ["R-B"]]), bank, llm, PROMPT)
    assert llm.requests == []
    assert out.D is None
    assert [(t.turn, t.score, t.per_pref) for e in out.episodes for t in e.turns] == [
        (1, None, []),
        (1, None, []),
    ]


def test_all_na_gives_no_d():
    out = preference.judge_preferences(episodes([["R-D"]]), BANK, RecordingLLM(answer), PROMPT)
    assert out.D is None and out.episodes[0].turns[0].score is None


def test_a_reply_that_skips_or_repeats_a_preference_is_rejected_then_stood_in_for():
    def repeated(messages, schema):
        return {"per_pref": [{"idx": 1, "score": 3}, {"idx": 1, "score": 4}]}

    out = preference.judge_preferences(episodes([["R-A"]]), BANK, RecordingLLM(repeated), PROMPT)
    # The first valid item per preference stands; the one never scored validly is na.
    turn = out.episodes[0].turns[0]
    assert [(p.idx, p.score) for p in turn.per_pref] == [(1, 3), (2, "na")]
    assert turn.score == 3.0
    [rec] = out.recoveries
    assert "exactly one entry per idx 1..2, got [1, 1]" in rec.problem
    assert rec.stage == "preference" and rec.touches == ["D"]

    def three(messages, schema):
        return {"per_pref": [{"idx": i, "score": 3} for i in (1, 2, 3)]}

    # the schema sent for two preferences already refuses a third entry
    with pytest.raises(pydantic.ValidationError):
        preference.judge_preferences(episodes([["R-A"]]), BANK, RecordingLLM(three), PROMPT)
    schema = preference.reply_schema(2)
    # the schema is part of every request (and its cache key): its names stay put
    js = schema.model_json_schema()
    assert js["title"] == "PrefReply" and set(js["$defs"]) == {"PrefItem"}
    assert issubclass(schema, preference.PrefReply)
    ok = {"per_pref": [{"idx": 1, "score": 3}, {"idx": 2, "score": "na"}]}
    assert [p.idx for p in schema.model_validate(ok).per_pref] == [1, 2]
    for bad in (
        {"per_pref": [{"idx": 1, "score": 3}]},  # too few
        {"per_pref": [{"idx": 1, "score": 3}, {"idx": 3, "score": 3}]},  # idx out of range
        {"per_pref": [{"idx": 1, "score": 3}, {"idx": 0, "score": 3}]},
        {"per_pref": [{"idx": 1, "score": 3}, {"idx": 2, "score": 6}]},  # not on the scale
        {"per_pref": [*ok["per_pref"], {"idx": 2, "score": 3}]},  # too many
    ):
        with pytest.raises(pydantic.ValidationError):
            schema.model_validate(bad)


def test_table2_d_reads_our_preference_records():
    llm = RecordingLLM(answer)
    u1 = preference.judge_preferences(episodes([["R-A", "R-B"], ["R-C"]]), BANK, llm, PROMPT)
    u2 = preference.judge_preferences(episodes([["R-B"]]), BANK, llm, PROMPT)
    u3 = preference.judge_preferences(episodes([["R-D"]]), BANK, llm, PROMPT)
    assert u1.D == pytest.approx(8.5 / 3) and u2.D == 2.5 and u3.D is None
    eps = [episodes([["R-A"]])]
    t2 = tables.table2(["memt", "nomem"], eps, [u1, u2, u3], [], [])
    memt = t2[t2.system == "memt"].iloc[0]
    # users with a D: 2.833333 and 2.5 -> mean 2.666667, sample std 0.235702; u3 left out
    assert memt["D_mean"] == pytest.approx(2.666667, abs=1e-6)
    assert memt["D_std"] == pytest.approx(0.235702, abs=1e-6)
    nomem = t2[t2.system == "nomem"].iloc[0]
    assert pd_isna(nomem["D_mean"]) and pd_isna(nomem["D_std"])


def pd_isna(x) -> bool:
    import pandas as pd

    return bool(pd.isna(x))


def test_turn_score_and_pooled_d_hand_values():
    s = preference.PrefScore
    assert (
        preference.turn_score([s(idx=1, score=4), s(idx=2, score="na"), s(idx=3, score=1)]) == 2.5
    )
    assert preference.turn_score([s(idx=1, score="na")]) is None
    assert preference.turn_score([]) is None
    assert preference.pooled_d([]) is None


def test_preference_job_past_its_re_asks_scores_na_and_flags_d(scripted, tmp_path, monkeypatch):
    ep, seen = scripted({"preference": {"else": {"per_pref": [{"idx": 2, "score": 9}]}}})
    job = ScriptJob(
        tmp_path, monkeypatch, "preference", ep.base_url, max_reasks=1, resample_invalid=0
    )
    keys = {"system": "memt", "user": "user_001"}
    inputs = {"episodes": episodes([["R-A"]]), "bank": BANK, "prompt": PROMPT}
    assert job.run(inputs, {"preference": "preference.json"}, keys) == 0
    out = records.load(job.out("preference.json"), Preference)
    turn = out.episodes[0].turns[0]
    assert [p.score for p in turn.per_pref] == ["na", "na"] and turn.score is None
    assert out.D is None  # no turn scored: the release's None
    [rec] = out.recoveries
    assert rec.stage == "preference" and rec.touches == ["D"]
    assert rec.action == "na for preference(s) 1, 2"
    assert rec.where == "user user_001, system memt, episode 1, turn 1"
    assert len(seen["preference"]) == 2
    assert job.recoveries(keys).recoveries == [rec]


PREF = BankEntry(
    category="assistance_preference",
    dimension="verbosity_preference",
    short="wants three lines, never more",
    explanation="EXPL-PREF: skims everything on a phone between shifts.",
)


def test_paper_preference_judge_uses_na_sparingly_and_gives_low_scores(scripted, tmp_path):
    from memprobe.protocol import preference

    ep, seen = scripted({})
    cfg = paper_config(ep.base_url, tmp_path)
    episodes = Episodes(
        user_id="user_001", system="nomem",
        episodes=[Episode(index=1, task="Plan a trip.", target_dimension=SKILL.dimension,
                          end_reason="satisfied",
                          turns=[Turn(turn=1, agent_response="A long plan.",
                                      feedback_type="satisfied", user_text="ok")])],
    )  # fmt: skip
    bank = Bank(user_id="user_001", entries=[SKILL, PREF])
    llm = client_for("preference", cfg)
    preference.judge_preferences(episodes, bank, llm, stage_prompt(cfg, "preference_judge"))
    body = next(b for bodies in seen.values() for b in bodies)
    system = body["messages"][0]["content"]
    assert "Use it sparingly: uncertainty or a weak\nsignal is a 3, not na" in system
    assert "Be\nready to give 1 or 2 when you see a real violation" in system
    assert PREF.short in user_text(body) and PREF.explanation in user_text(body)
