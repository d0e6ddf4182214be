"""Prompt templates live in ``prompts/<name>.md``; this module renders them to chat messages.

File format: the system part, then a line ``=== user ===``, then the user part. Placeholders
are ``$name`` (``string.Template``), so JSON braces in a prompt need no escaping.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from string import Template

PROMPT_DIR = Path(__file__).resolve().parents[2] / "prompts"
USER_MARKER = "=== user ==="


class PromptError(ValueError):
    pass


def prompt_path(name: str) -> Path:
    return PROMPT_DIR / f"{name}.md"


def render(path: str | os.PathLike[str], **values: object) -> list[dict[str, str]]:
    """Render a prompt file to ``[system, user]`` messages (system omitted when empty)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PromptError(f"{path}: prompt file not found") from None
    system, sep, user = text.partition(USER_MARKER)
    if not sep:
        raise PromptError(f"{path}: missing the '{USER_MARKER}' line")
    try:
        sys_text = Template(system.strip()).substitute(values)
        user_text = Template(user.strip()).substitute(values)
    except KeyError as err:
        raise PromptError(f"{path}: placeholder ${err.args[0]} has no value") from None
    messages = [{"role": "system", "content": sys_text}] if sys_text else []
    messages.append({"role": "user", "content": user_text})
    return messages


def dialogue(turns: Iterable[tuple[str, str]]) -> str:
    """A conversation as prompts show it: ``Agent: ...`` then ``User: ...`` per turn."""
    return "\n".join(f"Agent: {agent}\nUser: {user}" for agent, user in turns)
