"""The response cache (memprobe/llm/cache.py): cheap writes, and a torn entry is asked again."""

from __future__ import annotations

import json
import os

from memprobe.llm.cache import ResponseCache
from tests.helpers.llm import make_llm

MSGS = [{"role": "user", "content": "hi"}]


def test_cache_entries_are_written_without_fsync_and_leave_no_temp_file(tmp_path, monkeypatch):
    def no_fsync(fd):
        raise AssertionError("fsync per cache entry")

    monkeypatch.setattr(os, "fsync", no_fsync)
    cache = ResponseCache(tmp_path / "cache")
    cache.put("ab" * 32, {"content": "x"})
    assert cache.get("ab" * 32) == {"content": "x"}
    assert [p.name for p in (tmp_path / "cache").rglob("*") if p.is_file()] == ["ab" * 32 + ".json"]


def test_an_entry_torn_by_a_power_cut_is_asked_again(recorder_factory, tmp_path):
    # Without fsync, a power cut can leave a renamed entry empty or cut: it reads as a miss.
    rec = recorder_factory(["first", "again"])
    llm = make_llm(rec.base_url, tmp_path)
    assert llm.text(MSGS) == "first"
    (entry,) = (tmp_path / "cache").rglob("*.json")
    entry.write_text('{"content": "fir')
    assert make_llm(rec.base_url, tmp_path).text(MSGS) == "again"
    assert json.loads(entry.read_text())["content"] == "again"
