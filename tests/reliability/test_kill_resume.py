"""Must-show 2 and --keep-going: SIGKILLed runs resume to the clean tables, paying nothing twice;
a job that cannot finish leaves every other user's results whole."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections import Counter

import pytest

from memprobe.testing.fake_endpoint import Faults
from tests.conftest import SNAKEMAKE, Endpoint, Workflow
from tests.reliability.conftest import (
    KEY_ENV,
    SENTINEL,
    TARGET,
    artifacts,
    assert_each_request_paid_once,
    ledger_rows,
    reliable_config,
    stray_temp_files,
    tables,
)

pytestmark = pytest.mark.workflow


def test_five_sigkills_and_resumes_give_the_clean_tables_and_pay_nothing_twice(clean_run, tmp_path):
    ep = Endpoint()
    root = tmp_path / "killed"
    root.mkdir()
    wf = Workflow(root, reliable_config(ep.base_url))
    env = {**os.environ, KEY_ENV: SENTINEL}
    base = ["--cores", "2", "--configfile", str(wf.config_path)]
    rng = random.Random(8)
    kills = []
    try:
        while len(kills) < 5:
            # A killed Snakemake leaves its lock behind; unlocking is the user's first step too.
            subprocess.run([SNAKEMAKE, "--unlock", *base], cwd=root, capture_output=True)
            proc = subprocess.Popen(
                [SNAKEMAKE, TARGET, "--rerun-incomplete", *base],
                cwd=root,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: the kill takes every job
            )
            at = rng.uniform(4.0, max(8.0, clean_run.seconds / 6))
            try:
                proc.wait(timeout=at)
                pytest.fail(f"the run finished before kill {len(kills) + 1} at {at:.1f}s")
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            cached = sum(1 for _ in (root / ".cache").rglob("*.json"))
            kills.append((round(at, 1), cached))
            time.sleep(0.2)
        subprocess.run([SNAKEMAKE, "--unlock", *base], cwd=root, capture_output=True)
        wf.run(TARGET, "--rerun-incomplete", env={KEY_ENV: SENTINEL})
    finally:
        ep.close()
    print(f"kills (seconds into each run, cache entries after it): {kills}")
    assert len({c for _, c in kills}) > 1, "every kill hit the same point"

    assert tables(root) == clean_run.tables
    assert artifacts(root) == clean_run.artifacts
    assert not stray_temp_files(root)
    rows = ledger_rows(root)
    assert_each_request_paid_once(rows)
    paid = Counter(r["key"] for r in rows if r["cached"] == "false")
    assert len(paid) == clean_run.calls


def test_keep_going_a_user_whose_calls_all_fail_leaves_the_others_whole(clean_run, tmp_path):
    ep = Endpoint()
    root = tmp_path / "poisoned"
    root.mkdir()
    wf = Workflow(
        root,
        reliable_config(ep.base_url)
        | {"llm": {**reliable_config(ep.base_url)["llm"], "max_attempts": 3}},
    )
    try:
        wf.run("results/users/user_002/persona.json")
        name = json.loads((root / "results/users/user_002/persona.json").read_text())["name"]
        ep.server.faults = Faults(poison=name)  # every request about user_002 now gets a 500
        proc = wf.run(TARGET, "--keep-going", check=False)
    finally:
        ep.close()
    assert proc.returncode != 0
    assert not (root / TARGET).exists()
    got = artifacts(root)
    user1 = {k: v for k, v in clean_run.artifacts.items() if "user_001" in k}
    assert user1 and {k: got.get(k) for k in user1} == user1
    assert [k for k in got if "user_002" in k] == ["users/user_002/persona.json"]
    assert not stray_temp_files(root)
    errors = [
        line
        for f in (root / "logs").rglob("*.log")
        for line in f.read_text().splitlines()
        if "memprobe:" in line and "user_002" in line
    ]
    assert errors and "role generator (user user_002, bank" in errors[0], errors
    assert "3 attempt(s)" in errors[0]
