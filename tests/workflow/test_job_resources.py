"""The rules' resources and priorities (memprobe/workflow/job_resources.py)."""

from __future__ import annotations

from types import SimpleNamespace

import yaml

from memprobe.config.loading import load_config
from memprobe.workflow import job_resources
from tests.helpers.workflow import ROOT, tiny_config


def wildcards(system: str) -> SimpleNamespace:
    return SimpleNamespace(system=system)


def memt_config():
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["nomem", "memt"])
    raw["system_settings"] = {
        "memt": {"endpoint": "http://127.0.0.1:9/v1", "gpu_model": "a100", "cpus_per_gpu": 4}
    }
    return load_config(raw)


def test_only_a_gpu_system_s_jobs_ask_for_a_gpu_placed_by_its_settings():
    res = job_resources.JobResources(memt_config(), llm_slots=8)
    memt, nomem = wildcards("memt"), wildcards("nomem")
    assert (res.gpu_count(memt), res.gpu_model(memt), res.cpus_per_gpu(memt)) == (1, "a100", 4)
    assert (res.gpu_count(nomem), res.gpu_model(nomem), res.cpus_per_gpu(nomem)) == (None,) * 3
    assert (res.mem_mb(memt), res.runtime(memt)) == job_resources.JOB_SIZE[True]
    assert (res.mem_mb(nomem), res.runtime(nomem)) == job_resources.JOB_SIZE[False]
    assert res.llm_job == 1 and res.probe_llm_slots(memt) == 1 and res.probe_llm_slots(nomem) == 0


def test_a_served_model_s_jobs_take_the_share_of_slots_its_server_serves_well():
    cfg = load_config(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))
    assert cfg.llm.local.jobs_at_once == 2
    assert job_resources.JobResources(cfg, llm_slots=8).llm_job == 4  # 2 jobs at once
    assert job_resources.JobResources(cfg, llm_slots=None).llm_job == 1  # --cores only


def test_users_come_first_then_rollouts_by_their_calls_then_scoring_in_chain_order():
    prio = job_resources.Priorities(memt_config())
    rollouts = {s: prio.rollout(wildcards(s)) for s in ("nomem", "memt")}
    assert prio.user > max(rollouts.values()) > min(rollouts.values())
    assert rollouts["memt"] > rollouts["nomem"]  # its write path calls per turn
    assert prio.shortest_rollouts == "nomem"  # the oracles ride in its scoring (cluster.py)
    assert min(rollouts.values()) > max(prio.scoring.values())
    order = sorted(prio.scoring, key=prio.scoring.__getitem__, reverse=True)
    assert order == ["oracle", "probe", "slotfill", "judge", "attribution"]
