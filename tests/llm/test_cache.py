"""The response cache (memprobe/llm/cache.py): cheap writes, and a torn entry is asked again."""

from __future__ import annotations

import json
import os

from memprobe.llm.cache import ResponseCache
from tests.helpers.llm import make_llm, short_writes

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


def test_a_short_write_is_finished_and_a_failed_one_never_renamed_into_place(tmp_path, monkeypatch):
    cache = ResponseCache(tmp_path / "cache")
    entry = {"content": "a reply of some length " * 4, "prompt_tokens": 3}
    short_writes(monkeypatch)
    cache.put("ab" * 32, entry)
    assert cache.get("ab" * 32) == entry
    short_writes(monkeypatch, fail_after=2)  # the disk fills up mid-entry
    try:
        cache.put("cd" * 32, entry)
    except OSError as err:
        assert err.errno == 28
    else:
        raise AssertionError("a torn entry was written without an error")
    assert cache.get("cd" * 32) is None
    assert not [p for p in (tmp_path / "cache").rglob("*") if "cd" * 32 in p.name]


def test_lock_files_are_this_user_s_alone_whatever_the_umask(tmp_path):
    """Issue 42: flock needs only read access, so a 0644 lock in a 0755 folder (umask 022; 0664
    with a group's 002) let another user hold every call of the run."""
    old = os.umask(0o002)
    try:
        with ResponseCache(tmp_path).inflight("abc" + "0" * 61, wait_s=5):
            pass
    finally:
        os.umask(old)
    folder = tmp_path / f".locks-{os.getuid()}"
    assert folder.stat().st_mode & 0o777 == 0o700
    assert (folder / "abc").stat().st_mode & 0o777 == 0o600
