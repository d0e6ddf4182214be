"""The interaction loop end to end with every CPU system, through real Snakemake jobs.

The jobs run with a network guard (``tests/netguard``) on PYTHONPATH: each Python process
records that the guard is armed and logs any non-loopback connection attempt.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprobe.spec.records import Episodes, Memories
from tests.helpers.workflow import tiny_config

pytestmark = pytest.mark.workflow

SYSTEMS = ["nomem", "longctx_full", "amem", "mem0"]
USERS = ("user_001", "user_002")
GUARD = Path(__file__).resolve().parents[1] / "netguard"


def load_run(results: Path, system: str, user: str) -> tuple[Episodes, Memories]:
    base = results / system / user
    episodes = Episodes.model_validate_json((base / "episodes.json").read_text())
    memories = Memories.model_validate_json((base / "memories.json").read_text())
    return episodes, memories


def test_tiny_run_all_cpu_systems_memory_carries_within_user_only(
    endpoint, workflow_factory, tmp_path
):
    wf = workflow_factory(tiny_config(endpoint.base_url, systems=SYSTEMS))
    net_log = tmp_path / "net.log"
    env = {"PYTHONPATH": str(GUARD), "MEMPROBE_NET_LOG": str(net_log), "HF_HUB_OFFLINE": "1"}
    # Four systems on a shared 2-core machine: each job imports torch; allow for it.
    wf.run("results/table2.csv", env=env, timeout=2400)
    results = wf.root / "results"

    # No process attempted a non-loopback connection, and the guard ran in the jobs.
    assert not net_log.exists(), net_log.read_text()
    armed = (tmp_path / "net.log.armed").read_text().split()
    assert len(armed) >= 2 * len(SYSTEMS)  # at least one process per rollout job

    for system in SYSTEMS:
        for user in USERS:
            base = results / system / user
            for f in ("episodes.json", "memories.json", "preference.json", "store"):
                assert (base / f).exists(), base / f
            for mode in ("dump_all", "retrieve") if system != "nomem" else ("dump_all",):
                assert (base / mode / "judge.json").exists()

    for system in ("amem", "mem0"):
        first_eps, first_mem = load_run(results, system, "user_001")
        second_eps, second_mem = load_run(results, system, "user_002")
        contents_1 = {m["content"] for m in first_mem.memories}
        contents_2 = {m["content"] for m in second_mem.memories}
        assert contents_1 and contents_2
        # A fresh store per user: user_002 starts with nothing and never sees user_001's items.
        assert second_eps.episodes[0].turns[0].recalled == []
        assert first_eps.episodes[0].turns[0].recalled == []
        assert not contents_1 & contents_2
        recalled_2 = [r for e in second_eps.episodes for t in e.turns for r in t.recalled]
        assert not any(c in r for c in contents_1 for r in recalled_2)
        # Memory carries across one user's tasks: task 2's first turn (before any task-2
        # write) recalls items written during task 1.
        task2 = first_eps.episodes[1].turns[0].recalled
        assert task2, f"{system}: nothing recalled at the start of task 2"
        if system == "amem":
            from_task1 = {m["content"] for m in first_mem.memories if m["task_index"] == 1}
            assert any(r.startswith(c) for c in from_task1 for r in task2)
            note = first_mem.memories[0]
            assert {"keywords", "context", "tags", "links", "evolution_history"} <= set(note)
        else:
            assert set(task2) <= contents_1
            assert first_mem.meta["mem0ai"] == "2.2.1"
            assert all(m["category"] == "fact" for m in first_mem.memories)

    # Systems without recall blocks record none.
    for system in ("nomem", "longctx_full"):
        eps, _ = load_run(results, system, "user_001")
        assert all(t.recalled == [] for e in eps.episodes for t in e.turns)

    # Each episode ends on satisfied or at max_turns, and says which.
    eps, _ = load_run(results, "amem", "user_001")
    for e in eps.episodes:
        assert e.end_reason == (
            "satisfied" if e.turns[-1].feedback_type == "satisfied" else "max_turns"
        )
        assert len(e.turns) <= 3

    assert wf.scheduled("results/table2.csv") == {}

    # A changed preference prompt reruns preference (every user x system) and tables only.
    pref = wf.root / "prompts" / "preference_judge.md"
    pref.write_text(pref.read_text() + "\nJudge only what the reply shows.\n")
    scheduled = wf.scheduled("results/table2.csv")
    assert scheduled.get("preference") == len(SYSTEMS) * len(USERS)
    assert set(scheduled) <= {"preference", "tables", "all"}, scheduled
    pref.write_text(pref.read_text().replace("\nJudge only what the reply shows.\n", ""))

    # A changed amem prompt reruns amem's rollouts (and what follows), no other system's.
    evolve = wf.root / "prompts" / "amem_evolve.md"
    evolve.write_text(evolve.read_text() + "\nPrefer few links.\n")
    scheduled = wf.scheduled("results/table2.csv")
    assert scheduled.get("rollout") == len(USERS), scheduled
    dry = wf.run("results/table2.csv", "-n")
    rollout_jobs = [
        line for line in dry.stdout.splitlines() if "episodes.json" in line and "output" in line
    ]
    assert rollout_jobs and all("results/amem/" in line for line in rollout_jobs), rollout_jobs


def test_recalled_lines_are_recorded_in_episodes_schema():
    raw = {"turn": 1, "agent_response": "a", "feedback_type": "followup", "user_text": "u"}
    from memprobe.spec.records import Turn

    assert Turn.model_validate(raw).recalled == []  # older transcripts still load
    assert Turn.model_validate({**raw, "recalled": ["m"]}).recalled == ["m"]
    assert json.loads(Turn.model_validate(raw).model_dump_json())["recalled"] == []
