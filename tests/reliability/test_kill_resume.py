"""Must-show 2 and --keep-going: SIGKILLed runs resume to the clean tables, paying nothing twice;
a job that cannot finish leaves every other user's results whole."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter

import pytest

from memprobe.testing.fake_endpoint import Faults, Gate
from tests.helpers.endpoint import Endpoint
from tests.helpers.reliability import (
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
from tests.helpers.workflow import SNAKEMAKE, Workflow

pytestmark = pytest.mark.workflow


def test_five_sigkills_and_resumes_give_the_clean_tables_and_pay_nothing_twice(clean_run, tmp_path):
    # Each kill comes at a point set by paid calls, not by a clock: the endpoint answers the
    # run's first `per_run` requests, then holds every later one and signals; the test waits
    # for that signal (or the run's end, a failure) and kills the whole process group. Five
    # runs pay at most 5/6 of the clean run's calls, so each one reaches its hold point.
    per_run = max(1, clean_run.calls // 6)
    ep = Endpoint()
    root = tmp_path / "killed"
    root.mkdir()
    wf = Workflow(root, reliable_config(ep.base_url))
    env = {**os.environ, KEY_ENV: SENTINEL}
    base = ["--cores", "2", "--configfile", str(wf.config_path)]
    kills = []
    gate = None
    try:
        while len(kills) < 5:
            # A killed Snakemake leaves its lock behind; unlocking is the user's first step too.
            subprocess.run([SNAKEMAKE, "--unlock", *base], cwd=root, capture_output=True)
            gate = ep.server.gate = Gate(per_run)
            proc = subprocess.Popen(
                [SNAKEMAKE, TARGET, "--rerun-incomplete", *base],
                cwd=root,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: the kill takes every job
            )
            while not gate.held.wait(0.1):
                if proc.poll() is not None:
                    pytest.fail(f"run {len(kills) + 1} ended ({proc.returncode}) before its hold")
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            gate.release.set()  # the held handlers hang up on a dead client
            cached = sum(1 for _ in (root / ".cache").rglob("*.json"))
            kills.append((gate.admitted, cached))
        ep.server.gate = None
        subprocess.run([SNAKEMAKE, "--unlock", *base], cwd=root, capture_output=True)
        wf.run(TARGET, "--rerun-incomplete", env={KEY_ENV: SENTINEL})
    finally:
        if gate is not None:
            gate.release.set()
        ep.close()
    print(f"kills (calls answered in the run, cache entries after it): {kills}")
    assert [a for a, _ in kills] == [per_run] * 5
    cached = [c for _, c in kills]
    assert cached == sorted(cached) and cached[-1] > cached[0], "the kills did not move on"

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
