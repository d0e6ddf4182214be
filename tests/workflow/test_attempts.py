"""A job's attempt counter (memprobe/workflow/attempts.py): per job, seed and ledger (the
job's own folder: its run's or the shared users'), kept under the cache directory, and a torn
record reads as the first attempt."""

from __future__ import annotations

import pytest

from memprobe.workflow import attempts

LEDGER = "results/a/usage/bank/user_001.csv"


def test_attempt_counter_is_per_job_seed_and_ledger(tmp_path):
    cache = str(tmp_path)
    assert attempts.current(cache, "bank/user_001", 0, LEDGER) == 0
    assert attempts.bump(cache, "bank/user_001", 0, LEDGER) == 1
    assert attempts.bump(cache, "bank/user_001", 0, LEDGER) == 2
    assert attempts.current(cache, "bank/user_001", 0, LEDGER) == 2
    assert attempts.current(cache, "bank/user_001", 1, LEDGER) == 0
    assert attempts.current(cache, "bank/user_002", 0, LEDGER) == 0
    # the same job of another run (its ledger in that run's folder) keeps its own count
    assert attempts.current(cache, "bank/user_001", 0, "results/b/usage/bank/user_001.csv") == 0


def test_the_counter_travels_with_the_cache_directory(tmp_path):
    attempts.bump(str(tmp_path / "a"), "bank/user_001", 0, LEDGER)
    assert [p.parent.name for p in (tmp_path / "a").rglob("*.json")] == ["attempts"]
    assert attempts.current(str(tmp_path / "b"), "bank/user_001", 0, LEDGER) == 0


@pytest.mark.parametrize("text", ["", "{torn", '{"job": "x"}', '{"attempt": -3}', "[]"])
def test_a_torn_or_foreign_record_is_the_first_attempt_and_bumps_to_one(tmp_path, text):
    cache = str(tmp_path)
    attempts.bump(cache, "bank/user_001", 0, LEDGER)
    (record,) = (tmp_path / "attempts").glob("*.json")
    record.write_text(text, encoding="utf-8")
    assert attempts.current(cache, "bank/user_001", 0, LEDGER) == 0
    assert attempts.bump(cache, "bank/user_001", 0, LEDGER) == 1
