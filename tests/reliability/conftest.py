"""A clean tiny run shared by the reliability tests: every other run is compared against it."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from tests.helpers.endpoint import Endpoint
from tests.helpers.reliability import (
    KEY_ENV,
    SENTINEL,
    TARGET,
    artifacts,
    assert_each_request_paid_once,
    ledger_rows,
    reliable_config,
    tables,
)
from tests.helpers.workflow import Workflow


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
    rows = ledger_rows(root)
    assert_each_request_paid_once(rows)
    calls = sum(r["cached"] == "false" for r in rows)
    auth = set(ep.server.auth_seen)
    return CleanRun(wf, tables(root), artifacts(root), seconds, calls, auth)
