"""users.source: release at the paper's size: 31 bank entries and 31 tasks, in bank order."""

from __future__ import annotations

import json

import pytest

from memprobe import CATEGORIES
from memprobe.protocol.records import RecordError
from memprobe.protocol.taxonomy import load_pool
from memprobe.release import importer as release

COUNTS = dict(zip(CATEGORIES, (7, 7, 7, 5, 5), strict=True))


def write_release_user(root, user="user_007"):
    """One user in the release's bank-file and task-file layout (docs/release-format.md §2)."""
    pool = load_pool()
    bank = {
        cat: [
            {"dimension": name, "short": f"{name} of {user}", "explanation": f"Why {name}."}
            for name in pool.names(cat)[:n]
        ]
        for cat, n in COUNTS.items()
    }
    bank_file = root / "Deeppersona" / "data" / "user_memory_banks_pooled_final.json"
    bank_file.parent.mkdir(parents=True)
    profile = {
        "age_info": {"age": 41, "age_group": "adult"},
        "gender": "female",
        "location": {"country": "United States", "city": "Dayton"},
        "career_info": {"status": "nurse"},
        "personal_values": {"values_orientation": "positive"},
        "life_attitude": {"attitude": "steady", "attitude_details": "", "coping_mechanism": ""},
        "personal_story": {"personal_story": "Story 1: moved west."},
        "interests": {"interests": ["running"]},
    }
    bank_file.write_text(json.dumps({
        "generated_at": "2026-04-27 18:29:52", "source": "pooled", "num_users": 1,
        "users": [{"user_id": user, "base_profile": profile, "memory_bank": bank}],
    }))  # fmt: skip
    order = [(c, e) for c in CATEGORIES for e in bank[c]]
    tasks = [
        {"task": f"Help me with chore {i}.", "rationale": "r", "target_category": c,
         "target_dimension": e["dimension"], "target_short": e["short"],
         "pipeline_note": "edited_after_fishing_flag" if i % 3 == 0 else ""}
        for i, (c, e) in enumerate(order, 1)
    ]  # fmt: skip
    task_file = root / "benchmark_data" / "CustomTasksPooledFinal" / f"{user}.json"
    task_file.parent.mkdir(parents=True)
    task_file.write_text(json.dumps({"user_id": user, "generated_at": "x", "n_tasks": 31,
                                     "tasks": tasks}))  # fmt: skip
    return bank_file, task_file, [e["dimension"] for _, e in order]


def test_31_entries_load_in_bank_order(tmp_path):
    bank_file, task_file, order = write_release_user(tmp_path)
    bank = release.bank(bank_file, "user_007", COUNTS)
    assert len(bank.entries) == 31
    assert [e.dimension for e in bank.entries] == order
    assert [e.category for e in bank.entries] == [c for c in CATEGORIES for _ in range(COUNTS[c])]
    tasks = release.tasks(task_file, "user_007", bank)
    assert [t.index for t in tasks.tasks] == list(range(1, 32))
    # Episode i targets bank entry i.
    assert [t.target_dimension for t in tasks.tasks] == order
    assert sum(bool(t.revisions) for t in tasks.tasks) == 10


def test_tasks_out_of_bank_order_are_rejected(tmp_path):
    bank_file, task_file, _ = write_release_user(tmp_path)
    raw = json.loads(task_file.read_text())
    raw["tasks"][0], raw["tasks"][1] = raw["tasks"][1], raw["tasks"][0]
    task_file.write_text(json.dumps(raw))
    bank = release.bank(bank_file, "user_007", COUNTS)
    with pytest.raises(RecordError, match=r"tasks\[0\]\.target_dimension"):
        release.tasks(task_file, "user_007", bank)
