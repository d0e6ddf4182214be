"""The run's secrets a job keeps (memprobe/workflow/job_env.py): those its calls use."""

from __future__ import annotations

import json
import os

from memprobe.config.loading import load_config
from memprobe.serving import embed_client, local_server
from memprobe.workflow import shell_job, step
from tests.helpers.workflow import tiny_config

SECRETS = {
    "MEMPROBE_TEST_KEY": "sk-default-0123456789",  # llm.api_key_env
    "ORACLE_KEY": "sk-oracle-0123456789",  # the oracle's own endpoint's
    local_server.KEY_ENV: "local-server-key-0123",
    embed_client.TOKEN_ENV: "embed-token-0123456789",
}


def job_environment(tmp_path, monkeypatch, rule: str, **wildcards: str) -> dict[str, str]:
    """What of the secrets the environment holds once a job of ``rule`` is set up."""
    raw = tiny_config("http://127.0.0.1:9/v1")
    raw["llm"]["roles"] = {
        "oracle": {"base_url": "https://oracle.example/v1", "api_key_env": "ORACLE_KEY"}
    }
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(load_config(raw).model_dump(mode="json")))
    monkeypatch.setenv(shell_job.CONFIG_ENV, str(config_file))
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    spec = {
        "input": {"all": [], "names": {}},
        "output": {"all": [], "names": {}},
        "wildcards": wildcards,
        "params": {},
    }
    usage = str(tmp_path / "usage" / f"{rule}.csv")
    step.Job(shell_job.SpecJob(rule, str(tmp_path / "log"), usage, json.dumps(spec)))
    return {k: v for k, v in os.environ.items() if k in SECRETS}


def test_a_job_that_calls_no_model_holds_none_of_the_run_s_secrets(tmp_path, monkeypatch):
    """Issue 42: the tables and inspector jobs inherited the run's key and every API key."""
    for rule in ("tables", "inspector"):
        assert job_environment(tmp_path, monkeypatch, rule) == {}, rule


def test_a_job_keeps_the_keys_of_its_own_roles_only(tmp_path, monkeypatch):
    env = job_environment(tmp_path, monkeypatch, "judge", user="user_001", system="nomem",
                          mode="dump_all")  # fmt: skip
    assert set(env) == {"MEMPROBE_TEST_KEY", local_server.KEY_ENV}  # not the oracle's own
    env = job_environment(tmp_path, monkeypatch, "oracle", user="user_001")
    assert set(env) == {"ORACLE_KEY", local_server.KEY_ENV}
    env = job_environment(tmp_path, monkeypatch, "rollout", user="user_001", system="nomem")
    assert set(env) == {"MEMPROBE_TEST_KEY", local_server.KEY_ENV, embed_client.TOKEN_ENV}
