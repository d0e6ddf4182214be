"""Must-show 1 and 4: a 20%-faulted endpoint gives the clean tables; the API key leaks nowhere.

Why the tables can be equal byte for byte: transport faults (429, 500, timeout, cut-off body,
non-JSON body) and delivered-but-unusable replies (empty, not JSON, off-schema) are retried with
the *identical* request and never cached; only a usable reply is cached and used. The fake
endpoint's normal reply depends on the request alone, so every call converges to the reply the
clean run got, and every later request (and cache key) is the same as in the clean run.
"""

from __future__ import annotations

from collections import Counter

import pytest

from memprobe.testing.fake_endpoint import FAULT_KINDS, Faults
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
from tests.helpers.workflow import Workflow

pytestmark = pytest.mark.workflow


def test_twenty_percent_faults_of_every_kind_give_the_clean_tables(clean_run, tmp_path):
    faults = Faults.parse("all=0.2,seed=11,hold_s=4,retry_after=1")
    ep = Endpoint()
    ep.server.faults = faults
    try:
        (tmp_path / "faulty").mkdir()
        wf = Workflow(tmp_path / "faulty", reliable_config(ep.base_url))
        wf.run(TARGET, env={KEY_ENV: SENTINEL})
    finally:
        ep.close()

    share = sum(faults.injected.values()) / faults.requests
    print(
        f"faulted {sum(faults.injected.values())}/{faults.requests} = {share:.1%}: "
        f"{dict(faults.injected)}"
    )
    assert set(faults.injected) == set(FAULT_KINDS), faults.injected
    assert 0.12 < share < 0.28
    assert tables(wf.root) == clean_run.tables
    assert artifacts(wf.root) == clean_run.artifacts
    assert not stray_temp_files(wf.root)

    rows = ledger_rows(wf.root)
    paid = Counter(r["key"] for r in rows if r["cached"] == "false" and r["status"] == "ok")
    assert len(paid) == clean_run.calls
    assert_each_request_paid_once(rows)
    assert any(r["status"] == "invalid" for r in rows)  # thrown-away replies are on the bill


def test_sentinel_api_key_is_nowhere_in_results_logs_metadata_or_cache(clean_run):
    root = clean_run.wf.root
    searched = 0
    for part in ("results", "logs", ".snakemake", ".cache"):
        for path in (root / part).rglob("*"):
            if path.is_file():
                searched += 1
                assert SENTINEL.encode() not in path.read_bytes(), path
                assert SENTINEL[3:15].encode() not in path.read_bytes(), path
    assert searched > 50
    # The run did send the key (read from the env var named by llm.api_key_env).
    assert clean_run.auth_seen == {f"Bearer {SENTINEL}"}
