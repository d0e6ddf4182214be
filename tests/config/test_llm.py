"""The `llm` block (memprobe/config/llm.py): endpoints, and bounds of a server the run starts."""

from __future__ import annotations

import re
import subprocess

import pytest

from memprobe.config.base import ConfigError
from memprobe.config.loading import load_config
from memprobe.config.schema import role_settings
from tests.helpers.paper import merged
from tests.helpers.workflow import ROOT, SNAKEMAKE, tiny_config


def base() -> dict:
    return tiny_config("http://127.0.0.1:9/v1")


def test_the_local_servers_assistant_bound_reaches_only_the_assistant_it_serves():
    cfg = load_config(merged("config/config.yaml"))
    assert role_settings(cfg, "assistant")["max_tokens"] == 400
    assert role_settings(cfg, "simulator")["max_tokens"] == cfg.llm.max_tokens == 1000
    # An assistant on an endpoint of its own is not the local server's to bound.
    raw = merged("config/config.yaml")
    raw["llm"]["roles"] = {"assistant": {"base_url": "http://127.0.0.1:9/v1"}}
    assert role_settings(load_config(raw), "assistant")["max_tokens"] == 1000
    # The paper's protocol unsets it, so its assistant has the protocol's bound.
    paper = load_config(merged("config/config.yaml", "config/paper.yaml"))
    assert role_settings(paper, "assistant")["max_tokens"] == 8192


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://x/v1", "http:///v1", "nohost"])
def test_endpoint_urls_must_be_http_with_a_host(url):
    raw = tiny_config(url)
    with pytest.raises(ConfigError, match="llm.base_url"):
        load_config(raw)
    raw = tiny_config(
        "http://127.0.0.1:9/v1", systems=["memt"], system_settings={"memt": {"endpoint": url}}
    )
    with pytest.raises(ConfigError, match="memt.endpoint"):
        load_config(raw)


@pytest.mark.workflow
@pytest.mark.parametrize("slots,each", [(8, 4), (4, 2)])
def test_the_local_backend_runs_no_more_llm_jobs_than_its_server_serves(slots, each):
    """--cores 32 (an API run's advice) on the offline default: its server's 4 slots serve 2
    conversations well, so each LLM job takes half the llm_slots and 2 run at once."""
    proc = subprocess.run(
        [SNAKEMAKE, "-n", "--cores", "32", "--resources", f"llm_slots={slots}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    taken = {int(n) for n in re.findall(r"resources: .*llm_slots=(\d+)", proc.stdout)}
    assert taken == {0, each}  # 0: the offline judge's and the probes' jobs
    assert slots // each == 2


def test_a_base_url_with_a_credential_stops_the_config_in_one_line_naming_the_key():
    """Issue 42: the validated config is written for the jobs (.snakemake/memprobe/config-*.json)
    and the URL reaches their logs: a credential in it is refused where it is given."""
    for llm in (
        {"backend": "openai", "base_url": "http://me:hunter2@127.0.0.1:9/v1"},
        {"backend": "fake", "roles": {"judge": {"base_url": "https://h.example/v1?key=hunter2"}}},
    ):
        with pytest.raises(ConfigError) as err:
            load_config({"n_users": 1, "systems": ["nomem"], "llm": llm})
        line = str(err.value)
        assert "base_url" in line and "hunter2" not in line and "\n" not in line
