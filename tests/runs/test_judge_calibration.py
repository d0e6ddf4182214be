"""Judge calibration in the tiny workflow, with scripted judges
(memprobe/testing/fake_endpoint.py)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from memprobe.protocol import calibration
from tests.helpers.endpoint import Endpoint
from tests.helpers.figures import flag_band
from tests.helpers.workflow import ROOT, tiny_config

pytestmark = pytest.mark.workflow

FLAG = "judge failed calibration"
# Each table whose B cells are flagged, and the columns that are B (None: every value column).
FLAGGED = {
    "table2": ["B_dump_all_mean", "B_dump_all_std", "B_retrieve_mean", "B_retrieve_std"],
    "table3": None,
    "table4": None,
    "table13": None,
    "gap": None,
    "table2_ci": None,
}
KEYS = ("system", "mode", "category")


def scripted(tmp_path: Path, judge: dict) -> Endpoint:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"judge": judge}))
    return Endpoint(str(path))


ALWAYS_ONE = {"else": {"score": 1.0, "reason": "the same"}}


def agreeing() -> dict:
    """A judge that gives every anchor its expected score (and other requests a generated one)."""
    anchors = calibration.load_anchors(ROOT / "config" / "judge_calibration.yaml")
    return {
        "when": [
            [[a.truth, a.label], {"score": a.score, "reason": "as the rubric"}]
            for a in anchors.items
        ]
    }


def cells(results: Path, table: str) -> list[tuple[str, str, str]]:
    """(column, value, flag) for every B cell of a table that holds a number."""
    values = list(csv.DictReader(open(results / f"{table}.csv")))
    flags = list(csv.DictReader(open(results / f"{table}_flags.csv")))
    cols = FLAGGED[table] or [c for c in values[0] if c not in KEYS]
    return [(c, v[c], f[c]) for v, f in zip(values, flags, strict=True) for c in cols if v[c]]


@pytest.fixture
def run_with(tmp_path, workflow_factory):
    made = []

    def run(script: dict, **overrides):
        ep = scripted(tmp_path, script)
        made.append(ep)
        wf = workflow_factory(tiny_config(ep.base_url, **overrides))
        return wf, wf.run("tables", check=False)

    yield run
    for ep in made:
        ep.close()


def test_a_judge_that_always_says_one_flags_every_b_cell(run_with):
    wf, proc = run_with(ALWAYS_ONE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = wf.results
    s = calibration.read_summary(results / "judge_calibration.csv")
    assert s.kappa == pytest.approx(0.0) and s.bias > 0.4
    replies = list(csv.DictReader(open(results / "judge_calibration_replies.csv")))
    assert len(replies) == s.n and {r["judged"] for r in replies} == {"1.0"}
    for table in FLAGGED:
        found = cells(results, table)
        assert found, f"{table} has no B cell"
        unflagged = [(c, v) for c, v, f in found if FLAG not in f]
        assert not unflagged, (table, unflagged)
    assert "Warning: the judge failed calibration" in (results / "report_header.rst").read_text()
    # Issue 32: the figures, built on B, carry the flag too: a red band and their Description.
    for figure in ("category_b", "dump_vs_retrieve", "attribution"):
        band, described = flag_band(results / "figures" / f"{figure}.png")
        assert band > 2000 and described.startswith(FLAG), (figure, band, described)
    report = wf.run("tables", "--report", "report.html")
    html = (wf.root / "report.html").read_text()
    assert "the judge failed calibration" in html
    # The header is reStructuredText read by docutils: no error in the log, none in the page.
    assert "Undefined substitution" not in report.stdout + report.stderr, report.stderr[-2000:]
    assert "System Message" not in html and "system-message" not in html
    warnings = [line for line in proc.stderr.splitlines() if "memprobe: warning:" in line]
    assert len(warnings) == 1 and wf.target("judge_calibration.csv") in warnings[0]
    assert (results / "degenerate_labels.csv").exists()


def test_a_judge_that_agrees_with_the_anchors_flags_nothing(run_with):
    # ... and passes the onstart check of `stop`, so the run goes on.
    wf, proc = run_with(agreeing(), judge={"form": "llm", "calibration": "stop"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = wf.results
    s = calibration.read_summary(results / "judge_calibration.csv")
    assert (s.exact, s.kappa, s.bias) == (1.0, 1.0, 0.0)
    for table in FLAGGED:
        assert not [c for c, _, f in cells(results, table) if FLAG in f], table
    assert "passed calibration" in (results / "report_header.rst").read_text()
    assert "memprobe: warning:" not in proc.stderr


def test_stop_ends_the_run_after_calibration_before_any_job(run_with):
    wf, proc = run_with(ALWAYS_ONE, judge={"form": "llm", "calibration": "stop"})
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if FLAG in line]
    assert len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith("memprobe: judge failed calibration: κ 0.00, bias +0.")
    assert "no job started" in lines[0]
    replies = list(csv.DictReader(open(wf.logs / "judge_calibration_stop.csv")))
    assert {r["judged"] for r in replies} == {"1.0"}
    # Nothing started: no user, no rollout, no table, and no verdict left among the outputs.
    results = wf.results
    assert not (wf.root / "results" / "users").exists() and not (results / "users").exists()
    assert not list(results.glob("*/user_*/episodes.json"))
    assert not (results / "judge_calibration.csv").exists()
    assert not (results / "table2.csv").exists()
