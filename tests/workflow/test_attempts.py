"""A job's attempt counter (memprobe/workflow/attempts.py): per job, seed and results
directory, kept under the cache directory, and a torn record reads as the first attempt."""

from __future__ import annotations

import pytest

from memprobe.workflow import attempts


def test_attempt_counter_is_per_job_seed_and_results_dir(tmp_path):
    cache = str(tmp_path)
    assert attempts.current(cache, "bank/user_001", 0, "results") == 0
    assert attempts.bump(cache, "bank/user_001", 0, "results") == 1
    assert attempts.bump(cache, "bank/user_001", 0, "results") == 2
    assert attempts.current(cache, "bank/user_001", 0, "results") == 2
    assert attempts.current(cache, "bank/user_001", 1, "results") == 0
    assert attempts.current(cache, "bank/user_002", 0, "results") == 0
    assert attempts.current(cache, "bank/user_001", 0, "elsewhere") == 0


def test_the_counter_travels_with_the_cache_directory(tmp_path):
    attempts.bump(str(tmp_path / "a"), "bank/user_001", 0, "results")
    assert [p.parent.name for p in (tmp_path / "a").rglob("*.json")] == ["attempts"]
    assert attempts.current(str(tmp_path / "b"), "bank/user_001", 0, "results") == 0


@pytest.mark.parametrize("text", ["", "{torn", '{"job": "x"}', '{"attempt": -3}', "[]"])
def test_a_torn_or_foreign_record_is_the_first_attempt_and_bumps_to_one(tmp_path, text):
    cache = str(tmp_path)
    attempts.bump(cache, "bank/user_001", 0, "results")
    (record,) = (tmp_path / "attempts").glob("*.json")
    record.write_text(text, encoding="utf-8")
    assert attempts.current(cache, "bank/user_001", 0, "results") == 0
    assert attempts.bump(cache, "bank/user_001", 0, "results") == 1
