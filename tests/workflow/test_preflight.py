"""Checks before any job (memprobe/workflow/preflight.py): keys, Mem-T's files, mem0's models."""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml

from memprobe.config.loading import load_config
from memprobe.workflow import preflight
from tests.helpers.workflow import ROOT, SNAKEMAKE, tiny_config

BASE = {"n_users": 1, "systems": ["nomem"], "llm": {"backend": "fake"}}


def _remote(**llm) -> dict:
    return {
        **BASE,
        "llm": {"backend": "openai", "base_url": "https://api.example/v1", **llm},
    }


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
@pytest.mark.parametrize(
    ("base_url", "key_line"),
    [
        # A remote endpoint (a name that never resolves, RFC 2606) without its key: both
        # problems, the key first, in one line.
        ("http://memprobe-preflight.invalid:9/v1", True),
        # A loopback server usually takes no key: only its reachability is checked.
        ("http://127.0.0.2:9/v1", False),
    ],
)
def test_preflight_stops_the_run_before_any_job(tmp_path, base_url, key_line):
    """The Snakefile's onstart: an endpoint that cannot be used ends the run in one line."""
    site = tmp_path / "site.yaml"
    site.write_text(
        yaml.safe_dump(
            {
                "results_dir": str(tmp_path / "results"),
                "llm": {"backend": "openai", "base_url": base_url,
                        "api_key_env": "MEMPROBE_UNSET_KEY"},
            }
        )
    )  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "MEMPROBE_UNSET_KEY"}
    proc = subprocess.run(
        [SNAKEMAKE, "--cores", "1", "--configfile", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert proc.returncode != 0 and not (tmp_path / "results").exists()
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("memprobe:")]
    unset = "memprobe: llm.api_key_env: $MEMPROBE_UNSET_KEY is not set"
    assert line.startswith(unset) is key_line, line
    assert f"{base_url} is unreachable" in line, line


def test_hybrid_search_without_its_models_stops_before_any_job(monkeypatch):
    from memprobe.agents import mem0

    from memprobe.workflow import preflight

    monkeypatch.setattr(mem0, "_installed", lambda module: False)
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["mem0"])
    raw["system_settings"] = {"mem0": {"hybrid_search": True}}
    with pytest.raises(
        preflight.PreflightError, match=r"system_settings\.mem0\.hybrid_search: "
    ) as err:
        preflight.check(load_config(raw))
    assert "en_core_web_sm" in str(err.value) and "\n" not in str(err.value)
    raw["system_settings"]["mem0"]["hybrid_search"] = False
    preflight.mem0_hybrid(load_config(raw))  # off: nothing is needed
