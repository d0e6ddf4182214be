"""The ``openai`` backend (memprobe/llm/openai_backend.py): its endpoints, the keys a remote one
needs, and its preflight."""

from __future__ import annotations

import time

import pytest

from memprobe.config.loading import load_config
from memprobe.llm import openai_backend
from memprobe.workflow import preflight
from tests.helpers.endpoint import Drip

BASE = {"n_users": 1, "systems": ["nomem"], "llm": {"backend": "fake"}}


def _remote(**llm) -> dict:
    return {
        **BASE,
        "llm": {"backend": "openai", "base_url": "https://api.example/v1", **llm},
    }


def test_preflight_wants_the_key_of_a_remote_endpoint(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cfg = load_config(_remote())
    (line,) = openai_backend.missing_keys(cfg)
    assert line.startswith("llm.api_key_env: $OPENAI_API_KEY is not set")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert openai_backend.missing_keys(cfg) == []
    # a loopback server (vLLM, the fake endpoint) needs none
    monkeypatch.delenv("OPENAI_API_KEY")
    assert openai_backend.missing_keys(load_config(_remote(base_url="http://127.0.0.1:9/v1"))) == []


def test_a_role_on_its_own_remote_endpoint_without_a_key_variable_is_one_line(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    raw = _remote()
    raw["llm"]["roles"] = {"judge": {"base_url": "https://judge.example/v1"}}
    cfg = load_config(raw)
    (line,) = openai_backend.missing_keys(cfg)
    assert line.startswith("llm.roles.judge.api_key_env: not set") and "\n" not in line
    assert preflight.key_variables(cfg) == ["OPENAI_API_KEY"]  # the Kubernetes envvars list
    with pytest.raises(preflight.PreflightError, match="llm.roles.judge.api_key_env"):
        preflight.check(cfg, local_files=False)
    raw["llm"]["roles"]["judge"]["api_key_env"] = ""  # no key, on purpose
    assert openai_backend.missing_keys(load_config(raw)) == []
    # a name that only looks like loopback is remote: its key is wanted
    monkeypatch.delenv("OPENAI_API_KEY")
    assert openai_backend.missing_keys(load_config(_remote(base_url="http://127.0.0.1.nip.io/v1")))


def test_an_endpoint_that_does_not_answer_is_named_without_its_credentials(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    cfg = load_config(_remote(base_url="http://127.0.0.2:9/v1"))
    # The config refuses a URL with a credential (tests/config/test_base.py); one set past it
    # (in memory, by a plugin) is still named without it.
    cfg.llm.base_url = "http://user:hunter2@127.0.0.2:9/v1"
    (line,) = openai_backend.OPENAI.preflight(cfg)
    assert line.startswith("llm.base_url: endpoint http://***@127.0.0.2:9/v1 is unreachable")
    assert "hunter2" not in line
    assert openai_backend.OPENAI.rate_limited and openai_backend.OPENAI.needs_base_url


@pytest.mark.parametrize("part", ["headers", "body"])
def test_the_reachability_check_ends_within_its_deadline_on_a_dripping_server(part):
    """Issue 42: each read of a dripping server is quick, so a timeout per read never trips;
    the preflight's check held the run 50 s. One deadline bounds the whole request."""
    drip = Drip(part)
    try:
        t0 = time.monotonic()
        reason = openai_backend.reachable(drip.base_url, timeout_s=1.0)
        took = time.monotonic() - t0
    finally:
        drip.close()
    assert took < 3.0, took
    if part == "headers":
        assert reason and "no answer within 1s" in reason
    else:
        assert reason is None  # it answered: the headers came whole, in time
