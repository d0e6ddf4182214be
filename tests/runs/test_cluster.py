"""Cluster execution: profiles, GPU-tagged memt jobs, the global llm_slots cap, paper-scale DAG.

The SLURM run uses the real snakemake-executor-plugin-slurm against the fake SLURM tools of
``tests/helpers/fake_slurm.py`` (sbatch runs each job's command locally and logs start/end times).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from memprobe.llm import rate_limit
from memprobe.registry import systems as registry
from memprobe.testing.memt_standin import StandIn
from memprobe.workflow import shell_job
from tests.helpers.fake_slurm import _opt
from tests.helpers.workflow import ROOT, SNAKEMAKE, tiny_config

SLURM_TOOLS = (
    "sbatch",
    "squeue",
    "sacct",
    "scancel",
    "sacctmgr",
    "sshare",
    "sinfo",
    "srun",
    "scontrol",
)
# Rules whose jobs call an LLM: each takes llm_slots=1 (probe only for a GPU system: memt).
LLM_RULES = {
    "persona",
    "bank",
    "tasks",
    "oracle",
    "rollout",
    "preference",
    "slotfill",
    "judge",
    "attribution",
}


def test_profiles_request_gpus_only_through_the_rules():
    slurm = yaml.safe_load((ROOT / "profiles/slurm/profile.yaml").read_text())
    assert slurm["executor"] == "slurm"
    assert any(r.startswith("llm_slots=") for r in slurm["resources"])
    defaults = slurm["default-resources"]
    assert {"slurm_partition", "slurm_account", "runtime", "mem_mb"} <= set(defaults)
    # A gpu/gpu_model/gres set in the profile would reach every job of a rule.
    for scope in [defaults, *slurm.get("set-resources", {}).values()]:
        assert not {"gpu", "gpu_model", "gres"} & set(scope), scope
    k8s = yaml.safe_load((ROOT / "profiles/kubernetes/profile.yaml").read_text())
    assert k8s["executor"] == "kubernetes"
    assert k8s["default-resources"]["gpu_manufacturer"] == "nvidia"
    assert "gpu" not in k8s["default-resources"]
    assert registry.spec("memt").resources.gpus and not any(
        registry.spec(s).resources.gpus for s in registry.system_names() if s != "memt"
    )


def fake_slurm_path(tmp_path: Path) -> Path:
    """A bin dir whose SLURM tools all run tests/helpers/fake_slurm.py under this interpreter."""
    bindir = tmp_path / "fake-slurm-bin"
    bindir.mkdir()
    script = ROOT / "tests" / "helpers" / "fake_slurm.py"
    for tool in SLURM_TOOLS:
        exe = bindir / tool
        exe.write_text(
            f'#!/bin/sh\nFAKE_SLURM_TOOL={tool} exec "{sys.executable}" "{script}" "$@"\n'
        )
        exe.chmod(0o755)
    return bindir


def rule_of(comment: str) -> str:
    match = re.match(r"rule_(.+?)(?:_wildcards_(.*))?$", comment)
    assert match, comment
    return match.group(1)


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    cur = best = 0
    for _, step in events:  # an end at the same instant as a start is counted first
        cur += step
        best = max(best, cur)
    return best


@pytest.mark.workflow
def test_slurm_submits_gpu_flags_for_memt_only_and_caps_llm_jobs(
    endpoint, workflow_factory, tmp_path
):
    standin = StandIn()
    try:
        raw = tiny_config(endpoint.base_url, systems=["nomem", "memt"], n_users=1)
        raw.setdefault("system_settings", {})["memt"] = {
            "endpoint": standin.base_url,
            "gpu_model": "a100",
            "cpus_per_gpu": 4,
        }
        wf = workflow_factory(raw)
        state = tmp_path / "slurm-state"
        env = {
            **os.environ,
            "PATH": f"{fake_slurm_path(tmp_path)}{os.pathsep}{os.environ['PATH']}",
            "FAKE_SLURM_DIR": str(state),
            "HF_HUB_OFFLINE": "1",
        }
        cap = 2
        cmd = [
            SNAKEMAKE,
            "tables",
            "--executor",
            "slurm",
            "--workflow-profile",
            "profiles/slurm",
            "--configfile",
            str(wf.config_path),
            "--jobs",
            "8",
            "--resources",
            f"llm_slots={cap}",
            "--slurm-init-seconds-before-status-checks",
            "1",
            "--retries",
            "0",
            "--latency-wait",
            "5",
        ]
        proc = subprocess.run(
            cmd, cwd=wf.root, env=env, capture_output=True, text=True, timeout=1500
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
    finally:
        standin.close()

    subs = [json.loads(line) for line in (state / "sbatch.jsonl").read_text().splitlines()]
    jobs = {int(p.stem): json.loads(p.read_text()) for p in (state / "jobs").glob("*.json")}
    assert subs and len(jobs) == len(subs)
    gpu_jobs, other_jobs = [], []
    for sub in subs:
        # The sbatch options only: the --wrap'd job command names files and tmp dirs.
        line = " ".join(a for a in sub["argv"] if not a.startswith("--wrap"))
        rule = rule_of(jobs[sub["id"]]["comment"])
        is_memt_gpu_job = rule in ("rollout", "probe") and "memt" in jobs[sub["id"]]["comment"]
        (gpu_jobs if is_memt_gpu_job else other_jobs).append((rule, line))
    # Every memt rollout/probe job asks for the GPU model from the config; no other job asks
    # for any GPU.
    assert sorted(r for r, _ in gpu_jobs) == ["probe", "rollout"]
    for _, line in gpu_jobs:
        assert "--gpus=a100:1" in line and "--cpus-per-gpu=4" in line, line
    # The profile's site values and the rules' sizes, field by field on every submission
    # (profiles/slurm/profile.yaml: partition cpu, account memprobe, 120 min, 4000 MB; memt's
    # rollout and probe ask for 720 min and 16000 MB in rules/common.smk).
    for sub in subs:
        argv = sub["argv"]
        big = (
            rule_of(jobs[sub["id"]]["comment"]) in ("rollout", "probe")
            and "memt" in (jobs[sub["id"]]["comment"])
        )
        fields = [_opt(argv, *flag) for flag in (("-p", "--partition"), ("-A", "--account"))]
        fields += [_opt(argv, "-t", "--time"), _opt(argv, "--mem")]
        assert fields == ["cpu", "memprobe", *(["720", "16000"] if big else ["120", "4000"])], (
            jobs[sub["id"]]["comment"],
            argv,
        )
    for rule, line in other_jobs:
        flags = [a for a in line.split() if a.startswith("-")]
        assert not [f for f in flags if "gpu" in f or f.startswith("--gres")], (rule, line)
    assert "tables" not in {r for r, _ in other_jobs}  # a localrule: never submitted
    assert (wf.results / "table2.csv").exists()

    # Never more LLM jobs at once than llm_slots allows.
    llm = [
        (j["start"], j["end"])
        for j in jobs.values()
        if rule_of(j["comment"]) in LLM_RULES
        or (rule_of(j["comment"]) == "probe" and "memt" in j["comment"])
    ]
    assert len(llm) >= 10
    observed = max_overlap(llm)
    print(f"\nsubmissions={len(subs)} llm_jobs={len(llm)} max_concurrent_llm={observed} cap={cap}")
    assert 1 <= observed <= cap
    # Each node's limiter takes 1/llm_slots of llm.rate_limit, in node-local files: the job
    # steps' configs say so (Snakemake's own was written before it knew the executor).
    limits = [
        json.loads(p.read_text())["llm"].get("rate_limit")
        for p in (wf.root / shell_job.CONFIG_DIR).glob("config-*.json")
    ]
    # (A --config value arrives as text: the config model reads "0.5" as the number.) The
    # head's own export, written at DAG load before the executor is known, keeps the whole
    # limit: it serves only the localrules (tables, inspector), which call no LLM.
    node = rate_limit.node_state_dir()  # this user's own folder on each node
    steps = [x for x in limits if x is not None and x["state_dir"] == node]
    assert steps and all(float(x["share"]) == 1 / cap for x in steps), limits
    assert all(float(x["share"]) == 1.0 for x in limits if x is not None and x not in steps)


@pytest.mark.workflow
def test_paper_scale_dry_run_lists_job_counts(workflow_factory):
    paper = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    wf = workflow_factory(paper)
    t0 = time.monotonic()
    counts = wf.scheduled("--executor", "slurm", "--workflow-profile", "profiles/slurm")
    elapsed = time.monotonic() - t0
    print(f"\npaper-scale dry run: {elapsed:.1f}s, {sum(counts.values())} jobs: {counts}")
    n = paper["n_users"]
    systems = paper["systems"]
    searchable = [s for s in systems if registry.spec(s).searchable]
    pairs = len(systems) + len(searchable)  # dump_all for all, retrieve for searchable
    assert counts["persona"] == counts["bank"] == counts["tasks"] == counts["oracle"] == n
    assert counts["rollout"] == counts["preference"] == n * len(systems)
    assert counts["probe"] == n * len(searchable)
    assert counts["slotfill"] == counts["judge"] == counts["attribution"] == n * pairs
    assert counts["tables"] == 1
    assert counts["users"] == 3 * n  # the run's copy of each user's persona, bank, tasks
    # docs/cluster.md states both counts: the tables' and the default target's
    stated = re.search(
        r"lists ([\d,]+) jobs for `snakemake tables` and ([\d,]+) for the default",
        re.sub(r"\s+", " ", (ROOT / "docs" / "cluster.md").read_text()),
    )
    assert stated, "docs/cluster.md states no job count"
    tables = wf.scheduled("tables", "--executor", "slurm", "--workflow-profile", "profiles/slurm")
    assert [int(n.replace(",", "")) for n in stated.groups()] == [
        sum(tables.values()),
        sum(counts.values()),
    ]


@pytest.mark.workflow
def test_only_memt_jobs_get_the_large_memory_and_runtime(workflow_factory):
    """SLURM sizing: the profile overrides no rule; memt's rollout/probe ask for more."""
    slurm = yaml.safe_load((ROOT / "profiles/slurm/profile.yaml").read_text())
    assert not {"rollout", "probe"} & set(slurm.get("set-resources", {}))
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["nomem", "longctx_full", "memt"])
    raw.setdefault("system_settings", {})["memt"] = {"endpoint": "http://127.0.0.1:9/v1"}
    wf = workflow_factory(raw)
    proc = wf.run("-n", "--executor", "slurm", "--workflow-profile", "profiles/slurm")
    sizes = {}
    for block in (proc.stdout + proc.stderr).split("\nrule ")[1:]:
        rule = block.split(":")[0]
        wildcards = re.search(r"wildcards: (.*)", block)
        res = re.search(r"resources: (.*)", block)
        if rule in ("rollout", "probe") and wildcards and res:
            system = re.search(r"system=(\w+)", wildcards.group(1)).group(1)
            mem = int(re.search(r"mem_mb=(\d+)", res.group(1)).group(1))
            runtime = int(re.search(r"runtime=(\d+)", res.group(1)).group(1))
            sizes.setdefault((rule, system), set()).add((mem, runtime))
    assert sizes[("rollout", "memt")] == sizes[("probe", "memt")] == {(16000, 720)}
    for system in ("nomem", "longctx_full"):
        assert sizes[("rollout", system)] == {(4000, 120)}, system
    assert sizes[("probe", "longctx_full")] == {(4000, 120)}
