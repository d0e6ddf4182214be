"""The LLM backends by name (memprobe/registry/backends.py): each built-in resolves to its
``Backend`` in the layer that owns it, and a name that is not one says where it looked."""

from __future__ import annotations

import sys

import pytest

from memprobe.config.loading import load_config
from memprobe.llm.providers import OpenAICompatible, backend
from memprobe.registry import RegistryError, backends


def test_the_built_ins_resolve_to_their_layers_backends():
    assert backends.names()[:3] == ["openai", "local", "fake"]
    where = {name: type(backends.load(name)).__module__ for name in ("openai", "local", "fake")}
    assert where == {
        "openai": "memprobe.llm.providers",
        "local": "memprobe.serving.local_server",
        "fake": "memprobe.testing.fake_backend",
    }


def test_each_backend_gives_an_endpoint_an_identity_and_a_provider():
    cfg = load_config({"n_users": 1, "systems": ["nomem"], "llm": {"backend": "fake"}})
    fake = backend("fake")
    endpoint = fake.endpoint(cfg, {"base_url": None, "api_key_env": None})
    assert endpoint.backend == "fake" and fake.identity(cfg, None) == "fake"
    assert isinstance(fake.provider(endpoint), OpenAICompatible)
    url = "https://user:pw@api.example/v1?key=secret"
    assert backend("openai").identity(cfg, url) == "https://api.example/v1"  # no credential


def test_an_unknown_backend_says_what_exists_and_where_it_looked():
    with pytest.raises(RegistryError) as err:
        backends.load("anthropic")
    line = str(err.value)
    assert line.startswith("unknown backend 'anthropic'; expected one of openai, local, fake")
    assert "'memprobe.backends' entry points" in line and sys.executable in line


def test_a_plugin_backend_cannot_take_a_built_ins_name(monkeypatch):
    backends.targets.cache_clear()
    monkeypatch.setattr(
        backends, "plugins", lambda group: [("local", "x:Y", f"entry point 'local' ({group})")]
    )
    try:
        with pytest.raises(RegistryError, match="'local' is a built-in backend's name"):
            backends.targets()
    finally:
        backends.targets.cache_clear()
