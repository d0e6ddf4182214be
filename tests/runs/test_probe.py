"""What the rollout and `probe` jobs write for amem and mem0, read back from a real Snakemake run.

One release-fixture user (8 dims, 2/2/2/1/1) runs through amem and mem0 against an endpoint
whose replies are pinned: the simulator is satisfied at once with SIMULATOR_TEXT, amem's note
analysis and mem0's extraction answer per task. So both stores are known in advance: amem keeps
the 8 tasks and the 8 final user messages (T + dims = 16 notes, the release's N = T + 31),
mem0 keeps one fact per task. Each task's note (amem) or fact (mem0) names its dimension, so the
per-dimension probe must rank it first, and every query returns k = 3 items of the store.
"""

from __future__ import annotations

import json

import pytest

from memprobe.spec.taxonomy import load_guides, retrieve_query
from tests.helpers.endpoint import Endpoint
from tests.helpers.release_fixture import EXPECTED_ORDER, FIXTURE, release_users_config
from tests.helpers.workflow import Workflow

K = 3
USER = "user_001"
SIMULATOR_TEXT = "Thanks, that settles it."
CATEGORIES = ["skill_memory"] * 2 + ["knowledge_memory"] * 2 + ["episodic_memory"] * 2
CATEGORIES += ["self_model", "assistance_preference"]


def words(dim: str) -> str:
    return dim.replace("_", " ")


def fact(dim: str) -> str:
    return f"The user's {words(dim)} matters to them."


def analysis(dim: str) -> dict:
    return {
        "keywords": [dim.split("_")[0]],
        "context": f"The user asks for help with their {words(dim)}.",
        "tags": ["request"],
    }


CLOSING = {"keywords": ["thanks"], "context": "General", "tags": ["closing"]}


def task_prefix(i: int) -> str:
    return f"Task {i} of {USER}:"  # the fixture's task texts (make_release_fixture.py)


def script() -> dict:
    """Pinned replies: the writer role serves amem (analyze, evolve) and mem0 (extraction)."""
    tasks = list(enumerate(EXPECTED_ORDER, 1))
    return {
        "simulator": {"else": {"feedback_type": "satisfied", "text": SIMULATOR_TEXT}},
        "writer": {
            "when": [
                # mem0: the message being added follows "## New Messages" in its prompt
                *[
                    [
                        [f"## New Messages\nuser: {task_prefix(i)}"],
                        {"memory": [{"id": "0", "text": fact(d), "attributed_to": "user"}]},
                    ]
                    for i, d in tasks
                ],
                [[f"## New Messages\nuser: {SIMULATOR_TEXT}"], {"memory": []}],
                # amem: evolution (nothing relates), then the analysis of each note
                [["You maintain a linked note memory"], {"should_evolve": False, "actions": []}],
                *[[[f"NOTE\n{task_prefix(i)}"], analysis(d)] for i, d in tasks],
                [[f"NOTE\n{SIMULATOR_TEXT}"], CLOSING],
            ]
        },
    }


def without_score(item: dict) -> dict:
    return {k: v for k, v in item.items() if k != "score"}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict:
    """memories.json and retrieved_k3.json of both systems, from one real run."""
    root = tmp_path_factory.mktemp("probe_outputs")
    path = root / "script.json"
    path.write_text(json.dumps(script()))
    ep = Endpoint(str(path))
    try:
        cfg = release_users_config(
            ep.base_url, n_users=1, systems=["amem", "mem0"], modes=["retrieve"], top_k=K
        )
        (root / "wf").mkdir()
        wf = Workflow(root / "wf", cfg)
        targets = [wf.target(f"{s}/{USER}/retrieved_k{K}.json") for s in ("amem", "mem0")]
        wf.run(*targets)
    finally:
        ep.close()
    res = wf.results
    return {
        (s, name): json.loads((res / s / USER / f"{name}.json").read_text())
        for s in ("amem", "mem0")
        for name in ("memories", f"retrieved_k{K}")
    }


def check_queries(retrieved: dict, system: str) -> None:
    """k items per dimension, in bank order, under the user-agnostic query."""
    guides = load_guides()
    assert (retrieved["user_id"], retrieved["system"], retrieved["k"]) == (USER, system, K)
    assert [(q["category"], q["dimension"]) for q in retrieved["queries"]] == list(
        zip(CATEGORIES, EXPECTED_ORDER, strict=True)
    )
    for q in retrieved["queries"]:
        assert q["query"] == retrieve_query(q["dimension"], q["category"], guides)
        assert len(q["items"]) == K, q["dimension"]
        scores = [i["score"] for i in q["items"]]
        assert scores == sorted(scores, reverse=True), q["dimension"]


@pytest.mark.workflow
def test_amem_memories_and_probe(outputs):
    mem = outputs[("amem", "memories")]
    tasks = FIXTURE / "benchmark_data/CustomTasksPooledFinal" / f"{USER}.json"
    texts = [t["task"] for t in json.loads(tasks.read_text())["tasks"]]
    # per episode: the task (turn 1), then the final user message (end of episode)
    assert (mem["user_id"], mem["system"], mem["num_memories"]) == (USER, "amem", 16)
    notes = mem["memories"]
    assert [n["content"] for n in notes] == [x for t in texts for x in (t, SIMULATOR_TEXT)]
    assert [n["category"] for n in notes] == ["task", "user"] * 8
    assert [n["id"] for n in notes] == [f"n{i:04d}" for i in range(1, 17)]
    assert [n["task_index"] for n in notes] == [i for i in range(1, 9) for _ in (0, 1)]
    for i, d in enumerate(EXPECTED_ORDER):
        task_note, closing = notes[2 * i], notes[2 * i + 1]
        assert {k: task_note[k] for k in ("keywords", "context", "tags")} == analysis(d)
        assert {k: closing[k] for k in ("keywords", "context", "tags")} == CLOSING
    assert all(n["links"] == [] and n["evolution_history"] == [] for n in notes)
    assert mem["meta"]["links"] == 0 and mem["meta"]["neighbours"] == 5

    retrieved = outputs[("amem", f"retrieved_k{K}")]
    check_queries(retrieved, "amem")
    by_id = {n["id"]: n for n in notes}
    for i, q in enumerate(retrieved["queries"]):
        # the note of the dimension's own task ranks first (its context names the dimension)
        assert q["items"][0]["id"] == f"n{2 * i + 1:04d}", q["dimension"]
        for item in q["items"]:  # a hit is the stored note, whole, plus its cosine
            assert without_score(item) == by_id[item["id"]]
            assert -1.0 <= item["score"] <= 1.0


@pytest.mark.workflow
def test_mem0_memories_and_probe(outputs):
    mem = outputs[("mem0", "memories")]
    # one extracted fact per task; the final user messages extract nothing
    assert (mem["user_id"], mem["system"], mem["num_memories"]) == (USER, "mem0", 8)
    facts = mem["memories"]
    assert [f["content"] for f in facts] == [fact(d) for d in EXPECTED_ORDER]
    assert all(f["category"] == "fact" and f["attributed_to"] == "user" for f in facts)
    assert all(
        list(f) == ["id", "content", "category", "attributed_to", "metadata", "timestamp"]
        for f in facts
    )
    assert len({f["id"] for f in facts}) == 8
    assert mem["meta"]["adds"] == 16  # each task and each final user message was added

    retrieved = outputs[("mem0", f"retrieved_k{K}")]
    check_queries(retrieved, "mem0")
    by_id = {f["id"]: f for f in facts}
    for d, q in zip(EXPECTED_ORDER, retrieved["queries"], strict=True):
        assert q["items"][0]["content"] == fact(d), d  # the fact naming the dimension
        for item in q["items"]:
            stored = by_id[item["id"]]
            assert (item["content"], item["category"]) == (stored["content"], "fact")
