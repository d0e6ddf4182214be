"""The run config (memprobe/config/schema.py): every bad key is one line naming it."""

from __future__ import annotations

import sys

import pytest

from memprobe.config.base import ConfigError
from memprobe.config.loading import load_config
from memprobe.config.schema import role_settings
from tests.helpers.workflow import local_raw, tiny_config


def base() -> dict:
    return tiny_config("http://127.0.0.1:9/v1")


def test_tiny_config_is_valid_and_derives_users():
    cfg = load_config(base())
    assert cfg.user_ids == ["user_001", "user_002"]
    assert cfg.n_dims == 5
    assert cfg.primary_k == 5
    assert role_settings(cfg, "simulator")["temperature"] == 0.85
    assert role_settings(cfg, "judge")["temperature"] == 0.0


def test_an_unknown_system_says_where_plugins_were_looked_for():
    raw = base() | {"systems": ["gpt_memory"]}
    with pytest.raises(ConfigError) as err:
        load_config(raw)
    line = str(err.value)
    assert "'memprobe.systems' entry points" in line and sys.executable in line, line
    assert "\n" not in line


def test_default_dims_are_the_papers():
    raw = base()
    del raw["dims_per_category"]
    assert list(load_config(raw).dims_per_category.values()) == [7, 7, 7, 5, 5]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda c: c.update(systems=["nomem", "gpt_memory"]),
            "systems: unknown system 'gpt_memory'",
        ),
        (lambda c: c.update(n_users=-1), "n_users: Input should be greater than or equal to 1"),
        (
            lambda c: c["dims_per_category"].update(hobby_memory=2),
            "dims_per_category.hobby_memory: unknown key",
        ),
        (lambda c: c["llm"].pop("base_url"), "llm: llm.base_url: required for backend 'openai'"),
        (
            lambda c: c["llm"].update(backend="anthropic"),
            "llm.backend: unknown backend 'anthropic'; expected one of openai, local, fake",
        ),
        (
            lambda c: c.update(modes=["dump_all", "grep"]),
            "modes.1: Input should be 'dump_all' or 'retrieve'",
        ),
        (lambda c: c.update(top_k=0), "top_k: every k must be >= 1"),
        (lambda c: c.update(max_turn=3), "max_turn: unknown key"),
        (lambda c: c.pop("n_users"), "n_users: required key is missing"),
        (
            lambda c: c.update(prompts={"slotfill": "../outside"}),
            "prompts.slotfill: String should match pattern",
        ),
        (
            lambda c: c.update(bank={"pool": "release"}),
            "bank.pool: 'release' reads the release's dimension pool: set users.release_dir",
        ),
        (
            lambda c: c.update(rollout={"replay": "longctx_full_pooled_50"}),
            "rollout.replay: replays the release's recorded conversations: needs "
            "users.source: release",
        ),
        (
            lambda c: c.update(rollout={"replay": "../elsewhere"}),
            "rollout.replay: String should match pattern",
        ),
    ],
)
def test_bad_config_is_one_line_naming_the_key(change, expected):
    raw = base()
    change(raw)
    with pytest.raises(ConfigError) as err:
        load_config(raw, source="test.yaml")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("test.yaml: ")
    assert expected in message, message


@pytest.mark.parametrize("arg", ["--host", "--host=0.0.0.0", "--api-key"])
def test_vllm_args_cannot_override_host_or_key(arg):
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["memt"])
    raw.setdefault("system_settings", {})["memt"] = {
        "serve": True,
        "model_path": "/m",
        "vllm_args": [arg, "0.0.0.0"],
    }
    with pytest.raises(ConfigError, match="memt.vllm_args"):
        load_config(raw)


def test_release_system_names_must_be_safe_path_parts():
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["../../x"])
    raw["users"] = {"source": "release", "release_dir": "/tmp"}
    raw["release"] = {"import_runs": True}
    with pytest.raises(ConfigError, match="system name"):
        load_config(raw)


@pytest.mark.parametrize("key,value", [("top_k", [5, 5]), ("modes", ["retrieve", "retrieve"])])
def test_repeated_k_or_modes_are_refused(key, value):
    with pytest.raises(ConfigError, match="twice"):
        load_config(tiny_config("http://127.0.0.1:9/v1", **{key: value}))


def test_budget_defaults_to_the_served_context_and_cannot_exceed_it():
    assert load_config(local_raw()).slotfill.context_tokens == 4096
    with pytest.raises(ConfigError, match=r"slotfill\.context_tokens: 8000 is more than") as err:
        load_config(local_raw(context_tokens=8000))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("runs", "expected"),
    [
        (["x/y"], r"compare\.runs: .*'x/y': expected one folder name"),
        (["users"], r"compare\.runs: .*'users' is the folder of the shared users"),
        (["a", "a"], r"compare\.runs: .*a run is listed twice"),
        (["release", "smoke"], r"compare\.runs: 'smoke' is this run; name other runs"),
    ],
)
def test_compare_runs_name_other_runs_once(runs, expected):
    with pytest.raises(ConfigError, match=expected) as err:
        load_config(base() | {"compare": {"runs": runs}})
    assert "\n" not in str(err.value)


def test_compare_runs_default_to_none():
    assert load_config(base()).compare.runs == []
    assert load_config(base() | {"compare": {"runs": ["release"]}}).compare.runs == ["release"]
