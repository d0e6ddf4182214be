"""The LLM backends by name (memprobe/registry/backends.py): each built-in resolves to its
``Backend`` in the layer that owns it, a name that is not one says where it looked, and a
backend from another package (an entry point) gets its settings, rate limiter, preflight and
estimate through the ``Backend`` interface alone."""

from __future__ import annotations

import sys

import pytest
from pydantic import BaseModel, ConfigDict

from memprobe.config.base import ConfigError
from memprobe.config.llm import llm_settings_model
from memprobe.config.loading import load_config
from memprobe.llm.client import client_for
from memprobe.llm.providers import BackendBase, Capacity, Endpoint, OpenAICompatible, backend
from memprobe.registry import RegistryError, backends
from memprobe.report import estimate, estimate_calls, estimate_rates, estimate_time
from memprobe.workflow import config_slices, preflight


def test_the_built_ins_resolve_to_their_layers_backends():
    assert backends.names()[:3] == ["openai", "local", "fake"]
    where = {name: type(backends.load(name)).__module__ for name in ("openai", "local", "fake")}
    assert where == {
        "openai": "memprobe.llm.openai_backend",
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


# -- a backend from another package, found through its entry point ----------------------------
class PacedSettings(BaseModel):
    """``llm.paced``: the plugin's own block."""

    model_config = ConfigDict(extra="forbid")
    region: str = ""
    warm_pool: int = 1  # how it serves, never what: a runtime setting


class PacedBackend(BackendBase):
    """A hosted API with a provider's rate limit, its own key and a region to name: what the
    run needs of it comes through the ``Backend`` interface alone."""

    name = "paced"
    settings = PacedSettings
    runtime_settings = ("warm_pool",)
    needs_base_url = True
    rate_limited = True
    assumed_latency_s = 7.0

    def endpoint(self, cfg, settings):
        url = settings["base_url"]
        return Endpoint(self.name, url, f"paced:{url}", "PACED_KEY", cfg.llm.timeout_s)

    def identity(self, cfg, base_url):
        return f"paced:{base_url}"

    def provider(self, endpoint):
        return OpenAICompatible(endpoint)

    def capacity(self, cfg):
        return Capacity(jobs=1, requests=3)  # the provider's account serves 3 calls at once

    def preflight(self, cfg):
        return [] if cfg.llm.paced.region else ["llm.paced.region: required (eu or us)"]

    def key_variables(self, cfg):
        return ["PACED_KEY"]


PLUGIN = PacedBackend()


@pytest.fixture
def paced(tmp_path, monkeypatch):
    """``paced`` installed as a plugin installs it: a distribution on sys.path whose entry
    point of the ``memprobe.backends`` group names this module's ``PLUGIN``."""
    dist = tmp_path / "memprobe_paced-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: memprobe-paced\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[memprobe.backends]\npaced = {__name__}:PLUGIN\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    caches = (
        backends.targets,
        backends.load,
        llm_settings_model,
        config_slices.runtime_only,
        config_slices.role_identity_keys,
    )
    for fn in caches:
        fn.cache_clear()
    yield
    monkeypatch.undo()  # the distribution leaves sys.path before the caches refill
    for fn in caches:
        fn.cache_clear()


def paced_config(**llm) -> dict:
    return {
        "n_users": 2,
        "systems": ["nomem"],
        "modes": ["dump_all"],
        "dims_per_category": {"skill_memory": 2},
        "judge": {"form": "llm"},
        "llm": {
            "backend": "paced",
            "base_url": "https://paced.example/v1",
            "rate_limit": {"requests_per_minute": 60},
            **llm,
        },
    }


def test_a_plugin_backend_gets_its_settings_and_rate_limiter_through_the_interface(paced, tmp_path):
    assert "paced" in backends.names()
    cfg = load_config(paced_config(paced={"region": "eu"}, cache_dir=str(tmp_path / "llm")))
    assert cfg.llm.paced.region == "eu"
    with pytest.raises(ConfigError, match=r"llm\.paced\.regio: unknown key"):
        load_config(paced_config(paced={"regio": "eu"}))
    with pytest.raises(ConfigError, match="llm.base_url: required for backend 'paced'"):
        load_config(paced_config(base_url=None))
    judge = client_for("judge", cfg)
    assert judge.endpoint.identity == "paced:https://paced.example/v1"
    assert judge.limiter is not None and judge.limiter.limits.requests == 60
    # Its runtime setting reruns nothing; its identity is every LLM rule's role identity.
    assert "llm.paced.warm_pool" in config_slices.runtime_only()
    role = config_slices.Slicer(cfg).role("judge")["role judge"]
    assert role["backend"] == "paced" and role["endpoint"] == "paced:https://paced.example/v1"


def test_a_plugin_backend_gets_its_preflight_and_keys_through_the_interface(paced):
    cfg = load_config(paced_config())
    with pytest.raises(preflight.PreflightError, match=r"^llm\.paced\.region: required"):
        preflight.check(cfg)
    assert preflight.key_variables(cfg) == ["PACED_KEY"]
    preflight.check(load_config(paced_config(paced={"region": "us"})))  # nothing else to check


def test_a_plugin_backend_gets_its_estimate_through_the_interface(paced):
    cfg = load_config(paced_config())
    assert estimate.assumed_latency(cfg) == 7.0
    assert estimate_time.streams(cfg, llm_slots=8) == 3  # its capacity, not 8 x concurrency
    lines = estimate_calls.predict(cfg, estimate_rates.priors(cfg))
    wall = estimate_time.wall_time(cfg, lines, estimate.assumed_latency(cfg), llm_slots=8)
    calls = sum(x.calls for x in lines)
    assert wall.provider_calls == calls  # every call paced by the provider's limit
    assert wall.requests_s == pytest.approx(calls / 60 * 60)
    assert wall.streams_s == pytest.approx(calls * 7.0 / 3)
