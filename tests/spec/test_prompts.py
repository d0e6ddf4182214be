"""Prompt files rendered to chat messages (memprobe/spec/prompts.py): the ``=== user ===``
split, ``$name`` placeholders, and one line naming the file for each mistake."""

from __future__ import annotations

import pytest

from memprobe.spec import prompts
from memprobe.spec.prompts import PromptError, dialogue, prompt_path, render


def write(tmp_path, text: str):
    path = tmp_path / "p.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_system_and_user_parts_are_split_at_the_marker_and_filled(tmp_path):
    path = write(tmp_path, 'You grade $who.\n\n=== user ===\n\nReply {"score": $n}\n')
    assert render(path, who="labels", n=3) == [
        {"role": "system", "content": "You grade labels."},
        {"role": "user", "content": 'Reply {"score": 3}'},  # JSON braces need no escaping
    ]


def test_an_empty_system_part_is_left_out(tmp_path):
    path = write(tmp_path, "\n=== user ===\nHello $name\n")
    assert render(path, name="Ada") == [{"role": "user", "content": "Hello Ada"}]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no marker here $x", "missing the '=== user ===' line"),
        ("sys\n=== user ===\nneeds $absent", "placeholder $absent has no value"),
    ],
)
def test_a_bad_prompt_file_is_one_line_naming_it(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(PromptError) as err:
        render(path, x=1)
    assert str(err.value) == f"{path}: {message}"


def test_a_missing_prompt_file_is_one_line_naming_it(tmp_path):
    with pytest.raises(PromptError, match=r"no_such\.md: prompt file not found$"):
        render(tmp_path / "no_such.md")


def test_prompt_names_resolve_to_the_repositorys_prompt_files():
    path = prompt_path("persona_narrative")
    assert path == prompts.PROMPT_DIR / "persona_narrative.md" and path.is_file()
    assert prompts.USER_MARKER in path.read_text(encoding="utf-8")


def test_a_dialogue_shows_each_turn_agent_first():
    turns = [("How can I help?", "Plan my week."), ("Done.", "Thanks")]
    assert (
        dialogue(turns) == "Agent: How can I help?\nUser: Plan my week.\nAgent: Done.\nUser: Thanks"
    )
    assert dialogue([]) == ""
