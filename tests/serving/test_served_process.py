"""Starting and trusting served processes (memprobe/serving/served_process.py): a server
proves it is ours, children inherit no secret."""

from __future__ import annotations

import os

import pytest

from memprobe.serving import served_process
from memprobe.testing.memt_standin import StandIn

SENTINEL = "sk-sentinel-openai-0123456789"


def test_a_port_squatter_that_accepts_any_key_is_refused():
    squatter = StandIn()  # answers every request, with or without a key
    try:
        with pytest.raises(served_process.NotOurs, match="another server"):
            served_process.prove_ours(squatter.base_url, "the-runs-key")
    finally:
        squatter.close()


def test_children_never_inherit_secrets(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    env = served_process.child_env(OMP_WAIT_POLICY="PASSIVE")
    assert "OPENAI_API_KEY" not in env and "HF_TOKEN" not in env
    assert env["OMP_WAIT_POLICY"] == "PASSIVE" and env["PATH"] == os.environ["PATH"]
