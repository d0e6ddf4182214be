"""The progress line's figures are the ledgers' own, read as they grow."""

from __future__ import annotations

import io
import re
from pathlib import Path

from memprobe.config.loading import load_config
from memprobe.config.schema import Price
from memprobe.llm.ledger import Ledger, read_rows, run_files
from memprobe.report import progress
from tests.helpers.workflow import tiny_config

PRICES = {"mini": Price(input=0.25, output=2.0), "big": Price(input=3.0, output=15.0)}


def write_rows(results, job: str, rows: list[tuple[str, int, int, bool, str]]) -> None:
    led = Ledger(results / "usage" / f"{job}.csv", job=job)
    for model, p, c, cached, status in rows:
        led.record(
            role="assistant",
            model=model,
            prompt_tokens=p,
            completion_tokens=c,
            latency_s=0.1,
            cached=cached,
            status=status,
        )
    led.close()


def sums_of(results) -> tuple[int, int, int, int, float]:
    """The same figures, straight from the ledgers' rows."""
    rows = read_rows(run_files(results))
    paid = [r for r in rows if r["cached"] == "false"]
    p = sum(int(r["prompt_tokens"]) for r in paid)
    c = sum(int(r["completion_tokens"]) for r in paid)
    usd = sum(
        int(r["prompt_tokens"]) * PRICES[r["model"]].input / 1e6
        + int(r["completion_tokens"]) * PRICES[r["model"]].output / 1e6
        for r in paid
    )
    return len(paid), len(rows) - len(paid), p, c, usd


def test_the_tally_matches_the_ledgers_as_they_grow(tmp_path):
    tally = progress.LedgerTally(tmp_path, PRICES)
    write_rows(tmp_path, "a", [("mini", 1200, 80, False, "ok"), ("mini", 900, 0, False, "empty")])
    write_rows(tmp_path, "sub/b", [("big", 500, 40, False, "ok"), ("mini", 1200, 80, True, "ok")])
    t = tally.poll()
    assert (t.calls, t.replayed, t.prompt_tokens, t.completion_tokens) == sums_of(tmp_path)[:4]
    assert t.usd == sum_usd(tmp_path)
    # More rows in one ledger, a new one: only the new bytes are read, the sums still agree.
    write_rows(tmp_path, "a", [("big", 3000, 300, False, "invalid")])
    write_rows(tmp_path, "c", [("mini", 10, 5, False, "ok")])
    t = tally.poll()
    assert (t.calls, t.replayed, t.prompt_tokens, t.completion_tokens) == sums_of(tmp_path)[:4]
    assert abs(t.usd - sum_usd(tmp_path)) < 1e-12
    assert t.calls == 5 and t.replayed == 1 and not t.unpriced


def sum_usd(results) -> float:
    return sums_of(results)[4]


def test_a_row_being_written_waits_for_the_next_poll(tmp_path):
    write_rows(tmp_path, "a", [("mini", 100, 10, False, "ok")])
    path = tmp_path / "usage" / "a.csv"
    with open(path, "a") as fh:
        fh.write("1.0,a,assistant,mini,7")  # half a row
    tally = progress.LedgerTally(tmp_path, PRICES)
    assert tally.poll().calls == 1
    with open(path, "a") as fh:
        fh.write("00,20,0.1,false,0,k,ok,stop\n")
    t = tally.poll()
    assert (t.calls, t.prompt_tokens) == (2, 800)


def test_a_running_jobs_calls_count_once_before_and_after_it_ends(tmp_path):
    """A running job's calls are in its `.partial` ledger; when it ends that file becomes its
    `.csv`, and the tally counts the calls once, not twice and not zero times."""
    write_rows(tmp_path, "done", [("mini", 100, 10, False, "ok")])
    write_rows(tmp_path, "running", [("mini", 100, 10, False, "ok")] * 2)
    final = tmp_path / "usage" / "running.csv"
    partial = final.with_name("running.csv.partial")
    final.rename(partial)
    tally = progress.LedgerTally(tmp_path, PRICES)
    assert tally.poll().calls == 3
    partial.rename(final)  # the job succeeded
    assert tally.poll().calls == 3


def test_the_line_shows_the_ledgers_figures_and_the_estimate(tmp_path):
    write_rows(tmp_path, "a", [("mini", 1_500_000, 250_000, False, "ok")] * 2)
    write_rows(tmp_path, "b", [("other", 100, 10, False, "ok")])
    t = progress.LedgerTally(tmp_path, PRICES).poll()
    est = progress.Prediction(seconds=3600, calls=12)
    text = progress.line(10, 40, t, 600, est)
    assert text.startswith("memprobe progress: 10/40 jobs, 3 calls paid (0 replayed), ")
    assert "3.50M tokens (3.00M in, 0.50M out)" in text
    assert "1.75 USD (no price for other)" in text  # 3M x 0.25 + 0.5M x 2.0
    assert "0:10:00 elapsed" in text
    # 3 of the 12 calls in 10 minutes: 9 more take 30 minutes at this rate.
    assert "0:30:00 left at the current rate" in text
    assert "estimate 1:00:00 and 12 calls in all" in text
    final = progress.line(40, 40, t, 600, est, final=True)
    assert final.startswith("memprobe summary: 40/40 jobs") and "left" not in final


def test_the_reporter_prints_at_its_interval_then_the_summary(tmp_path):
    cfg = load_config(tiny_config("http://127.0.0.1:9/v1", results_dir=str(tmp_path)))
    cfg.progress.interval_s = 0.05
    write_rows(Path(cfg.run_dir), "a", [("mini", 100, 10, False, "ok")])
    write_rows(tmp_path / "elsewhere", "b", [("mini", 100, 10, False, "ok")])  # another run's
    out = io.StringIO()
    rep = progress.Reporter(cfg, lambda: (1, 4), None, out).start()
    deadline = 200
    while out.getvalue().count("memprobe progress") < 2 and deadline:
        deadline -= 1
        rep._stop.wait(0.05)
    summary = rep.stop()
    lines = out.getvalue().splitlines()
    assert sum(x.startswith("memprobe progress: 1/4 jobs, 1 calls paid") for x in lines) >= 2
    assert lines[-1] == summary and re.match(r"memprobe summary: 1/4 jobs, 1 calls paid", summary)


def test_the_estimate_stands_beside_a_run_only_when_it_goes_to_the_tables(tmp_path):
    cfg = load_config(tiny_config("http://127.0.0.1:9/v1", results_dir=str(tmp_path)))
    whole = progress.predict(cfg, 2, rules={"persona", "rollout", "tables", "all"})
    assert whole is not None and whole.calls > 0 and whole.seconds > 0
    # The users' tasks.json alone: the whole run's hours and calls would be read as this run's.
    assert progress.predict(cfg, 2, rules={"persona", "bank", "tasks"}) is None


def test_a_malformed_ledger_row_is_skipped_not_raised(tmp_path):
    """Issue 42: one row a spreadsheet or a torn write left broken (a count that is not a
    number, too few columns) must not stop the progress line, nor the run's end with it."""
    write_rows(tmp_path, "a", [("mini", 1200, 80, False, "ok")])
    ledger_file = tmp_path / "usage" / "a.csv"
    with ledger_file.open("a", encoding="utf-8") as fh:
        fh.write("2026-01-01T00:00:00,a,assistant,mini,lots,80,0.1,false,0,k,ok,stop\n")  # no count
        fh.write("a,assistant\n")  # cut short
        fh.write("\0\0\0\n")  # a torn write's zeros
    with ledger_file.open("ab") as fh:
        fh.write(b"\xff\xfe,not utf-8\n")
    write_rows(tmp_path, "a", [("mini", 10, 5, False, "ok")])
    t = progress.LedgerTally(tmp_path, PRICES).poll()
    assert (t.calls, t.prompt_tokens, t.completion_tokens) == (2, 1210, 85)
