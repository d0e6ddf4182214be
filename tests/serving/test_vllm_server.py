"""vLLM for Mem-T (memprobe/serving/vllm_server.py): its port, its key, and a cache identity
that follows the weights."""

from __future__ import annotations

import json
import threading

import pytest

from memprobe.config import load_config
from memprobe.serving import served_process, vllm_server
from memprobe.testing.memt_standin import make_server
from tests.helpers.workflow import tiny_config

SENTINEL = "sk-sentinel-openai-0123456789"


def test_vllm_on_a_port_another_server_holds_fails_in_one_line(tmp_path):
    from tests.helpers.memt import SERVE_STANDIN, fake_vllm, serve_settings

    other = make_server(api_key="someone-elses-key")
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        port = other.server_address[1]
        m = serve_settings(tmp_path, fake_vllm(tmp_path, SERVE_STANDIN), port=port)
        server = vllm_server.Server(m, tmp_path / "vllm.log", poll_s=0.1)
        with pytest.raises(vllm_server.VllmError, match="another server") as err:
            server.start()
        assert "\n" not in str(err.value) and server.proc is None
    finally:
        other.shutdown()
        other.server_close()


def test_vllm_gets_its_key_in_the_env_not_argv_and_no_other_secret(tmp_path, monkeypatch):
    from tests.helpers.memt import fake_vllm, serve_settings

    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    body = (
        "import os\n"
        f"open({str(tmp_path / 'env.json')!r}, 'w').write(json.dumps(dict(os.environ)))\n"
        "from memprobe.testing.memt_standin import serve\n"
        "serve('127.0.0.1', int(sys.argv[sys.argv.index('--port') + 1]))"
    )
    m = serve_settings(tmp_path, fake_vllm(tmp_path, body))
    server = vllm_server.Server(m, tmp_path / "vllm.log", poll_s=0.1)
    server.start()
    try:
        env = json.loads((tmp_path / "env.json").read_text())
        argv = (tmp_path / "argv.json").read_text()
        assert env["VLLM_API_KEY"] == server.key and server.key not in argv
        assert "OPENAI_API_KEY" not in env and SENTINEL not in json.dumps(env)
        assert served_process.status(server.base_url + "/models") == 401
    finally:
        server.stop()


def test_memt_cache_identity_follows_the_weights_not_the_port(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMPROBE_MODEL_CACHE", str(tmp_path / "models"))
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    (ckpt / "model.safetensors").write_bytes(b"weights-v1")
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["memt"])
    raw["memt"] = {"serve": True, "model_path": str(ckpt)}
    m = load_config(raw).memt
    a = vllm_server.cache_identity(m, "http://127.0.0.1:40001/v1")
    assert a == vllm_server.cache_identity(m, "http://127.0.0.1:40002/v1")
    (ckpt / "model.safetensors").write_bytes(b"weights-v2")  # a new checkpoint, same path
    assert vllm_server.cache_identity(m, "http://127.0.0.1:40001/v1") != a
    raw["memt"] = {"endpoint": "http://10.0.0.5:8000/v1", "model_path": str(ckpt)}
    fixed = load_config(raw).memt
    before = vllm_server.cache_identity(fixed, fixed.endpoint)
    (ckpt / "model.safetensors").write_bytes(b"weights-v3")
    assert vllm_server.cache_identity(fixed, fixed.endpoint) != before
