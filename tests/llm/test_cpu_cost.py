"""A job's CPU accounting for the benchmark (memprobe/llm/cpu_cost.py)."""

from __future__ import annotations

import json

from tests.helpers.llm import run_python


def test_a_job_writes_its_cpu_and_call_counts_when_asked(tmp_path):
    stats = tmp_path / "stats"
    proc = run_python(
        f"""
        import sys
        from memprobe.config.loading import load_config
        from memprobe.llm.client import client_for

        cfg = load_config({{"n_users": 1, "systems": ["nomem"], "llm": {{"backend": "fake",
                           "cache_dir": {str(tmp_path / "cache")!r}}}}})
        llm = client_for("assistant", cfg)
        llm.text([{{"role": "user", "content": "x"}}])
        llm.text([{{"role": "user", "content": "x"}}])
        """,
        env={"MEMPROBE_JOB_STATS": str(stats)},
    )
    assert proc.returncode == 0, proc.stderr
    (f,) = stats.glob("*.json")
    got = json.loads(f.read_text())
    assert got["paid"] == 1 and got["replayed"] == 1 and got["client"] == 1
    assert 0 < got["startup_cpu_s"] <= got["cpu_s"] and got["paid_cpu_s"] > 0
