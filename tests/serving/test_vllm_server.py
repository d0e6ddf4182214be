"""vLLM for Mem-T (memprobe/serving/vllm_server.py), against a fake ``vllm`` executable that
serves the Mem-T stand-in (vLLM itself lives in its own GPU env): nobody but the process the
job started sees its key or a prompt, and the cache identity follows the weights."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from memprobe.agents.memt import policy_client

from memprobe.config.loading import load_config
from memprobe.serving import served_process, vllm_server
from tests.helpers.memt import SERVE_STANDIN, fake_vllm, serve_settings
from tests.helpers.squatters import Squatter
from tests.helpers.workflow import tiny_config

SENTINEL = "sk-sentinel-openai-0123456789"
FORMATION = [
    {"role": "system", "content": "Tools: create_fact, create_experience, update_persona"},
    {"role": "user", "content": "Newest message: I keep two beehives on the roof."},
]


def served_config(tmp_path: Path):
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["memt"])
    raw["llm"]["cache_dir"] = str(tmp_path / "cache")
    raw.setdefault("system_settings", {})["memt"] = {
        "serve": True,
        "model_path": "/models/mem-t-4b",
        "vllm_bin": fake_vllm(tmp_path, SERVE_STANDIN),
        "startup_timeout_s": 30,
    }
    return load_config(raw)


def test_a_squatter_on_the_port_gets_no_key_and_the_job_uses_its_own_server(tmp_path, monkeypatch):
    # The attack of issue 27: a process binds the port while vLLM still imports torch, and
    # answers the health check. It must receive no key and no prompt.
    squatter = Squatter()
    # (The job picks no port any more: vLLM gets a private Unix socket.)
    monkeypatch.setattr(served_process, "free_port", lambda: squatter.port, raising=False)
    reply, uds = "", None
    try:
        llm = policy_client(served_config(tmp_path), None)
        reply, uds = llm.text(FORMATION), llm.endpoint.uds
        assert uds == vllm_server._server.uds  # type: ignore[union-attr]
    finally:
        vllm_server.stop()
        squatter.close()
        assert squatter.connections == 0 and squatter.received == b""  # no key, no prompt
    assert '"name": "create_fact"' in reply and "beehives" in reply  # the stand-in's answer


def test_a_socket_held_by_another_process_stops_the_job_in_one_line(tmp_path, monkeypatch):
    private = Path(tempfile.mkdtemp(dir="/tmp"))  # short: a socket path has ~100 bytes
    squatter = Squatter(private / "vllm.sock")  # not the child: this test's own process
    monkeypatch.setattr(served_process, "private_dir", lambda prefix: private)
    m = serve_settings(tmp_path, fake_vllm(tmp_path, SERVE_STANDIN))
    server = vllm_server.Server(m, tmp_path / "vllm.log", poll_s=0.1)
    try:
        with pytest.raises(vllm_server.VllmError, match="not by the server we started") as err:
            server.start()
    finally:
        squatter.close()
    assert str(err.value).startswith("system_settings.memt.serve: ") and "\n" not in str(err.value)
    assert squatter.received == b"" and server.proc is None and not private.exists()


def test_the_key_must_be_required_by_the_server_we_started(tmp_path):
    # Proven ours, but serving without the key it was given (a vllm that ignores
    # VLLM_API_KEY): any process of this user could use it unasked. Refused.
    body = SERVE_STANDIN.replace("serve(uds)", "os.environ.pop('VLLM_API_KEY'); serve(uds)")
    m = serve_settings(tmp_path, fake_vllm(tmp_path, "import os\n" + body))
    with pytest.raises(vllm_server.VllmError, match="does not hold the run's key"):
        vllm_server.Server(m, tmp_path / "vllm.log", poll_s=0.1).start()


def test_vllm_gets_its_key_in_the_env_not_argv_and_no_other_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    body = (
        "import os\n"
        f"open({str(tmp_path / 'env.json')!r}, 'w').write(json.dumps(dict(os.environ)))\n"
        "from memprobe.testing.memt_standin import serve\n"
        "serve(sys.argv[sys.argv.index('--uds') + 1])"
    )
    m = serve_settings(tmp_path, fake_vllm(tmp_path, body))
    server = vllm_server.Server(m, tmp_path / "vllm.log", poll_s=0.1)
    server.start()
    try:
        env = json.loads((tmp_path / "env.json").read_text())
        argv = (tmp_path / "argv.json").read_text()
        assert env["VLLM_API_KEY"] == server.key and server.key not in argv
        assert "OPENAI_API_KEY" not in env and SENTINEL not in json.dumps(env)
        assert served_process.status(server.base_url + "/models", uds=server.uds) == 401
    finally:
        server.stop()


def test_memt_cache_identity_follows_the_weights_not_the_port(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMPROBE_MODEL_CACHE", str(tmp_path / "models"))
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    (ckpt / "model.safetensors").write_bytes(b"weights-v1")
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["memt"])
    raw.setdefault("system_settings", {})["memt"] = {"serve": True, "model_path": str(ckpt)}
    m = load_config(raw).system_settings.memt
    a = vllm_server.cache_identity(m, "http://127.0.0.1:40001/v1")
    assert a == vllm_server.cache_identity(m, "http://127.0.0.1:40002/v1")
    (ckpt / "model.safetensors").write_bytes(b"weights-v2")  # a new checkpoint, same path
    assert vllm_server.cache_identity(m, "http://127.0.0.1:40001/v1") != a
    raw.setdefault("system_settings", {})["memt"] = {
        "endpoint": "http://10.0.0.5:8000/v1",
        "model_path": str(ckpt),
    }
    fixed = load_config(raw).system_settings.memt
    before = vllm_server.cache_identity(fixed, fixed.endpoint)
    (ckpt / "model.safetensors").write_bytes(b"weights-v3")
    assert vllm_server.cache_identity(fixed, fixed.endpoint) != before


def test_a_served_mem_t_url_with_a_credential_is_refused_without_echoing_it(monkeypatch):
    """Issue 42: MEMPROBE_MEMT_BASE_URL is checked as a configured endpoint is (the job's log
    names the URL of every request)."""
    monkeypatch.setenv(vllm_server.ENDPOINT_ENV, "http://me:hunter2@127.0.0.1:8000/v1")
    with pytest.raises(vllm_server.VllmError) as err:
        vllm_server.ensure(vllm_server.VllmServing())
    assert str(err.value).startswith(vllm_server.ENDPOINT_ENV) and "hunter2" not in str(err.value)
