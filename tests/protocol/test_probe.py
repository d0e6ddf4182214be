"""The probe (memprobe/protocol/probe.py): one user-agnostic query per target, at k."""

from __future__ import annotations

from memprobe.protocol.probe import probe
from memprobe.spec import taxonomy
from tests.helpers.recovery_case import BANK, GUIDES


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
    out = probe(system, BANK, GUIDES, 3, "user_007")
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
