"""Slot-fill (memprobe/protocol/slotfill.py): the target never shown, a store over budget flagged
or chunked, retrieve mode's own items, "unknown" in any spelling, and a job past its re-asks."""

from __future__ import annotations

import json

import pytest

from memprobe.config.loading import load_config
from memprobe.llm.client import client_for
from memprobe.protocol.judge import (
    judge_user,
)
from memprobe.protocol.slotfill import (
    PROMPT_OVERHEAD_TOKENS,
    _part,
    chunk_items,
    count_tokens,
    is_unknown,
    memory_budget,
    serialize,
    slotfill_user,
    split_item,
    store_overflows,
)
from memprobe.spec import records, taxonomy
from memprobe.spec.prompts import prompt_path
from memprobe.spec.records import (
    Memories,
    Retrieved,
    RetrievedQuery,
    SlotFill,
)
from tests.helpers.endpoint import record_requests
from tests.helpers.jobs import ScriptJob
from tests.helpers.paper import paper_config, stage_prompt
from tests.helpers.protocol import SPENT, TWO_ENTRY_BANK, user_text
from tests.helpers.recording_llm import RecordingLLM
from tests.helpers.recovery_case import BANK, GUIDES, KEYS, llm_judge, slotfill, store
from tests.helpers.workflow import local_raw


def evidence_answer(messages, schema):
    text = messages[-1]["content"]
    return {"label": "checks sources" if "note 7 " in text else "unknown", "reason": "r"}


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


# -- slot-fill and judge jobs whose replies never validate -----------------------------------


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
    assert out.memory_tokens > memory_budget(2000)
    assert llm.requests == []  # nothing was sent that could not fit
    assert all(
        e.label == "unknown" and not e.called and "overflow" in e.reason for e in out.entries
    )
    judge_llm = RecordingLLM(lambda m, s: {"score": 1.0, "reason": "would pay"})
    judge = judge_user(out, BANK, llm_judge(judge_llm))
    assert judge.overflow and judge.flagged  # the tables' dagger
    assert judge_llm.requests == []  # an unscored store costs the judge nothing either
    assert [d.score for d in judge.details] == [0.0, 0.0] and judge.overall == 0.0


def test_overflow_chunked_is_scored():
    llm = RecordingLLM(evidence_answer)
    big = store(40, 400)
    out = slotfill(big, llm, context_tokens=2000, overflow="chunked")
    assert out.overflow and out.overflow_strategy == "chunked"
    # every call fits the budget, and the chunk holding note 7 gives the label
    budget = memory_budget(2000)
    assert len(llm.requests) > 2
    assert all(e.label == "checks sources" for e in out.entries)
    for i in range(len(llm.requests)):
        assert count_tokens(llm.prompt_text(i)) < budget + PROMPT_OVERHEAD_TOKENS
    judge = judge_user(
        out,
        BANK,
        llm_judge(RecordingLLM(lambda m, s: {"reason": "r", "score": 0.75})),
    )
    assert judge.overall == pytest.approx(0.75) and not judge.flagged


def test_store_overflows_threshold():
    over, tokens = store_overflows(store(1, 10), 2000)
    assert not over and tokens > 0
    assert store_overflows(store(40, 400), 2000)[0]


def test_chunked_reduce_joins_the_answers_of_several_chunks():
    llm = RecordingLLM(chunk_answer({"note 2 ": "first", "note 37 ": "second"}))
    out = slotfill(store(40, 400), llm, context_tokens=2000, overflow="chunked")
    n_chunks = len(chunk_items(store(40, 400), memory_budget(2000)))
    assert n_chunks >= 3
    # per dimension: one call per chunk and one reduce call
    assert len(llm.requests) == 2 * (n_chunks + 1)
    assert [e.label for e in out.entries] == ["first + second"] * 2
    assert all(e.reason == "reduced" and e.called for e in out.entries)


def test_chunked_with_no_evidence_in_any_chunk_is_unknown_after_every_chunk_was_read():
    llm = RecordingLLM(chunk_answer({}))
    out = slotfill(store(40, 400), llm, context_tokens=2000, overflow="chunked")
    n_chunks = len(chunk_items(store(40, 400), memory_budget(2000)))
    assert len(llm.requests) == 2 * n_chunks  # no reduce call
    assert all(
        e.label == "unknown" and e.reason == "no chunk held evidence" and e.called
        for e in out.entries
    )


def test_an_item_over_the_budget_on_its_own_is_split_into_parts_that_fit():
    # One item of ~20,000 chars (~5,000 tokens) between two small ones, budget 1,200 tokens.
    budget = memory_budget(2000)
    big = {"content": "start " + "z" * 20_000 + " NEEDLE-AT-THE-END"}
    items = [{"content": "small 0"}, big, {"content": "small 2"}]
    chunks = chunk_items(items, budget)
    assert all(count_tokens(serialize(c)) <= budget for c in chunks)
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
        assert count_tokens(block.strip()) <= budget


def test_split_item_escapes_count_against_the_budget():
    # quotes and newlines double when escaped: the parts must still fit
    item = {"content": '"\n' * 3000}
    parts = split_item(item, 300)
    assert all(count_tokens(serialize([p])) <= 300 for p in parts)
    assert json.loads("".join(p["text"] for p in parts)) == item


def test_chunk_items_keeps_order_and_fills_each_chunk():
    items = store(10, 100)  # ~115 chars each
    one = count_tokens(serialize(items[:1]))
    chunks = chunk_items(items, 3 * one)
    assert [x for c in chunks for x in c] == items
    assert all(count_tokens(serialize(c)) <= 3 * one for c in chunks)
    # greedy: no chunk could have taken the next chunk's first item
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert count_tokens(serialize([*a, b[0]])) > 3 * one
    assert chunk_items([], 100) == []


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


def test_token_estimate_budget_and_the_overflow_boundary():
    assert [count_tokens("x" * n) for n in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]
    assert memory_budget(2000) == 2000 - 600 - 200
    assert serialize([{"a": "é"}]) == '[\n  {\n    "a": "é"\n  }\n]'
    # a store of exactly the budget fits; one token more overflows
    budget = memory_budget(2000)
    for extra, over in ((0, False), (1, True)):
        pad = 4 * (budget + extra) - len(serialize([{"c": ""}]))
        items = [{"c": "y" * pad}]
        assert count_tokens(serialize(items)) == budget + extra
        assert store_overflows(items, 2000) == (over, budget + extra)
        out = slotfill(items, RecordingLLM(lambda m, s: {"label": "x", "reason": ""}))
        assert slotfill(items, RecordingLLM(evidence_answer), context_tokens=2000).overflow is over
        assert not out.overflow  # the default 128k context


def test_every_call_names_user_system_mode_and_dimension():
    llm = RecordingLLM(chunk_answer({"note 2 ": "first", "note 37 ": "second"}))
    slotfill(store(40, 400), llm, context_tokens=2000, overflow="chunked")
    base = "user user_001, system memt, dump_all, critical_thinking_skill"
    n = len(chunk_items(store(40, 400), memory_budget(2000)))
    assert llm.wheres[: n + 1] == [f"{base}, chunk {i}" for i in range(1, n + 1)] + [
        f"{base}, reduce"
    ]
    out = slotfill(store(1, 5), RecordingLLM(lambda m, s: {"label": "twice", "reason": ""}))
    judge_llm = RecordingLLM(lambda m, s: {"score": 0.5, "reason": ""})
    judged = judge_user(out, BANK, llm_judge(judge_llm))
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
    parts = split_item(item, budget)
    text = json.dumps(item, ensure_ascii=False)  # "é" stays one character, never \u00e9
    assert "".join(p["text"] for p in parts) == text
    assert all(p["text"] for p in parts) and len(parts) >= 3
    for i, p in enumerate(parts):
        assert count_tokens(serialize([p])) <= budget
        if i < len(parts) - 1:  # shrinking by 3/4 at a time: a third longer would not fit
            start = text.index(p["text"], sum(len(q["text"]) for q in parts[:i]))
            longer = {**p, "text": text[start : start + len(p["text"]) * 4 // 3 + 1]}
            assert count_tokens(serialize([longer])) > budget


def test_split_item_at_exactly_the_budget_is_one_part_and_a_tiny_budget_still_ends():
    for n in range(100, 200):
        item = {"c": "x" * n}
        one = count_tokens(serialize([_part(0, json.dumps(item))]))
        if (4 * one - 3) == len(serialize([_part(0, json.dumps(item))])):
            break  # the serialization is exactly `one` tokens long, no slack
    assert split_item(item, one) == [_part(0, json.dumps(item))]
    assert len(split_item(item, one - 1)) == 2
    # a budget below one character's part: one-character parts, and the loop ends
    assert [p["text"] for p in split_item({"c": "ab"}, 1)] == list('{"c": "ab"}')


def test_chunks_and_stores_of_exactly_the_budget_fit():
    a, b = {"content": "alpha " * 20}, {"content": "beta " * 30}
    both = count_tokens(serialize([a, b]))
    assert chunk_items([a, b], both) == [[a, b]]
    assert chunk_items([a, b], both - 1) == [[a], [b]]
    alone = count_tokens(serialize([a]))
    assert chunk_items([a], alone) == [[a]]  # not split
    # the default context is 128,000 tokens
    budget = memory_budget(128_000)
    pad = 4 * (budget + 1) - len(serialize([{"c": ""}]))
    out = slotfill([{"c": "y" * pad}], RecordingLLM(lambda m, s: {"label": "x", "reason": ""}))
    assert out.overflow and out.memory_tokens == budget + 1


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
    assert not is_unknown("X") and is_unknown("unknown...")


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
