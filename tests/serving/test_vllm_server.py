"""The served Mem-T policy (memprobe/serving/vllm_server.py) against a fake ``vllm`` executable
that serves the Mem-T stand-in (vLLM itself lives in its own GPU env): nobody but the process
the job started ever sees its key or a prompt."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from memprobe.config import load_config
from memprobe.llm.client import memt_client
from memprobe.serving import served_process, vllm_server
from tests.agents.test_memt import SERVE_STANDIN, fake_vllm, serve_settings
from tests.conftest import tiny_config
from tests.squatters import Squatter

FORMATION = [
    {"role": "system", "content": "Tools: create_fact, create_experience, update_persona"},
    {"role": "user", "content": "Newest message: I keep two beehives on the roof."},
]


def served_config(tmp_path: Path):
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["memt"])
    raw["llm"]["cache_dir"] = str(tmp_path / "cache")
    raw["memt"] = {
        "serve": True,
        "model_path": "/models/mem-t-4b",
        "vllm_bin": fake_vllm(tmp_path, SERVE_STANDIN),
        "startup_timeout_s": 30,
    }
    return load_config(raw)


def test_a_squatter_on_the_port_gets_no_key_and_the_job_uses_its_own_server(
    tmp_path, monkeypatch
):
    # The attack of issue 27: a process binds the port while vLLM still imports torch, and
    # answers the health check. It must receive no key and no prompt.
    squatter = Squatter()
    monkeypatch.setattr(served_process, "free_port", lambda: squatter.port)
    try:
        llm = memt_client(served_config(tmp_path), None)
        reply = llm.text(FORMATION)
        assert '"name": "create_fact"' in reply and "beehives" in reply  # the stand-in's answer
        assert llm.endpoint.uds == vllm_server._server.uds  # type: ignore[union-attr]
    finally:
        vllm_server.stop()
        squatter.close()
    assert squatter.connections == 0 and squatter.received == b""


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
    assert str(err.value).startswith("memt.serve: ") and "\n" not in str(err.value)
    assert squatter.received == b"" and server.proc is None and not private.exists()


def test_the_key_must_be_required_by_the_server_we_started(tmp_path):
    # Proven ours, but serving without the key it was given (a vllm that ignores
    # VLLM_API_KEY): every local process of ours could use it unasked. Refused.
    body = SERVE_STANDIN.replace("serve(uds)", "import os; os.environ.pop('VLLM_API_KEY'); serve(uds)")
    m = serve_settings(tmp_path, fake_vllm(tmp_path, body))
    with pytest.raises(vllm_server.VllmError, match="does not hold the run's key"):
        vllm_server.Server(m, tmp_path / "vllm.log", poll_s=0.1).start()
