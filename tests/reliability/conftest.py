"""A clean tiny run shared by the reliability tests: every other run is compared against it."""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

from tests.conftest import Endpoint, Workflow, tiny_config

SENTINEL = "sk-SENTINEL-7f3a9c1e5b2d4680"
KEY_ENV = "MEMPROBE_TEST_KEY"  # llm.api_key_env of tests/configs/tiny.yaml
TARGET = "results/table2.csv"


def reliable_config(base_url: str) -> dict:
    """The tiny config with a retry budget sized for a 20% fault rate (see test_faults.py)."""
    cfg = tiny_config(base_url)
    cfg["llm"] |= {
        "max_attempts": 10,
        "resample_invalid": 8,
        "backoff_s": 0.05,
        "timeout_s": 3.0,
    }
    return cfg


def tables(root: Path) -> dict[str, bytes]:
    """Every result table of a run. The ledger and table5 (built from it) are left out: they
    are the bill, which records timings, replays of killed jobs and thrown-away replies."""
    results = root / "results"
    return {
        str(p.relative_to(results)): p.read_bytes()
        for p in sorted(results.rglob("*.csv"))
        if "usage" not in p.relative_to(results).parts and p.name != "table5.csv"
    }


def assert_no_finished_call_paid_again(rows: list[dict]) -> None:
    """Each request is paid once, unless two jobs sent it while both were in flight (every
    system's identical first turn can race): a repeat payment never starts after an earlier
    payment of the same request had finished and been cached."""
    paid: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        if r["cached"] == "false" and r.get("status", "ok") == "ok":
            end = float(r["ts"])
            paid.setdefault(r["key"], []).append((end - float(r["latency_s"]), end))
    assert paid
    for key, spans in paid.items():
        spans.sort()
        for (_, first_end), (second_start, _) in pairwise(spans):
            assert second_start <= first_end + 0.05, f"{key} paid again after it finished"


def artifacts(root: Path) -> dict[str, bytes]:
    results = root / "results"
    return {
        str(p.relative_to(results)): p.read_bytes()
        for p in sorted(results.rglob("*.json"))
        if "usage" not in p.relative_to(results).parts
    }


def ledger_rows(root: Path) -> list[dict]:
    rows = []
    for f in sorted((root / "results" / "usage").rglob("*.csv")):
        with open(f, newline="") as fh:
            rows += list(csv.DictReader(fh))
    return rows


def stray_temp_files(root: Path) -> list[str]:
    return [str(p) for p in (root / "results").rglob("*.tmp")]


@dataclass
class CleanRun:
    wf: Workflow
    tables: dict[str, bytes]
    artifacts: dict[str, bytes]
    seconds: float
    calls: int
    auth_seen: set[str]


@pytest.fixture(scope="session")
def clean_run(tmp_path_factory) -> CleanRun:
    """The tiny workflow on a fault-free endpoint, with a sentinel API key in the environment."""
    ep = Endpoint()
    try:
        root = tmp_path_factory.mktemp("clean")
        wf = Workflow(root, reliable_config(ep.base_url))
        start = time.monotonic()
        wf.run(TARGET, env={KEY_ENV: SENTINEL})
        seconds = time.monotonic() - start
    finally:
        ep.close()
    assert tables(root), "the clean run wrote no table"
    calls = sum(r["cached"] == "false" for r in ledger_rows(root))
    auth = set(ep.server.auth_seen)
    return CleanRun(wf, tables(root), artifacts(root), seconds, calls, auth)
