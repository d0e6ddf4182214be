"""Slot-fill and judge: what each prompt sees, and the budget-aware dump_all (overflow)."""

from __future__ import annotations

import json

import pytest

from memprobe.config.loading import load_config
from memprobe.llm.client import Exhausted, client_for
from memprobe.protocol import recovery
from memprobe.protocol.recovery import slotfill_user
from memprobe.spec import records, taxonomy
from memprobe.spec.prompts import prompt_path
from memprobe.spec.records import (
    Judge,
    Memories,
    Retrieved,
    RetrievedQuery,
    SlotFill,
    SlotFillEntry,
)
from memprobe.spec.rubric import RUBRIC
from tests.helpers.endpoint import record_requests
from tests.helpers.jobs import ScriptJob
from tests.helpers.paper import paper_config, stage_prompt
from tests.helpers.protocol import TWO_ENTRY_BANK, user_text
from tests.helpers.recording_llm import RecordingLLM
from tests.helpers.recovery_case import BANK, GUIDES, slotfill, store
from tests.helpers.tables import entry_of
from tests.helpers.workflow import local_raw


def llm_judge(llm: RecordingLLM) -> recovery.Grader:
    """The LLM judge on our judge prompt, answered by ``llm``."""
    return recovery.llm_grader(llm, str(prompt_path("recovery_judge")))


def twice_or_unknown() -> RecordingLLM:
    """A slot-filler that answers "twice" for the skill and "unknown" for the preference."""
    return RecordingLLM(
        lambda m, s: {
            "label": "unknown" if "verbosity" in m[-1]["content"] else "twice",
            "reason": "",
        }
    )


def evidence_answer(messages, schema):
    text = messages[-1]["content"]
    return {"label": "checks sources" if "note 7 " in text else "unknown", "reason": "r"}


def test_slotfill_never_sees_the_target():
    llm = RecordingLLM(lambda m, s: {"label": "careful", "reason": "note 1"})
    out = slotfill(store(2, 10), llm)
    assert not out.overflow and len(llm.requests) == 2
    for i in range(2):
        text = llm.prompt_text(i)
        assert "note 1" in text  # the whole store
        assert "SECRET-EXPLANATION" not in text and "Checks sources twice" not in text
    assert "critical_thinking_skill" in llm.prompt_text(0)


def test_overflow_flag_is_recorded_not_silently_scored():
    llm = RecordingLLM(evidence_answer)
    big = store(40, 400)  # ~17k chars, ~4.4k tokens: over a 2,000-token context
    out = slotfill(big, llm, context_tokens=2000, overflow="flag")
    assert out.overflow and out.overflow_strategy == "flag"
    assert out.memory_tokens > recovery.memory_budget(2000)
    assert llm.requests == []  # nothing was sent that could not fit
    assert all(
        e.label == "unknown" and not e.called and "overflow" in e.reason for e in out.entries
    )
    judge_llm = RecordingLLM(lambda m, s: {"score": 1.0, "reason": "would pay"})
    judge = recovery.judge_user(out, BANK, llm_judge(judge_llm))
    assert judge.overflow and judge.flagged  # the tables' dagger
    assert judge_llm.requests == []  # an unscored store costs the judge nothing either
    assert [d.score for d in judge.details] == [0.0, 0.0] and judge.overall == 0.0


def test_overflow_chunked_is_scored():
    llm = RecordingLLM(evidence_answer)
    big = store(40, 400)
    out = slotfill(big, llm, context_tokens=2000, overflow="chunked")
    assert out.overflow and out.overflow_strategy == "chunked"
    # every call fits the budget, and the chunk holding note 7 gives the label
    budget = recovery.memory_budget(2000)
    assert len(llm.requests) > 2
    assert all(e.label == "checks sources" for e in out.entries)
    for i in range(len(llm.requests)):
        assert recovery.count_tokens(llm.prompt_text(i)) < budget + recovery.PROMPT_OVERHEAD_TOKENS
    judge = recovery.judge_user(
        out,
        BANK,
        llm_judge(RecordingLLM(lambda m, s: {"reason": "r", "score": 0.75})),
    )
    assert judge.overall == pytest.approx(0.75) and not judge.flagged


def test_judge_sees_truth_and_label_and_scores_unknown_zero_without_a_call():
    out = slotfill(store(1, 5), twice_or_unknown())
    judge_llm = RecordingLLM(lambda m, s: {"score": 0.5, "reason": "partial"})
    judge = recovery.judge_user(out, BANK, llm_judge(judge_llm))
    assert len(judge_llm.requests) == 1  # the unknown label costs no call
    text = judge_llm.prompt_text(0)
    assert "SECRET-EXPLANATION" in text and "Checks sources twice" in text and "twice" in text
    assert judge.per_category["skill_memory"] == 0.5
    assert judge.per_category["assistance_preference"] == 0.0
    assert judge.overall == pytest.approx(0.25)  # category-balanced, absent cats ignored


def test_store_overflows_threshold():
    over, tokens = recovery.store_overflows(store(1, 10), 2000)
    assert not over and tokens > 0
    assert recovery.store_overflows(store(40, 400), 2000)[0]


def memory_block(text: str) -> str:
    """The memory JSON of a rendered slot-fill prompt (between its two headings)."""
    return text.split("MEMORY RECORDS", 1)[1].split("SLOT\ncategory", 1)[0]


def chunk_answer(evidence: dict[str, str]):
    """A slot-filler that reads only its own chunk: a label for each needle it sees, the
    per-chunk labels joined in the reduce call (which is told apart by the JSON it reads)."""

    def answer(messages, schema):
        block = memory_block(messages[-1]["content"])
        if '"label"' in block:  # the reduce step reads the per-chunk answers
            labels = [x["label"] for x in json.loads(block)]
            return {"label": " + ".join(labels), "reason": "reduced"}
        hits = [label for needle, label in evidence.items() if needle in block]
        return {"label": hits[0] if hits else "unknown", "reason": "r"}

    return answer


def test_chunked_reduce_joins_the_answers_of_several_chunks():
    llm = RecordingLLM(chunk_answer({"note 2 ": "first", "note 37 ": "second"}))
    out = slotfill(store(40, 400), llm, context_tokens=2000, overflow="chunked")
    n_chunks = len(recovery.chunk_items(store(40, 400), recovery.memory_budget(2000)))
    assert n_chunks >= 3
    # per dimension: one call per chunk and one reduce call
    assert len(llm.requests) == 2 * (n_chunks + 1)
    assert [e.label for e in out.entries] == ["first + second"] * 2
    assert all(e.reason == "reduced" and e.called for e in out.entries)


def test_chunked_with_no_evidence_in_any_chunk_is_unknown_after_every_chunk_was_read():
    llm = RecordingLLM(chunk_answer({}))
    out = slotfill(store(40, 400), llm, context_tokens=2000, overflow="chunked")
    n_chunks = len(recovery.chunk_items(store(40, 400), recovery.memory_budget(2000)))
    assert len(llm.requests) == 2 * n_chunks  # no reduce call
    assert all(
        e.label == "unknown" and e.reason == "no chunk held evidence" and e.called
        for e in out.entries
    )


def test_an_item_over_the_budget_on_its_own_is_split_into_parts_that_fit():
    # One item of ~20,000 chars (~5,000 tokens) between two small ones, budget 1,200 tokens.
    budget = recovery.memory_budget(2000)
    big = {"content": "start " + "z" * 20_000 + " NEEDLE-AT-THE-END"}
    items = [{"content": "small 0"}, big, {"content": "small 2"}]
    chunks = recovery.chunk_items(items, budget)
    assert all(recovery.count_tokens(recovery.serialize(c)) <= budget for c in chunks)
    # nothing dropped: the parts' texts put back together are the item, in order
    parts = [x for c in chunks for x in c if "split_item_part" in x]
    assert [p["split_item_part"] for p in parts] == list(range(1, len(parts) + 1))
    assert len(parts) >= 5
    assert json.loads("".join(p["text"] for p in parts)) == big
    assert chunks[0][0] == items[0] and chunks[-1][-1] == items[2]
    # and the slot-filler is asked about every part, the needle included, within budget
    llm = RecordingLLM(chunk_answer({"NEEDLE-AT-THE-END": "found it"}))
    out = slotfill(items, llm, context_tokens=2000, overflow="chunked")
    assert [e.label for e in out.entries] == ["found it"] * 2
    for i in range(len(llm.requests)):
        block = memory_block(llm.prompt_text(i))
        assert recovery.count_tokens(block.strip()) <= budget


def test_split_item_escapes_count_against_the_budget():
    # quotes and newlines double when escaped: the parts must still fit
    item = {"content": '"\n' * 3000}
    parts = recovery.split_item(item, 300)
    assert all(recovery.count_tokens(recovery.serialize([p])) <= 300 for p in parts)
    assert json.loads("".join(p["text"] for p in parts)) == item


def test_chunk_items_keeps_order_and_fills_each_chunk():
    items = store(10, 100)  # ~115 chars each
    one = recovery.count_tokens(recovery.serialize(items[:1]))
    chunks = recovery.chunk_items(items, 3 * one)
    assert [x for c in chunks for x in c] == items
    assert all(recovery.count_tokens(recovery.serialize(c)) <= 3 * one for c in chunks)
    # greedy: no chunk could have taken the next chunk's first item
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert recovery.count_tokens(recovery.serialize([*a, b[0]])) > 3 * one
    assert recovery.chunk_items([], 100) == []


def retrieved(items_by_dim: dict[str, list[dict]]) -> Retrieved:
    return Retrieved(
        user_id="user_001",
        system="memt",
        k=2,
        queries=[
            RetrievedQuery(category=e.category, dimension=e.dimension, query="q", items=items)
            for e in BANK.entries
            for items in [items_by_dim.get(e.dimension, [])]
        ],
    )


def slotfill_retrieve(llm, items_by_dim: dict[str, list[dict]], **kw):
    return slotfill(None, llm, "retrieve", retrieved=retrieved(items_by_dim), **kw)


def test_retrieve_mode_shows_each_dimension_only_its_own_items():
    llm = RecordingLLM(
        lambda m, s: {"label": "sees " + memory_block(m[-1]["content"]).strip()[-12:], "reason": ""}
    )
    out = slotfill_retrieve(
        llm,
        {
            "critical_thinking_skill": [{"content": "ONLY-FOR-CRITICAL"}],
            "verbosity_preference": [{"content": "ONLY-FOR-VERBOSITY"}],
        },
        context_tokens=2000,
    )
    assert len(llm.requests) == 2
    first, second = llm.prompt_text(0), llm.prompt_text(1)
    assert "ONLY-FOR-CRITICAL" in first and "ONLY-FOR-VERBOSITY" not in first
    assert "ONLY-FOR-VERBOSITY" in second and "ONLY-FOR-CRITICAL" not in second
    assert not out.overflow and out.memory_tokens == 0 and out.mode == "retrieve"
    assert all(e.called for e in out.entries)


def test_retrieve_mode_empty_retrieval_is_unknown_without_a_call():
    llm = RecordingLLM(lambda m, s: {"label": "something", "reason": ""})
    out = slotfill_retrieve(llm, {"verbosity_preference": [{"content": "likes lists"}]})
    assert len(llm.requests) == 1 and "likes lists" in llm.prompt_text(0)
    skill, verbosity = out.entries
    assert (skill.label, skill.called, skill.reason) == ("unknown", False, "empty memory")
    assert (verbosity.label, verbosity.called) == ("something", True)


def test_a_label_that_says_unknown_in_any_spelling_is_unknown():
    for said in ("Unknown.", "  unknown ", "", "UNKNOWN"):
        llm = RecordingLLM(lambda m, s, said=said: {"label": said, "reason": "x"})
        out = slotfill(store(1, 5), llm)
        assert [e.label for e in out.entries] == ["unknown", "unknown"], said
    out = slotfill(store(1, 5), RecordingLLM(lambda m, s: {"label": "  terse  ", "reason": ""}))
    assert [e.label for e in out.entries] == ["terse", "terse"]


def test_judge_unknown_option_sends_unknown_labels_to_the_judge():
    out = slotfill(store(1, 5), RecordingLLM(lambda m, s: {"label": "unknown", "reason": ""}))
    judge_llm = RecordingLLM(lambda m, s: {"score": 0.25, "reason": "lenient"})
    judge = recovery.judge_user(
        out,
        BANK,
        llm_judge(judge_llm),
        judge_unknown=True,
    )
    assert len(judge_llm.requests) == 2
    assert [d.score for d in judge.details] == [0.25, 0.25]
    assert judge.details[0].judge_reason == "lenient"


def test_category_means_hand_values():
    entry = entry_of

    per, overall = recovery.category_means(
        [entry("skill_memory", 1.0), entry("skill_memory", 0.5), entry("self_model", 0.0)]
    )
    assert per["skill_memory"] == 0.75 and per["self_model"] == 0.0
    assert per["episodic_memory"] is None and per["assistance_preference"] is None
    assert overall == pytest.approx(0.375)  # (0.75 + 0.0) / 2 present categories
    assert recovery.category_means([]) == (dict.fromkeys(per), 0.0)


class SearchOnly:
    """A memory system reduced to what retrieve mode's probe calls: its name and search."""

    name = "memt"

    def __init__(self) -> None:
        self.searches: list[tuple[str, int]] = []

    def search(self, query: str, k: int) -> list[dict]:
        self.searches.append((query, k))
        return [{"content": f"hit {i} for {query[:30]}"} for i in range(k)]


def test_probe_asks_the_user_agnostic_query_per_dimension_with_k():
    system = SearchOnly()
    out = recovery.probe(system, BANK, GUIDES, 3, "user_007")
    q_skill = taxonomy.retrieve_query("critical_thinking_skill", "skill_memory", GUIDES)
    q_verb = taxonomy.retrieve_query("verbosity_preference", "assistance_preference", GUIDES)
    assert q_skill.startswith("What best describes the user's critical thinking skill? ")
    assert system.searches == [(q_skill, 3), (q_verb, 3)]
    assert (out.user_id, out.system, out.k) == ("user_007", "memt", 3)
    assert [(q.category, q.dimension, q.query) for q in out.queries] == [
        ("skill_memory", "critical_thinking_skill", q_skill),
        ("assistance_preference", "verbosity_preference", q_verb),
    ]
    assert out.queries[0].items == system.search(q_skill, 3)
    for text in (q_skill, q_verb):  # the probe never names the user's value
        assert "Checks sources twice" not in text and "SECRET" not in text


def test_token_estimate_budget_and_the_overflow_boundary():
    assert [recovery.count_tokens("x" * n) for n in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]
    assert recovery.memory_budget(2000) == 2000 - 600 - 200
    assert recovery.serialize([{"a": "é"}]) == '[\n  {\n    "a": "é"\n  }\n]'
    # a store of exactly the budget fits; one token more overflows
    budget = recovery.memory_budget(2000)
    for extra, over in ((0, False), (1, True)):
        pad = 4 * (budget + extra) - len(recovery.serialize([{"c": ""}]))
        items = [{"c": "y" * pad}]
        assert recovery.count_tokens(recovery.serialize(items)) == budget + extra
        assert recovery.store_overflows(items, 2000) == (over, budget + extra)
        out = slotfill(items, RecordingLLM(lambda m, s: {"label": "x", "reason": ""}))
        assert slotfill(items, RecordingLLM(evidence_answer), context_tokens=2000).overflow is over
        assert not out.overflow  # the default 128k context


def test_every_call_names_user_system_mode_and_dimension():
    llm = RecordingLLM(chunk_answer({"note 2 ": "first", "note 37 ": "second"}))
    slotfill(store(40, 400), llm, context_tokens=2000, overflow="chunked")
    base = "user user_001, system memt, dump_all, critical_thinking_skill"
    n = len(recovery.chunk_items(store(40, 400), recovery.memory_budget(2000)))
    assert llm.wheres[: n + 1] == [f"{base}, chunk {i}" for i in range(1, n + 1)] + [
        f"{base}, reduce"
    ]
    out = slotfill(store(1, 5), RecordingLLM(lambda m, s: {"label": "twice", "reason": ""}))
    judge_llm = RecordingLLM(lambda m, s: {"score": 0.5, "reason": ""})
    judged = recovery.judge_user(out, BANK, llm_judge(judge_llm))
    assert judge_llm.wheres == [base, "user user_001, system memt, dump_all, verbosity_preference"]
    assert (judged.user_id, judged.system, judged.mode) == ("user_001", "memt", "dump_all")
    d = judged.details[0]
    assert (d.predicted, d.ground_truth, d.explanation, d.scoring_mode) == (
        "twice",
        "Checks sources twice",
        "SECRET-EXPLANATION",
        "dump_all",
    )


def test_split_item_parts_are_the_items_own_json_and_as_large_as_fit():
    item = {"content": "café " + "z" * 9000 + " end"}
    budget = 600
    parts = recovery.split_item(item, budget)
    text = json.dumps(item, ensure_ascii=False)  # "é" stays one character, never \u00e9
    assert "".join(p["text"] for p in parts) == text
    assert all(p["text"] for p in parts) and len(parts) >= 3
    for i, p in enumerate(parts):
        assert recovery.count_tokens(recovery.serialize([p])) <= budget
        if i < len(parts) - 1:  # shrinking by 3/4 at a time: a third longer would not fit
            start = text.index(p["text"], sum(len(q["text"]) for q in parts[:i]))
            longer = {**p, "text": text[start : start + len(p["text"]) * 4 // 3 + 1]}
            assert recovery.count_tokens(recovery.serialize([longer])) > budget


def test_split_item_at_exactly_the_budget_is_one_part_and_a_tiny_budget_still_ends():
    for n in range(100, 200):
        item = {"c": "x" * n}
        one = recovery.count_tokens(recovery.serialize([recovery._part(0, json.dumps(item))]))
        if (4 * one - 3) == len(recovery.serialize([recovery._part(0, json.dumps(item))])):
            break  # the serialization is exactly `one` tokens long, no slack
    assert recovery.split_item(item, one) == [recovery._part(0, json.dumps(item))]
    assert len(recovery.split_item(item, one - 1)) == 2
    # a budget below one character's part: one-character parts, and the loop ends
    assert [p["text"] for p in recovery.split_item({"c": "ab"}, 1)] == list('{"c": "ab"}')


def test_chunks_and_stores_of_exactly_the_budget_fit():
    a, b = {"content": "alpha " * 20}, {"content": "beta " * 30}
    both = recovery.count_tokens(recovery.serialize([a, b]))
    assert recovery.chunk_items([a, b], both) == [[a, b]]
    assert recovery.chunk_items([a, b], both - 1) == [[a], [b]]
    alone = recovery.count_tokens(recovery.serialize([a]))
    assert recovery.chunk_items([a], alone) == [[a]]  # not split
    # the default context is 128,000 tokens
    budget = recovery.memory_budget(128_000)
    pad = 4 * (budget + 1) - len(recovery.serialize([{"c": ""}]))
    out = slotfill([{"c": "y" * pad}], RecordingLLM(lambda m, s: {"label": "x", "reason": ""}))
    assert out.overflow and out.memory_tokens == budget + 1


def test_judge_prompt_has_the_dimension_and_the_label_and_reasons_are_recorded():
    out = slotfill(store(1, 5), RecordingLLM(lambda m, s: {"label": "LABEL-XYZ", "reason": ""}))
    out.entries[1] = out.entries[1].model_copy(update={"label": "unknown"})
    judge_llm = RecordingLLM(lambda m, s: {"score": 0.5, "reason": "half"})
    judged = recovery.judge_user(out, BANK, llm_judge(judge_llm))
    text = judge_llm.prompt_text(0)
    assert "LABEL-XYZ" in text and "critical_thinking_skill" in text
    assert [d.judge_reason for d in judged.details] == [
        "half",
        "label is 'unknown': 0 by the rubric (no call)",
    ]


def test_degenerate_labels_are_unknown_only_with_the_option_and_the_axis_counts():
    axis = "How carefully does the user weigh evidence?"
    out = slotfill(store(1, 5), RecordingLLM(lambda m, s: {"label": axis, "reason": ""}))
    axes = {"critical_thinking_skill": axis, "verbosity_preference": "How long?"}
    judge_llm = RecordingLLM(lambda m, s: {"score": 0.5, "reason": "r"})
    judged = recovery.judge_user(out, BANK, llm_judge(judge_llm), degenerate_axes=axes)
    # the skill label is its own axis question: unknown, no call; the preference label is not
    assert [d.score for d in judged.details] == [0.0, 0.5] and len(judge_llm.requests) == 1
    assert (
        judged.details[0].judge_reason == "label is a axis_question: scored as 'unknown' (no call)"
    )
    plain = recovery.judge_user(
        out,
        BANK,
        llm_judge(RecordingLLM(lambda m, s: {"score": 0.5, "reason": ""})),
    )
    assert [d.score for d in plain.details] == [0.5, 0.5]


def test_every_slotfill_prompt_names_its_slot_and_the_where(caplog):
    dims = {e.dimension: e.category for e in BANK.entries}

    def check_prompts(llm):
        for msgs, where in zip(llm.requests, llm.wheres, strict=True):
            dim = next(d for d in dims if f", {d}" in where)
            text = msgs[-1]["content"]
            assert f"dimension: {dim}" in text and f"category: {dims[dim]}" in text
            assert GUIDES[dims[dim]] in text

    plain = RecordingLLM(lambda m, s: {"label": "x", "reason": ""})
    out = slotfill(store(2, 10), plain)
    check_prompts(plain)
    assert plain.wheres == [
        "user user_001, system memt, dump_all, critical_thinking_skill",
        "user user_001, system memt, dump_all, verbosity_preference",
    ]
    assert out.overflow_strategy is None and not out.overflow
    chunked = RecordingLLM(chunk_answer({"note 2 ": "first", "note 37 ": "second"}))
    with caplog.at_level("WARNING", logger="memprobe"):
        out = slotfill(store(40, 400), chunked, context_tokens=2000, overflow="chunked")
    check_prompts(chunked)
    assert caplog.messages == [
        f"slotfill memt user_001: store ~{out.memory_tokens} tokens exceeds the 2000-token "
        "context (chunked)"
    ]


def test_a_reduce_that_says_unknown_is_unknown():
    def answer(messages, schema):
        block = memory_block(messages[-1]["content"])
        if '"label"' in block:
            return {"label": " Unknown. ", "reason": "conflicting"}
        return chunk_answer({"note 2 ": "first", "note 37 ": "second"})(messages, schema)

    out = slotfill(store(40, 400), RecordingLLM(answer), context_tokens=2000, overflow="chunked")
    assert [e.label for e in out.entries] == ["unknown", "unknown"]
    assert not recovery.is_unknown("X") and recovery.is_unknown("unknown...")


def test_the_judge_prompt_shows_the_rubric_scale_and_levels():
    out = slotfill(store(1, 5), RecordingLLM(lambda m, s: {"label": "LABEL-XYZ", "reason": ""}))
    judge_llm = RecordingLLM(lambda m, s: {"score": 0.5, "reason": "r"})
    recovery.judge_user(out, BANK, llm_judge(judge_llm))
    text = judge_llm.prompt_text(0)
    assert RUBRIC.scale_text() in text and RUBRIC.levels_text() in text
    assert "None" not in text


def test_a_second_opinion_grades_every_label_beside_the_judge():
    """judge.cross_check: the offline judge's score of each label rides along in its entry."""
    out = slotfill(store(1, 5), twice_or_unknown())
    seen = []

    def second(items):
        seen.extend(items)
        return [recovery.JudgeReply(reason="offline", score=0.25) for _ in items]

    judge_llm = RecordingLLM(lambda m, s: {"score": 0.75, "reason": "close"})
    judged = recovery.judge_user(
        out,
        BANK,
        llm_judge(judge_llm),
        second_opinion=second,
    )
    assert [d.score for d in judged.details] == [0.75, 0.0]  # the judge's, unchanged
    assert [d.second_opinion for d in judged.details] == [0.25, 0.25]
    assert [it.truth for it in seen] == ["Checks sources twice", "Wants bullet points"]
    plain = recovery.judge_user(out, BANK, llm_judge(judge_llm))
    assert all(d.second_opinion is None for d in plain.details)


def test_store_over_the_served_context_is_flagged_without_a_request(
    endpoint, tmp_path, monkeypatch
):
    seen = record_requests(endpoint)
    monkeypatch.setenv("MEMPROBE_LOCAL_BASE_URL", endpoint.base_url)
    monkeypatch.setenv("MEMPROBE_LOCAL_MODEL_ID", "0" * 64)
    raw = local_raw()
    raw["llm"]["cache_dir"] = str(tmp_path / "cache")
    cfg = load_config(raw)
    llm = client_for("slotfill", cfg)
    big = [{"content": f"note {i} " + "x" * 400} for i in range(60)]  # ~6k tokens > 4096
    out = slotfill_user(
        user_id="user_001", system="memt", mode="dump_all", bank=TWO_ENTRY_BANK, guides=GUIDES,
        llm=llm, prompt=str(prompt_path("slotfill")), memories=big,
        context_tokens=cfg.slotfill.context_tokens, overflow=cfg.slotfill.overflow,
    )  # fmt: skip
    assert out.overflow and all(not e.called for e in out.entries)
    assert sum(len(v) for v in seen.values()) == 0


# -- slot-fill and judge jobs whose replies never validate -----------------------------------
SPENT = {"max_reasks": 1, "resample_invalid": 0}
KEYS = {"system": "longctx_full", "user": "user_001", "mode": "dump_all"}


def test_slotfill_job_past_its_re_asks_answers_unknown_with_the_reason(
    scripted, tmp_path, monkeypatch
):
    ep, seen = scripted({"slotfill": {"else": {"reason": "no label given"}}})
    job = ScriptJob(tmp_path, monkeypatch, "slotfill", ep.base_url, **SPENT)
    memories = Memories(
        user_id="user_001", system="longctx_full", num_memories=2, memories=store(2, 10)
    )
    inputs = {
        "memory": memories,
        "bank": BANK,
        "guides": str(taxonomy.GUIDES_FILE),
        "prompt": str(prompt_path("slotfill")),
    }
    assert job.run(inputs, {"slotfill": "slotfill.json"}, KEYS) == 0
    out = records.load(job.out("slotfill.json"), SlotFill)
    assert [e.label for e in out.entries] == ["unknown", "unknown"]
    assert out.entries[0].reason.startswith("stand-in: no valid slot-fill reply (label:")
    assert [(r.stage, r.action, r.touches) for r in out.recoveries] == [
        ("slotfill", "unknown", ["B"])
    ] * 2
    assert [r.where.rsplit(", ", 1)[1] for r in out.recoveries] == [
        e.dimension for e in BANK.entries
    ]  # in bank order, whatever order the threads finished in
    assert len(seen["slotfill"]) == 4
    assert job.recoveries(KEYS).recoveries == out.recoveries


def test_judge_job_past_its_re_asks_scores_zero_and_flags_b(scripted, tmp_path, monkeypatch):
    ep, _ = scripted({"judge": {"else": {"reason": "close enough", "score": 0.6}}})
    job = ScriptJob(tmp_path, monkeypatch, "judge", ep.base_url, **SPENT)
    filled = SlotFill(
        user_id="user_001",
        system="longctx_full",
        mode="dump_all",
        entries=[
            SlotFillEntry(category=e.category, dimension=e.dimension, label=e.short, reason="")
            for e in BANK.entries
        ],
    )
    inputs = {"slotfill": filled, "bank": BANK, "prompt": str(prompt_path("recovery_judge"))}
    assert job.run(inputs, {"judge": "judge.json"}, KEYS) == 0
    out = records.load(job.out("judge.json"), Judge)
    assert [d.score for d in out.details] == [0.0, 0.0]  # the release's parse-failure score
    assert out.details[0].judge_reason.startswith("stand-in: no valid judge reply (score:")
    assert [(r.stage, r.action, r.touches) for r in out.recoveries] == [
        ("judge", "score 0.0", ["B"])
    ] * 2


def test_a_judge_reason_over_its_limit_is_cut_and_its_score_stands():
    spent = Exhausted(
        "judge", "w", "reason: too long", [json.dumps({"reason": "Same. " * 200, "score": 0.75})]
    )
    reply, rec = recovery.judge_stand_in(spent)
    assert reply.score == 0.75 and len(reply.reason) <= 500 and reply.reason.endswith("Same.")
    assert rec.touches == [] and rec.action == "cut reason"


def test_paper_slotfill_is_one_user_message_with_the_category_drift_examples(scripted, tmp_path):
    ep, seen = scripted({})
    cfg = paper_config(ep.base_url, tmp_path)
    slotfill_user(
        user_id="user_001", system="longctx_full", mode="dump_all", bank=TWO_ENTRY_BANK,
        guides=GUIDES, llm=client_for("slotfill", cfg), prompt=stage_prompt(cfg, "slotfill"),
        memories=[{"content": "User: I fix bikes"}], context_tokens=245_000,
    )  # fmt: skip
    bodies = [b for bs in seen.values() for b in bs]
    assert len(bodies) == 2 and all(len(b["messages"]) == 1 for b in bodies)
    text = next(user_text(b) for b in bodies if "category: skill_memory" in user_text(b))
    assert "do not drift into another one" in text
    assert "For\nskill_memory, say what they can do, not what they prefer or believe" in text
    assert "(that is\n  assistance_preference)" in text
    assert "User: I fix bikes" in text and GUIDES["skill_memory"] in text
