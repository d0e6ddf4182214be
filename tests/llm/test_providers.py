"""The backends' endpoints (memprobe/llm/providers.py): where a role's requests go."""

from __future__ import annotations

import pytest

from memprobe.config.loading import load_config
from memprobe.llm.client import LLMError, client_for
from tests.helpers.workflow import tiny_config


def test_a_local_server_url_without_a_model_id_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMPROBE_LOCAL_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.delenv("MEMPROBE_LOCAL_MODEL_ID", raising=False)
    raw = tiny_config("http://127.0.0.1:9/v1")
    raw["llm"] = {"backend": "local", "cache_dir": str(tmp_path / "c")}
    with pytest.raises(LLMError, match="MEMPROBE_LOCAL_MODEL_ID") as err:
        client_for("judge", load_config(raw))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "url,loopback",
    [
        ("http://127.0.0.1:8000/v1", True),
        ("http://127.3.4.5/v1", True),
        ("http://[::1]:8000/v1", True),
        ("http://localhost:8000/v1", True),
        ("http://LOCALHOST/v1", True),
        ("http://127.attacker.example/v1", False),  # a DNS name, wherever it resolves
        ("http://127.0.0.1.nip.io/v1", False),
        ("http://localhost.evil.example/v1", False),
        ("http://10.0.0.5:8000/v1", False),
    ],
)
def test_loopback_is_an_ip_address_or_exactly_localhost(url, loopback):
    from memprobe.llm.providers import is_loopback

    assert is_loopback(url) is loopback


def test_no_key_goes_over_plain_http_to_a_name_that_looks_like_loopback(tmp_path, monkeypatch):
    from tests.helpers.llm import make_llm

    monkeypatch.setenv("MEMPROBE_TEST_KEY", "sk-sentinel-0123456789")
    llm = make_llm("http://127.0.0.1.nip.io:8000/v1", tmp_path, api_key_env="MEMPROBE_TEST_KEY")
    with pytest.raises(LLMError, match="plain http") as err:
        llm.text([{"role": "user", "content": "hi"}])
    assert "sk-sentinel" not in str(err.value)


@pytest.mark.parametrize(
    "text,shown",
    [
        ("Authorization: Basic dXNlcjpodW50ZXIy", "Authorization: Basic ***"),
        (
            "GET https://h.example/v1?token=abc123secret&x=1",
            "GET https://h.example/v1?token=***&x=1",
        ),
        ("X-Memprobe-Token: 0123abcd", "X-Memprobe-Token: ***"),
        ('{"password": "hunter2"}', '{"password": "***"}'),
        ("Bearer sk-abc", "Bearer ***"),
        ("prompt_tokens: 5, basic steps", "prompt_tokens: 5, basic steps"),  # not credentials
    ],
)
def test_redaction_covers_basic_auth_and_token_fields(text, shown):
    from memprobe.llm.providers import redact

    assert redact(text) == shown


def test_a_forgotten_provider_reaches_the_server_now_on_its_port(tmp_path):
    # A closed fake endpoint's handler threads still answer the connections a cached provider
    # keeps alive: a later test's server on the same port was answered by the earlier one's
    # script (a flaky "Connection error" where that one injected faults).
    import json

    from memprobe.llm.providers import Endpoint, forget_providers, provider
    from memprobe.testing.background import Background
    from memprobe.testing.fake_endpoint import make_server

    def serve(text: str, port: int = 0) -> Background:
        script = tmp_path / f"{text}.json"
        script.write_text(json.dumps({"judge": {"else": text}}))
        return Background(make_server("127.0.0.1", port, str(script)))

    first = serve("first")
    port = first.server.server_address[1]
    url = f"http://127.0.0.1:{port}/v1"
    ep = Endpoint("openai", url, url, None, 30.0, None)
    schema = {"type": "json_schema", "json_schema": {"name": "judge", "schema": {}}}
    req = {"model": "m", "messages": [{"role": "user", "content": "?"}], "response_format": schema}
    assert provider(ep).complete(req).content == '"first"'
    first.close()
    second = serve("second", port)
    try:
        assert provider(ep).complete(req).content == '"first"'  # the hazard: a stale connection
        forget_providers()
        assert provider(ep).complete(req).content == '"second"'
    finally:
        second.close()
