"""What a stage can still use of replies whose re-asks ran out (``Exhausted``).

Deterministic, no call: the same replies always give the same stand-in, so a replay of a
finished job stands in the same way. Each stage picks what fits its protocol meaning
(docs/fidelity.md, "Stand-ins"); these are the parts they share.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from memprobe.spec.records import Metric, StandIn
from memprobe.vocabulary import Stage

M = TypeVar("M", bound=BaseModel)


@dataclass
class Exhausted:
    """A structured chain whose re-asks were spent: what it got, for the stage's stand-in.

    ``replies``: every raw reply, in order; ``problem``: what was wrong with the last one.
    """

    role: str
    where: str
    problem: str
    replies: list[str] = field(default_factory=list)

    @property
    def last(self) -> str:
        return self.replies[-1] if self.replies else ""

    def stand_in(self, stage: Stage, action: str, touches: Iterable[Metric] = ()) -> StandIn:
        """The record of the stand-in a stage used for this chain."""
        return StandIn(
            stage=stage,
            where=self.where,
            problem=self.problem,
            action=action,
            touches=list(touches),
        )


def problem_of(err: BaseException) -> str:
    """What was wrong with a reply, in one line (the first validation error, or bad JSON)."""
    if isinstance(err, ValidationError):
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "reply"
        return f"{loc}: {first['msg']}"
    if isinstance(err, json.JSONDecodeError):
        return f"not valid JSON ({err.msg})"
    return str(err)


ELLIPSIS = "…"  # marks a text cut inside a sentence
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*(?=\s|$)")
_FIXABLE = ("string_too_long", "too_long")  # what cutting can repair
_LEADING = frozenset("a an the and or but of to in on at for with by from as that which".split())


def strip_fence(text: str) -> str:
    # String operations, not a regex: `\s*(.*?)\s*` backtracks quadratically on long
    # whitespace replies.
    text = text.strip()
    if len(text) >= 6 and text.startswith("```") and text.endswith("```"):
        inner = text[3:-3]
        return (inner[4:] if inner.startswith("json") else inner).strip()
    return text


def cut_at_sentence(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: up to its last sentence end that fits (in the
    second half of the limit), else at a word boundary, marked with an ellipsis."""
    text = text.strip()
    if len(text) <= limit:
        return text
    window = text[:limit]
    ends = [m.end() for m in _SENTENCE_END.finditer(window)]
    if ends and ends[-1] >= limit // 2:
        return window[: ends[-1]]
    head = text[: max(limit - len(ELLIPSIS), 1)]
    space = head.rfind(" ")
    head = head[:space] if space > 0 else head
    return head.rstrip(" ,;:-") + ELLIPSIS


def first_sentence(text: str) -> str:
    """``text`` up to its first sentence end (all of it when it has none)."""
    text = text.strip()
    end = _SENTENCE_END.search(text)
    return text[: end.end()] if end else text


def cut_words(text: str, max_words: int) -> str:
    """At most ``max_words`` words: up to the last clause boundary among them (past the first
    third), else the first ``max_words``, without a dangling article or preposition."""
    words = text.split()
    if len(words) <= max_words:
        return " ".join(words)
    head = words[:max_words]
    bounds = [i for i, w in enumerate(head) if w[-1] in ",;:.!?" and i + 1 >= max_words // 3]
    if bounds:
        head = head[: bounds[-1] + 1]
    while len(head) > 1 and head[-1].lower().strip(",;:") in _LEADING:
        head.pop()
    return " ".join(head).rstrip(",;:")


def json_value(raw: str) -> Any | None:
    """The reply's JSON value, or None when it is not JSON."""
    try:
        return json.loads(strip_fence(raw))
    except ValueError:
        return None


def _set(data: Any, loc: tuple[Any, ...], value: Any) -> None:
    for part in loc[:-1]:
        data = data[part]
    data[loc[-1]] = value


def _get(data: Any, loc: tuple[Any, ...]) -> Any:
    for part in loc:
        data = data[part]
    return data


def lenient(raw: str, schema: type[M]) -> tuple[M, list[str]] | None:
    """The reply as ``schema`` once over-long strings are cut at a sentence end and over-long
    lists cut to their limit, with the dotted places that were cut; None if anything else is
    wrong (not JSON, a missing field, a value outside its choices)."""
    data = json_value(raw)
    if data is None:
        return None
    cut: list[str] = []
    for _ in range(8):  # a fix can expose an error below it (a list cut, then its items)
        try:
            return schema.model_validate(data), cut
        except ValidationError as err:
            errors = err.errors()
        if any(e["type"] not in _FIXABLE for e in errors):
            return None
        for e in errors:
            loc, limit = tuple(e["loc"]), e["ctx"]["max_length"]
            value = _get(data, loc)
            _set(
                data,
                loc,
                cut_at_sentence(value, limit) if isinstance(value, str) else value[:limit],
            )
            cut.append(".".join(map(str, loc)))
    return None


def last_lenient(replies: list[str], schema: type[M]) -> tuple[M, list[str]] | None:
    """The latest reply that :func:`lenient` can repair."""
    for raw in reversed(replies):
        fixed = lenient(raw, schema)
        if fixed is not None:
            return fixed
    return None


def objects(replies: list[str]) -> Iterator[dict[str, Any]]:
    """The replies that are JSON objects, latest first."""
    for raw in reversed(replies):
        value = json_value(raw)
        if isinstance(value, dict):
            yield value


def longest_text(value: Any) -> str:
    """The longest string anywhere in a JSON value (a reply that nested its answer)."""
    if isinstance(value, str):
        return value.strip()
    parts = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return max((longest_text(v) for v in parts), key=len, default="")
