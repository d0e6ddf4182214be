"""The usage ledger (memprobe/llm/ledger.py): a row is on disk when ``record`` returns."""

from __future__ import annotations

import os
import signal

from memprobe.llm.ledger import Ledger
from tests.helpers.llm import run_python


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
