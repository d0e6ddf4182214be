"""A new user's config mistakes: each ends in one line that says where and what (issue 17)."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from memprobe.config import ConfigError, load_config, load_layers
from memprobe.workflow import preflight
from tests.conftest import ROOT, SNAKEMAKE

BASE = {"n_users": 1, "systems": ["nomem"], "llm": {"backend": "fake"}}


def dry_run(*args: str) -> subprocess.CompletedProcess:
    """`snakemake -n` in the repository with the default config plus ``args``."""
    return subprocess.run(
        [SNAKEMAKE, "-n", "-q", "--cores", "1", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.workflow
def test_nested_config_on_the_command_line_reaches_the_model():
    """The form the README shows: a YAML mapping for a nested key, merged key by key."""
    proc = dry_run("--config", "llm={concurrency: 0}")
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1] == (
        "memprobe: --config: llm.concurrency: Input should be greater than or equal to 1"
    )
    # the other llm keys of config/config.yaml survive the nested override
    assert dry_run("--config", "llm={concurrency: 2}").returncode == 0


@pytest.mark.workflow
def test_a_command_line_typo_is_blamed_on_the_command_line():
    proc = dry_run("--config", "n_user=3")
    assert proc.stderr.strip().splitlines()[-1] == "memprobe: --config: n_user: unknown key"


def test_errors_name_the_layer_that_set_the_key():
    layers = [("config/config.yaml", BASE), ("site.yaml", {"llm": {"timeout_s": -1}})]
    with pytest.raises(ConfigError, match=r"^site\.yaml: llm\.timeout_s: "):
        load_layers(layers)
    # a key nobody set (or a rule across keys) names every layer
    with pytest.raises(ConfigError, match=r"^a\.yaml \+ b\.yaml: n_users: required key"):
        load_layers([("a.yaml", {"systems": ["nomem"]}), ("b.yaml", {"llm": {"backend": "fake"}})])


def test_a_roles_typo_lists_the_roles():
    with pytest.raises(ConfigError) as err:
        load_config({**BASE, "llm": {"backend": "fake", "roles": {"judgee": {"model": "m"}}}})
    msg = str(err.value)
    assert "llm.roles.judgee: unknown key" in msg and "judge" in msg and "oracle" in msg
    assert "skill_memory" not in msg


@pytest.mark.workflow
def test_a_config_that_scores_nothing_stops_before_any_job():
    proc = dry_run("--config", "systems=[nomem]", "modes=[retrieve]")
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("memprobe: systems ['nomem'] x modes ['retrieve']: nothing would be")


def _remote(**llm) -> dict:
    return {
        **BASE,
        "llm": {"backend": "openai", "base_url": "https://api.example/v1", **llm},
    }


def test_preflight_wants_the_key_of_a_remote_endpoint(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cfg = load_config(_remote())
    (line,) = preflight.missing_keys(cfg)
    assert line.startswith("llm.api_key_env: $OPENAI_API_KEY is not set")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert preflight.missing_keys(cfg) == []
    # a loopback server (vLLM, the fake endpoint) needs none
    monkeypatch.delenv("OPENAI_API_KEY")
    assert preflight.missing_keys(load_config(_remote(base_url="http://127.0.0.1:9/v1"))) == []


def test_preflight_wants_memt_files(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    raw = {
        **_remote(base_url="http://127.0.0.1:9/v1"),
        "systems": ["memt"],
        "memt": {
            "serve": True,
            "model_path": str(tmp_path / "Mem-T-4B"),
            "vllm_bin": str(tmp_path / "vllm"),
            "embedder": "BAAI/bge-m3",
        },
    }
    cfg = load_config(raw)
    keys = [line.split(":")[0] for line in preflight.missing_files(cfg)]
    assert keys == ["memt.model_path", "memt.vllm_bin", "memt.embedder"]
    (tmp_path / "Mem-T-4B").mkdir()
    (tmp_path / "vllm").write_text("#!/bin/sh\n")
    (tmp_path / "hf" / "hub" / "models--BAAI--bge-m3").mkdir(parents=True)
    assert preflight.missing_files(cfg) == []
    # the Snakefile's check: every problem in one line
    (tmp_path / "vllm").unlink()
    with pytest.raises(preflight.PreflightError, match="memt.vllm_bin"):
        preflight.check(cfg)


@pytest.mark.workflow
def test_preflight_stops_the_run_before_any_job(tmp_path):
    """The Snakefile's onstart: a remote endpoint without its key set ends in one line."""
    site = tmp_path / "site.yaml"
    site.write_text(
        yaml.safe_dump(
            {
                "results_dir": str(tmp_path / "results"),
                "llm": {"backend": "openai", "base_url": "http://127.0.0.2:9/v1",
                        "api_key_env": "MEMPROBE_UNSET_KEY"},
            }
        )
    )  # fmt: skip
    proc = subprocess.run(
        [SNAKEMAKE, "--cores", "1", "--configfile", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode != 0 and not (tmp_path / "results").exists()
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("memprobe:")]
    assert line.startswith("memprobe: llm.api_key_env: $MEMPROBE_UNSET_KEY is not set")
    assert "127.0.0.2:9/v1 is unreachable" in line  # both problems, one line
