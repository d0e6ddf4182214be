"""Contradiction cues (memprobe/protocol/opposites.py): sides, negation and contrast cues,
whole words only."""

from __future__ import annotations

from memprobe.protocol.opposites import conflicts, sides


def test_opposite_poles_of_one_axis_conflict():
    assert conflicts("won a small-claims case", "lost a small-claims case") == ["outcome"]
    assert conflicts("one-line answers", "thorough, detailed write-ups") == ["length"]
    assert conflicts("keeps several crews in sync", "works alone and clashes with others") == [
        "together"
    ]


def test_the_same_side_or_another_axis_is_no_conflict():
    assert conflicts("short answers", "brief, concise replies") == []
    assert conflicts("won a prize", "prefers short answers") == []
    assert sides("prefers short answers") == {"liking": 1, "length": 1}


def test_a_negation_or_contrast_cue_within_two_words_flips_the_pole():
    assert sides("not at all organized") == {"order": -1}  # "at all" between
    assert sides("not someone who is organized") == {"order": 1}  # three words: too far
    assert sides("clean formats over long prose") == {"length": 1}
    assert conflicts("short answers", "clean formats over long prose") == []
    assert conflicts("sees herself as principled, not flexible", "adjusts when things change") == [
        "flexibility"
    ]


def test_pole_and_cue_words_match_whole_hyphenated_words_only():
    assert sides("a no-nonsense tone") == {"warmth": -1}  # a pole word, not the cue "no"
    assert sides("needs concrete, school-like wording") == {}  # not "like"
    assert sides("low-friction guidance") == {}  # not "friction"


def test_words_for_the_thing_dealt_with_take_no_side():
    """The revision read on users 1-25: these described the problem, the shift, the material
    or the week, not the person, where the cue fired."""
    assert sides("breaks messy problems into workable steps") == {}
    assert sides("got through a chaotic shift") == {}
    assert sides("knows basic vehicle inspection concepts") == {}
    assert sides("unclear plans make the week feel longer") == {}
