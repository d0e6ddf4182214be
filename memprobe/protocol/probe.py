"""Retrieve mode's input: the system's own top-k items per target (rule ``probe``).

Each target is asked with a fixed, user-agnostic query that names its dimension and its
category's guide, never the user's value (memprobe/spec/taxonomy.py ``retrieve_query``).
"""

from __future__ import annotations

from memprobe.spec.records import Bank, Retrieved, RetrievedQuery
from memprobe.spec.taxonomy import retrieve_query


def probe(system, bank: Bank, guides: dict[str, str], k: int, user_id: str) -> Retrieved:
    queries = []
    for e in bank.entries:
        q = retrieve_query(e.dimension, e.category, guides)
        queries.append(
            RetrievedQuery(
                category=e.category, dimension=e.dimension, query=q, items=system.search(q, k)
            )
        )
    return Retrieved(user_id=user_id, system=system.name, k=k, queries=queries)
