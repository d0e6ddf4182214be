"""Job priorities (issue 20): the longest remaining chain first, as Snakemake's dry run shows."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

from tests.helpers.workflow import tiny_config

pytestmark = pytest.mark.workflow


def jobs(dry_run: str):
    """(rule, block) for each job of a dry run's output."""
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", dry_run):
        rule = re.match(r"(?:local)?rule (\w+):", block)
        if rule:
            yield rule.group(1), block


def test_user_jobs_then_heavier_systems_rollouts_then_scoring_then_leaves(workflow_factory):
    wf = workflow_factory(
        tiny_config("http://127.0.0.1:9/v1", systems=["nomem", "longctx_full", "amem"])
    )
    out = wf.run("tables", "-n").stdout
    prio: dict[str, set[int]] = defaultdict(set)
    for rule, block in jobs(out):
        system = re.search(r"wildcards: .*?system=(\w+)", block)
        got = re.search(r"^\s+priority: (-?\d+)", block, re.M)
        name = rule + (f"/{system.group(1)}" if rule == "rollout" else "")
        prio[name].add(int(got.group(1)) if got else 0)
    one = {name: max(values) for name, values in prio.items()}
    assert all(len(values) == 1 for values in prio.values()), prio
    # A user's chain head unlocks every rollout; A-Mem's writer calls make its rollout longest.
    assert one["persona"] > one["bank"] > one["tasks"] > one["rollout/amem"]
    assert one["rollout/amem"] > one["rollout/longctx_full"] >= one["rollout/nomem"]
    rollouts = min(v for k, v in one.items() if k.startswith("rollout/"))
    scoring = [one[r] for r in ("oracle", "probe", "slotfill", "judge", "attribution")]
    assert rollouts > max(scoring) and scoring == sorted(scoring, reverse=True)
    assert min(scoring) > one["preference"] > one.get("tables", 0)


def test_the_oracle_becomes_ready_with_the_rollouts_not_before(workflow_factory):
    # Ready alone, the oracle took the second job slot and the longctx_full rollout, the
    # longest chain, waited for it (the default run, 2026-12-05). Reading the same user files
    # as the rollouts, it is ready with them and waits behind them by priority.
    wf = workflow_factory(tiny_config("http://127.0.0.1:9/v1", systems=["nomem"]))
    out = wf.run("tables", "-n").stdout
    inputs: dict[str, set[str]] = {}
    for rule, block in jobs(out):
        files = re.search(r"^\s+input: (.*)$", block, re.M)
        if files and "user_001" in files.group(1):
            inputs[rule] = set(files.group(1).split(", "))
    users = {f for f in inputs["oracle"] if re.search(r"/(persona|bank|tasks)\.json$", f)}
    assert users and users <= inputs["rollout"], (users, inputs["rollout"])
