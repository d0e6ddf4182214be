"""How much of a target a text gives away: the share of its content words the text repeats.

The tasks stage records it per task (and marks a task over ``tasks.leak_threshold``); the
critic's stand-in decides by it; attribution and the inspector read the same measure.
"""

from __future__ import annotations

import re

from memprobe.spec.records import LeakReport, Task

_STOP = set(
    "a an the and or but of to in on at for with by from as is are was were be been being it its "
    "this that these those they them their he she his her i me my you your we our not no very "
    "more most less than then so too can could would should will just only about into over "
    "under when while who whom which what how why all any some each both few many much own same "
    "other such has have had do does did doing prefers prefer likes like user every also often "
    "always usually rather quite".split()
)


def _stem(word: str) -> str:
    """A crude suffix strip so that "budgets"/"budgeting" count as "budget"."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> set[str]:
    words = re.findall(r"[a-z][a-z'-]+", text.lower())
    return {_stem(w.strip("'-")) for w in words if len(w) > 2 and w not in _STOP}


def leak_share(task: str, short: str) -> float:
    """Share of the target's content words that also appear in its task (0 = no echo)."""
    target = content_words(short)
    if not target:
        return 0.0
    return round(len(target & content_words(task)) / len(target), 4)


def leak_report(tasks: list[Task], threshold: float) -> LeakReport:
    shares = [t.leak_share for t in tasks]
    return LeakReport(
        threshold=threshold,
        mean_share=round(sum(shares) / len(shares), 4) if shares else 0.0,
        max_share=max(shares, default=0.0),
        flagged=[t.index for t in tasks if t.leak_share > threshold],
        edited=sum(1 for t in tasks if t.revisions),
        budget_spent=sum(1 for t in tasks if t.status == "fishing_budget_spent"),
    )
