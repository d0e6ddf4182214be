"""What the reliability tests compare a run by: its tables, artifacts and ledger rows."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from memprobe.llm import ledger
from tests.helpers.workflow import tiny_config

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


def assert_each_request_paid_once(rows: list[dict]) -> None:
    """No request is paid for twice: not after a kill (the cache replays it), not when two
    jobs send it together (the second waits on the first's in-flight lock and replays)."""
    paid = Counter(
        r["key"] for r in rows if r["cached"] == "false" and r.get("status", "ok") == "ok"
    )
    assert paid
    again = {k: n for k, n in paid.items() if n > 1}
    assert not again, f"paid more than once: {again}"


def artifacts(root: Path) -> dict[str, bytes]:
    results = root / "results"
    return {
        str(p.relative_to(results)): p.read_bytes()
        for p in sorted(results.rglob("*.json"))
        if "usage" not in p.relative_to(results).parts
    }


def ledger_rows(root: Path) -> list[dict]:
    return ledger.read_rows(ledger.run_files(root / "results"))


def stray_temp_files(root: Path) -> list[str]:
    return [str(p) for p in (root / "results").rglob("*.tmp")]
