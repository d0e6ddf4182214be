"""The judge forms in real Snakemake runs: the offline default's judge, the offline judge
calibrated against the paper's judge on the release's pairs, and an LLM judge with the offline
judge as a second opinion. No run prints an HTTP request line on the terminal."""

from __future__ import annotations

import csv
import json

import pytest
import yaml

from memprobe.llm import ledger
from memprobe.protocol import calibration
from tests.helpers.workflow import ROOT, tiny_config

pytestmark = [pytest.mark.workflow, pytest.mark.torch]

RELEASE = str(ROOT / "tests" / "fixtures" / "release")
JUDGE = "results/longctx_full/user_001/dump_all/judge.json"
FLAG = "judge failed calibration"


def test_the_offline_defaults_judge_passes_calibration_and_flags_nothing(
    endpoint, workflow_factory
):
    """config/config.yaml's judge settings, on the tiny run: a pass, no flag, a quiet wire."""
    default = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["judge"]
    wf = workflow_factory(tiny_config(endpoint.base_url, judge=default))
    proc = wf.run("results/table2.csv")
    results = wf.root / "results"
    s = calibration.read_summary(results / "judge_calibration.csv")
    assert calibration.verdict(s, 0.6, 0.15) is None, s
    flags = sorted(results.glob("*_flags.csv"))
    assert len(flags) >= 5 and not [p.name for p in flags if FLAG in p.read_text()]
    assert FLAG not in (results / "report_header.rst").read_text()
    assert "HTTP Request" not in proc.stdout + proc.stderr
    assert "memprobe: warning" not in proc.stderr
    # the run's last lines: the share of slot-only labels
    assert any("slot-fill labels" in line for line in proc.stderr.splitlines()[-5:])


def test_the_offline_judge_calibrates_on_the_releases_pairs(endpoint, workflow_factory):
    release = {"source": "release", "n": 25, "users": "1-3"}
    cfg = tiny_config(endpoint.base_url, judge={"form": "scorer", "calibration": release})
    wf = workflow_factory(cfg | {"release_dir": RELEASE})
    proc = wf.run("results/judge_calibration.csv", JUDGE)
    terminal = proc.stdout + proc.stderr
    assert "HTTP Request" not in terminal
    logs = "".join(p.read_text() for p in (wf.root / "logs").rglob("*.log"))
    assert "HTTP Request: POST" in logs  # the slot-fill's calls, in their jobs' logs

    results = wf.root / "results"
    rows = list(csv.DictReader(open(results / "judge_calibration_replies.csv")))
    assert len(rows) == 25 and {r["kind"] for r in rows} == {"recorded"}
    assert all(r["user"] in ("user_001", "user_002", "user_003") and r["run"] for r in rows)
    s = calibration.read_summary(results / "judge_calibration.csv")
    again = calibration.agreement(
        [float(r["expected"]) for r in rows], [float(r["judged"]) for r in rows]
    )
    assert (s.n, s.kappa, s.bias) == (25, round(again.kappa, 4), round(again.bias, 4))
    # The offline judge wrote the judge record: the LLM judge's shape, no judge call paid.
    judged = json.loads((wf.root / JUDGE).read_text())
    assert all(
        d["judge_reason"].startswith(("offline judge:", "label is")) for d in judged["details"]
    )
    paid = ledger.read_rows(ledger.run_files(results))
    assert paid and not [r for r in paid if r["role"] == "judge"]


def test_an_llm_judge_with_the_offline_judge_as_a_second_opinion(endpoint, workflow_factory):
    wf = workflow_factory(
        tiny_config(endpoint.base_url, judge={"form": "llm", "cross_check": True})
    )
    proc = wf.run("results/table2.csv")
    assert "HTTP Request" not in proc.stdout + proc.stderr
    results = wf.root / "results"
    judged = json.loads((wf.root / JUDGE).read_text())
    assert all(d["second_opinion"] in (0.0, 0.25, 0.5, 0.75, 1.0) for d in judged["details"])
    rows = list(csv.DictReader(open(results / "judge_cross_check.csv")))
    assert {r["cell"] for r in rows} >= {"B", "skill"}
    flagged = [r for r in rows if r["flagged"] == "True"]
    table3_flags = (results / "table3_flags.csv").read_text()
    assert ("judge cross-check" in table3_flags) == any(r["cell"] != "B" for r in flagged)
    # the run's last lines: the slot-only share and the cross-check
    assert "slot-fill labels" in proc.stderr and "judge cross-check:" in proc.stderr
