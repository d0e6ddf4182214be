"""The recovery rubric, written once: the judge's levels, what "unknown" scores, when a
dimension counts as recovered, and a version.

Everything that knows the scale reads it from :data:`RUBRIC`: the judge's reply schema
(``judge.JudgeReply``), the scale shown in the judge prompt (``$scale`` and ``$levels`` in
prompts/recovery_judge.md), the unknown policy of the judge rule, attribution's recovered
threshold, the figures' score axes and the scores imported from the release.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

# The judge's levels (MemProbe §3.4; the release's judge used the same five). A Literal, so the
# reply schema sent to the judge lists exactly these values.
# (PEP 586 has no float literals; pydantic checks them, so the type checker is told to let go.)
Level = Literal[0.0, 0.25, 0.5, 0.75, 1.0]  # type: ignore[valid-type]


class Grade(BaseModel):
    model_config = ConfigDict(frozen=True)

    score: float
    name: str
    meaning: str  # our wording, shown to the judge


class Rubric(BaseModel):
    model_config = ConfigDict(frozen=True)

    version: str
    grades: tuple[Grade, ...]  # highest first, as the prompt lists them
    unknown_score: float  # a label "unknown" (no evidence) scores this, with no judge call
    recovered_threshold: float  # a score at or above it is recovered (attribution's "ok")

    @property
    def levels(self) -> tuple[float, ...]:
        """The allowed scores, lowest first."""
        return tuple(sorted(g.score for g in self.grades))

    @property
    def score_range(self) -> tuple[float, float]:
        return self.levels[0], self.levels[-1]

    @property
    def step(self) -> float:
        """The distance between neighbouring levels ("within one level")."""
        return min(b - a for a, b in zip(self.levels, self.levels[1:], strict=False))

    def scale_text(self) -> str:
        """The scale as the judge prompt shows it, one level a line."""
        return "\n".join(f"{g.score!r} = {g.name}: {g.meaning}" for g in self.grades)

    def levels_text(self) -> str:
        *head, last = (repr(v) for v in self.levels)
        return f"{', '.join(head)} or {last}"

    def recovered(self, score: float) -> bool:
        return score >= self.recovered_threshold

    def check(self, score: float) -> float:
        """A score on this rubric, or ValueError naming the allowed levels."""
        if score not in self.levels:
            raise ValueError(f"score {score!r} is not a rubric level ({self.levels_text()})")
        return score


# The levels' meanings are the release judge's (docs/release-format.md §3.6), in our words; the
# 0.0 level also names a label that only names its slot (docs/fidelity.md).
RUBRIC = Rubric(
    version="2",
    grades=(
        Grade(
            score=1.0,
            name="exact",
            meaning="the same meaning as the true value, complete: nothing contradicted, "
            "nothing left out.",
        ),
        Grade(
            score=0.75,
            name="close",
            meaning="the same core meaning, with a minor aspect missing or loosely phrased.",
        ),
        Grade(
            score=0.5,
            name="partial",
            meaning="some overlap with the true value, but a key element is missing or "
            "slightly off.",
        ),
        Grade(
            score=0.25,
            name="weak",
            meaning="only a marginal overlap: it mostly misses the point.",
        ),
        Grade(
            score=0.0,
            name="wrong",
            meaning='it contradicts the true value, is unrelated to it, is "unknown", or only '
            "names the slot (a category, the dimension, or its question) without a value.",
        ),
    ),
    unknown_score=0.0,
    recovered_threshold=0.75,
)
LEVELS: tuple[float, ...] = get_args(Level)
assert LEVELS == RUBRIC.levels, "rubric.Level and RUBRIC's grades must name the same levels"
