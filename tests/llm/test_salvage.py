"""What a stage can still use of replies whose re-asks ran out (memprobe/llm/salvage.py)."""

from __future__ import annotations

import time

from pydantic import BaseModel, Field

from memprobe.llm.salvage import (
    cut_at_sentence,
    cut_words,
    first_sentence,
    last_lenient,
    lenient,
    longest_text,
    strip_fence,
)


class Reply(BaseModel):
    text: str = Field(max_length=40)
    tags: list[str] = Field(max_length=2)
    kind: str = "x"


def test_fence_stripping_is_linear_on_long_whitespace():
    text = "```json\n" + " \n" * 50_000 + "x"
    t0 = time.monotonic()
    strip_fence(text)
    assert time.monotonic() - t0 < 0.5
    assert strip_fence('```json\n{"a": 1}\n```') == '{"a": 1}'


def test_a_cut_ends_at_the_last_sentence_that_fits_else_at_a_word_with_an_ellipsis():
    assert cut_at_sentence("Short enough.", 40) == "Short enough."
    text = "I tried the first plan. It failed twice, so now what?"  # 53 characters
    assert cut_at_sentence(text, 40) == "I tried the first plan."
    assert cut_at_sentence("one two three four five six", 12) == "one two…"
    assert len(cut_at_sentence("x" * 50, 10)) == 10


def test_cut_words_stops_at_a_clause_without_a_dangling_word():
    long = "In the center of the axis, the person would like to be helped in a way that"
    assert cut_words(long, 15) == "In the center of the axis"
    ten = "wants answers first and then the reasons behind them in full detail"
    assert cut_words(ten, 10) == "wants answers first and then the reasons behind them"  # no "in"
    assert cut_words("fine as is", 15) == "fine as is"


def test_lenient_cuts_over_long_strings_and_lists_and_says_where():
    raw = '{"text": "A first sentence here. And a second one that runs on.", "tags": ["a","b","c"]}'
    value, cut = lenient(raw, Reply)
    assert value == Reply(text="A first sentence here.", tags=["a", "b"])
    assert cut == ["text", "tags"]


def test_lenient_refuses_what_cutting_cannot_repair():
    assert lenient("not json", Reply) is None
    assert lenient('{"tags": []}', Reply) is None  # a missing field
    assert lenient('{"text": 5, "tags": []}', Reply) is None  # a wrong type


def test_last_lenient_takes_the_latest_repairable_reply():
    replies = ['{"text": "old", "tags": []}', '{"text": "newer", "tags": []}', "garbage"]
    value, cut = last_lenient(replies, Reply)
    assert value.text == "newer" and cut == []


def test_longest_text_finds_a_nested_answer():
    assert longest_text({"tasks": [{"task": "Plan my week, please.", "why": "x"}]}) == (
        "Plan my week, please."
    )
    assert longest_text(42) == ""


def test_first_sentence():
    assert first_sentence(" Calm and steady (mostly). Then details. More.") == (
        "Calm and steady (mostly)."
    )
    assert (
        first_sentence('He lives by "less is more." Then details.') == 'He lives by "less is more."'
    )
    assert first_sentence("No end at all") == "No end at all"
    assert first_sentence("v2.5 of the plan. Next.") == "v2.5 of the plan."
