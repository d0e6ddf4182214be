"""What the Snakefile changes for jobs on other hosts (memprobe/workflow/cluster.py): the cache
on the shared volume, the keys as the pods' envvars, each node's share of the rate limit."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

from memprobe.config.loading import load_config
from memprobe.workflow import cluster
from tests.helpers.workflow import tiny_config


class Envvars(set):
    pass


def fake_workflow(provider=None, prefix=None, local=True, slots=None, command_line=None):
    registered = Envvars()
    return SimpleNamespace(
        storage_settings=SimpleNamespace(
            default_storage_provider=provider, default_storage_prefix=prefix
        ),
        global_resources={"llm_slots": SimpleNamespace(value=slots)} if slots else {},
        local_exec=local,
        config_settings=SimpleNamespace(config=command_line or {}, config_args=None),
        envvars=registered,
        register_envvars=lambda *names: registered.update(names),
        executor_plugin=SimpleNamespace(common_settings=SimpleNamespace(non_local_exec=not local)),
    )


def test_a_relative_cache_goes_on_the_storage_prefix_where_every_pod_sees_it():
    raw = tiny_config("http://127.0.0.1:9/v1")
    cfg, config = load_config(raw), {"llm": {"cache_dir": ".cache/llm"}}
    cluster.anchor_cache_dir(fake_workflow("fs", "/volume/run"), cfg, config)
    assert cfg.llm.cache_dir == config["llm"]["cache_dir"] == "/volume/run/.cache/llm"
    local = load_config(raw)
    cluster.anchor_cache_dir(fake_workflow(), local, {"llm": {}})
    assert local.llm.cache_dir == ".cache/llm"  # no storage provider: as configured


def test_set_key_variables_become_the_pods_envvars_and_never_a_local_command_line(
    monkeypatch,
):
    monkeypatch.setenv("MEMPROBE_POD_KEY", "sk-x")
    monkeypatch.delenv("MEMPROBE_UNSET_KEY", raising=False)
    raw = tiny_config("https://api.example/v1")
    raw["llm"]["api_key_env"] = "MEMPROBE_POD_KEY"
    raw["llm"]["roles"] = {
        "judge": {"base_url": "https://judge.example/v1", "api_key_env": "MEMPROBE_UNSET_KEY"}
    }
    cfg = load_config(raw)
    assert cluster.declare_key_variables(fake_workflow(), cfg) == []  # no storage provider
    pods = fake_workflow("fs", "/volume", local=False)
    names = cluster.declare_key_variables(pods, cfg)
    assert names == ["MEMPROBE_POD_KEY"] and pods.envvars == {"MEMPROBE_POD_KEY"}
    cluster.forget_key_variables(pods, names)  # jobs elsewhere: kept
    assert pods.envvars == {"MEMPROBE_POD_KEY"}
    here = fake_workflow("fs", "/volume", local=True)
    cluster.forget_key_variables(here, cluster.declare_key_variables(here, cfg))
    assert here.envvars == set()


def test_each_node_takes_its_share_of_the_rate_limit_on_local_disk():
    nodes = fake_workflow(local=False, slots=4)
    config: dict = {}
    cluster.share_rate_limit_across_nodes(nodes, config)
    (arg,) = nodes.config_settings.config_args
    key, value = arg.split("=", 1)
    assert key == "llm" and json.loads(value) == {
        "rate_limit": {"share": 0.25, "state_dir": f"/tmp/memprobe-rate-limit-{os.getuid()}"}
    }
    assert cluster.jobs_elsewhere(nodes) and cluster.global_resource(nodes, "llm_slots") == 4
    for untouched in (
        fake_workflow(local=True, slots=4),  # one machine: one lock
        fake_workflow(local=False),  # no llm_slots: no share to take
        fake_workflow(local=False, slots=4, command_line={"llm": {"x": 1}}),  # yours wins
    ):
        cluster.share_rate_limit_across_nodes(untouched, {})
        assert untouched.config_settings.config_args is None


def grouping(groups: dict[str, str]) -> SimpleNamespace:
    return SimpleNamespace(
        group_settings=SimpleNamespace(overwrite_groups=groups), parent_groupids={}
    )


def test_a_probe_rides_with_the_slot_fill_that_reads_it():
    """The profile's slot-fill group, filled with the probe's wildcards, noted under its
    pattern (where Snakemake looks up group-components); none where it would be wrong."""
    wf = grouping({"slotfill": "score-{system}-{user}"})
    probe = {"system": "amem", "user": "user_001", "k": "10"}
    assert cluster.probe_group(wf, probe, None, 10) == "score-amem-user_001"
    assert wf.parent_groupids == {"score-amem-user_001": "score-{system}-{user}"}
    assert cluster.probe_group(wf, probe, 1, 10) is None  # memt's: it asks for a GPU
    assert cluster.probe_group(wf, {**probe, "k": "5"}, None, 10) is None  # the sweep's
    assert cluster.probe_group(grouping({}), probe, None, 10) is None  # no slot-fill group
    by_mode = grouping({"slotfill": "score-{system}-{mode}"})
    assert cluster.probe_group(by_mode, probe, None, 10) is None  # a wildcard it lacks


def test_a_users_oracle_rides_in_the_scoring_of_the_first_system_to_finish():
    wf = grouping({"slotfill": "score-{system}-{user}"})
    assert cluster.oracle_group(wf, "user_002", "nomem") == "score-nomem-user_002"
    assert wf.parent_groupids == {"score-nomem-user_002": "score-{system}-{user}"}
    assert cluster.oracle_group(grouping({}), "user_002", "nomem") is None
