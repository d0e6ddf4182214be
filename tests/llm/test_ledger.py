"""The usage ledger (memprobe/llm/ledger.py): a row is on disk when ``record`` returns."""

from __future__ import annotations

import os
import signal

from memprobe.llm.ledger import Ledger
from tests.helpers.llm import run_python, short_writes


def ledger_rows(path):
    import csv

    with open(path) as fh:
        return list(csv.DictReader(fh))


def test_a_ledger_row_is_in_the_file_when_record_returns(tmp_path):
    # Rows are not buffered in the process: a SIGKILL right after a paid call keeps its row.
    path = tmp_path / "usage.csv"
    proc = run_python(
        f"""
        import os, signal
        from memprobe.llm.ledger import Ledger
        Ledger({str(path)!r}, job="j").record(role="judge", model="m", prompt_tokens=1,
            completion_tokens=2, latency_s=0.5, cached=False, key="k1")
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    assert proc.returncode == -signal.SIGKILL
    lines = path.read_text().splitlines()
    assert lines[0].startswith("ts,job,role,model") and lines[1].split(",")[-3] == "k1"


def test_a_ledger_moved_away_under_a_job_starts_a_new_file(tmp_path):
    path = tmp_path / "usage.csv"
    led = Ledger(path, job="j")
    row = dict(role="r", model="m", prompt_tokens=0, completion_tokens=0, latency_s=0.0)
    led.record(**row, cached=False, key="a")
    os.replace(path, tmp_path / "done.csv")  # step.Job.finish renames the pending ledger
    led.record(**row, cached=True, key="b")
    assert len((tmp_path / "done.csv").read_text().splitlines()) == 2
    assert [r["key"] for r in ledger_rows(path)] == ["b"]


def test_a_row_cut_short_by_a_full_disk_is_cut_off_and_raised(tmp_path, monkeypatch):
    import pytest

    ledger = Ledger(tmp_path / "l.csv", job="j")
    row = dict(role="judge", model="m", completion_tokens=5, latency_s=0.1, cached=False)
    ledger.record(prompt_tokens=10, **row)
    short_writes(monkeypatch)  # the kernel takes a few bytes at a time: the row is finished
    ledger.record(prompt_tokens=11, **row)
    short_writes(monkeypatch, fail_after=3)  # then the disk is full mid-row
    with pytest.raises(OSError, match="ledger row was not written"):
        ledger.record(prompt_tokens=123456, **row)
    monkeypatch.undo()
    ledger.record(prompt_tokens=12, **row)
    assert [int(r["prompt_tokens"]) for r in ledger_rows(tmp_path / "l.csv")] == [10, 11, 12]
