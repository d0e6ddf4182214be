"""The local backend (memprobe/serving/local_server.py): checks before any job, the run's one
server, its key, and the real llama.cpp server."""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Literal

import pytest
import yaml
from pydantic import BaseModel, Field

from memprobe.config.loading import load_config
from memprobe.llm.client import client_for
from memprobe.serving import local_model, local_server, served_process
from memprobe.serving.local_model import LocalModel, LocalModelError

ROOT = Path(__file__).resolve().parents[2]


def test_cache_keys_of_the_local_backend_do_not_depend_on_the_port(tmp_path, monkeypatch):
    raw = {
        "n_users": 1,
        "systems": ["nomem"],
        "llm": {"backend": "local", "cache_dir": str(tmp_path / "llm")},
    }
    cfg = load_config(raw)
    monkeypatch.setenv(local_server.MODEL_ID_ENV, "ab" * 32)
    ids = []
    for port in (40001, 40002):
        monkeypatch.setenv(local_server.BASE_URL_ENV, f"http://127.0.0.1:{port}/v1")
        llm = client_for("judge", cfg, ledger_path=tmp_path / "u.csv")
        assert llm.base_url.endswith(f":{port}/v1")
        ids.append(llm.cache_endpoint)
    assert ids[0] == ids[1] == f"local-gguf:{'ab' * 32}"


def local_config(tmp_path: Path, **local) -> dict:
    return {
        "seed": 1,
        "n_users": 1,
        "dims_per_category": dict.fromkeys(
            (
                "skill_memory",
                "knowledge_memory",
                "episodic_memory",
                "self_model",
                "assistance_preference",
            ),
            1,
        ),
        "systems": ["nomem"],
        "max_turns": 2,
        "llm": {"backend": "local", "model": "local-test", "local": local},
    }


def _one_line_failure(wf, expected: str) -> None:
    proc = wf.run("tables", check=False, env={local_server.BASE_URL_ENV: ""})
    assert proc.returncode != 0
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("memprobe: ")]
    assert len(lines) == 1 and expected in lines[0], (proc.stdout + proc.stderr)[-2000:]
    assert not (wf.root / "results").exists()  # no job ran
    assert not list((wf.root / "logs").rglob("local_server.log"))  # no server was started


@pytest.mark.workflow
def test_missing_model_path_stops_the_run_at_dag_load(tmp_path, workflow_factory):
    missing = tmp_path / "gone.gguf"
    wf = workflow_factory(local_config(tmp_path, model_path=str(missing)))
    _one_line_failure(wf, f"llm.local.model_path: {missing} does not exist")


@pytest.mark.workflow
def test_checksum_mismatch_stops_the_run_before_any_job(tmp_path, workflow_factory):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + os.urandom(1000))
    wf = workflow_factory(local_config(tmp_path, model_path=str(gguf), sha256="0" * 64))
    _one_line_failure(wf, "llm.local.sha256: ")


def _model_installed() -> bool:
    if importlib.util.find_spec("xllamacpp") is None:
        return False
    try:
        local_model.part_files(local_model.PACKS["qwen2.5-coder-0.5b"])
    except LocalModelError:
        return False
    return True


class Verdict(BaseModel):
    label: Literal["same", "different"]
    reason: str = Field(max_length=80)


@pytest.mark.local_model
@pytest.mark.skipif(not _model_installed(), reason="model packages not installed (.[model])")
def test_real_server_gives_a_schema_valid_reply_through_our_client(tmp_path, monkeypatch):
    monkeypatch.delenv(local_server.BASE_URL_ENV, raising=False)
    monkeypatch.delenv(local_server.MODEL_ID_ENV, raising=False)
    raw = {
        "n_users": 1,
        "systems": ["nomem"],
        "llm": {
            "backend": "local",
            "model": "qwen2.5-coder-0.5b",
            "max_tokens": 60,
            "cache_dir": str(tmp_path / ".cache" / "llm"),
            "local": {"context_tokens": 1024},
        },
    }
    cfg = load_config(raw)
    base_url = local_server.start_for_run(cfg, log_path=tmp_path / "server.log")
    try:
        server = local_server._run_server
        assert server is not None and server.proc is not None
        env = Path(f"/proc/{server.proc.pid}/environ").read_bytes().split(b"\0")
        assert b"OMP_WAIT_POLICY=PASSIVE" in env
        assert local_server.state_path(cfg).is_file()
        ledger = tmp_path / "usage.csv"
        llm = client_for("judge", cfg, ledger_path=ledger, job="smoke")
        assert llm.base_url == base_url and llm.temperature == 0.0
        msgs = [
            {"role": "system", "content": "Compare two facts. Reply in JSON."},
            {"role": "user", "content": "A: Paris is in France.\nB: Paris is in Japan."},
        ]
        verdict = llm.json(msgs, Verdict)
        assert verdict.label in ("same", "different")
        rows = list(csv.DictReader(ledger.open()))
        assert rows and all(r["role"] == "judge" and r["cached"] == "false" for r in rows)
        assert rows[0]["model"] == "qwen2.5-coder-0.5b" and int(rows[0]["prompt_tokens"]) > 0
        _assert_locked_down(server, base_url, cfg)
        pid = server.proc.pid
    finally:
        local_server.stop_for_run(cfg)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the server process is gone
    assert local_server.BASE_URL_ENV not in os.environ
    assert not local_server.state_path(cfg).exists()


def _assert_locked_down(server, base_url: str, cfg) -> None:
    """Issue 16: the run's key is required, foreign origins get no CORS grant, no /slots,
    and the key is in no argv and no state file."""
    import urllib.request

    models = base_url + "/models"
    assert served_process.status(models) == 401
    assert served_process.status(models, {"Authorization": "Bearer wrong"}) == 401
    assert served_process.status(models, {"Authorization": f"Bearer {server.key}"}) == 200
    root = base_url.removesuffix("/v1")
    slots = served_process.status(root + "/slots", {"Authorization": f"Bearer {server.key}"})
    assert slots != 200
    preflight = urllib.request.Request(
        base_url + "/chat/completions",
        method="OPTIONS",
        headers={
            "Origin": "http://evil.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type",
        },
    )
    with served_process.open_direct(preflight, timeout=10) as resp:
        allowed = resp.headers.get("Access-Control-Allow-Origin")
        credentials = resp.headers.get("Access-Control-Allow-Credentials")
    assert allowed not in ("*", "http://evil.example") and credentials != "true"
    cmdline = Path(f"/proc/{server.proc.pid}/cmdline").read_bytes()
    assert server.key.encode() not in cmdline
    assert server.key not in local_server.state_path(cfg).read_text()
    assert os.environ[local_server.KEY_ENV] == server.key  # how the jobs learn it


FAKE_LLAMA = Path(__file__).resolve().parent / "fake_llama"


def fake_llama_run(tmp_path: Path, workflow_factory, fail: bool):
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF" + bytes(60))
    sha = hashlib.sha256(gguf.read_bytes()).hexdigest()
    raw = local_config(tmp_path, model_path=str(gguf), sha256=sha, startup_timeout_s=60)
    raw["llm"] |= {"max_attempts": 1, "backoff_s": 0.0}
    wf = workflow_factory(raw)
    log = tmp_path / "fake_llama.log"
    env = {
        "PYTHONPATH": str(FAKE_LLAMA),
        "MEMPROBE_FAKE_LLAMA": str(log),
        "MEMPROBE_FAKE_LLAMA_FAIL": "1" if fail else "0",
        local_server.BASE_URL_ENV: "",
    }
    proc = wf.run("tables", check=False, env=env)
    lines = log.read_text().split("\n") if log.exists() else []
    starts = [int(x.split()[1]) for x in lines if x.startswith("start ")]
    calls = [x for x in lines if x.startswith("call ")]
    state = wf.root / local_server.state_path(load_config(raw))
    return wf, proc, starts, calls, state


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.workflow
def test_a_local_run_serves_every_job_from_one_server_and_stops_it(tmp_path, workflow_factory):
    wf, proc, starts, calls, state = fake_llama_run(tmp_path, workflow_factory, fail=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (wf.results / "table2.csv").exists()
    assert len(starts) == 1  # one server for the whole run (onstart), not one per job
    assert len(calls) >= 5 and {c.split()[1] for c in calls} == {str(starts[0])}
    assert "memprobe: local model ready at http://127.0.0.1:" in proc.stderr
    # onsuccess: the server is stopped and its state file removed
    assert not state.exists()
    assert _gone(starts[0])
    # the run's key never lands in an artifact or a log
    key_lines = [ln for ln in proc.stderr.splitlines() if "Bearer" in ln]
    assert not key_lines


@pytest.mark.workflow
def test_a_failed_local_run_stops_its_server_too(tmp_path, workflow_factory):
    wf, proc, starts, calls, state = fake_llama_run(tmp_path, workflow_factory, fail=True)
    assert proc.returncode != 0
    assert len(starts) == 1 and calls  # the jobs reached it, and failed
    assert not state.exists()  # onerror
    assert _gone(starts[0])


def test_local_server_key_is_in_no_argv_and_no_state_file(tmp_path):
    from memprobe.serving import local_server
    from memprobe.serving.local_model import LocalModel

    server = local_server.Server(
        local_model.ResolvedModel(tmp_path / "m.gguf", None), LocalModel(), tmp_path / "log"
    )
    assert server.key and server.key not in " ".join(server.command(5))
    assert "--port" not in server.command(5)  # the child binds a port itself


def test_the_default_run_serves_one_slot_per_conversation_with_chunk_reuse(tmp_path):
    """config/config.yaml: the README's jobs at once (--cores) x (simulator, assistant)
    conversations in flight, each kept in its own llama.cpp slot, which reuses moved chunks of
    its last prompt."""
    import re

    from memprobe.serving import local_server

    main = re.search(r"&& snakemake --cores (\d+) &&", (ROOT / "README.md").read_text())
    assert main, "README.md: no main command with --cores"
    local = load_config(yaml.safe_load((ROOT / "config" / "config.yaml").read_text())).llm.local
    server = local_server.Server(
        local_model.ResolvedModel(tmp_path / "m.gguf", None), local, tmp_path / "log"
    )
    command = server.command(5)
    assert command[command.index("--parallel") + 1] == str(2 * int(main[1]))
    assert command[command.index("--cache-reuse") + 1] == "256"


# `memprobe local-server` with a stand-in for llama.cpp: a child that ignores SIGTERM, so that
# stopping it takes the whole grace period (the window a second signal used to cut short).
FOREGROUND = """
import os, signal, subprocess, sys, time
from pathlib import Path
from memprobe.serving import local_model
from memprobe.serving.local_model import LocalModel
from memprobe.serving import local_server

STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"

def start(self):
    self.proc = subprocess.Popen([sys.executable, "-c", STUBBORN], start_new_session=True)
    self.grace_s = 2.0
    return "http://127.0.0.1:1/v1"

local_server.Server.start = start
local_server.resolve_model = lambda local: local_model.ResolvedModel(Path("/m.gguf"), "ab" * 32)
if sys.argv[1] == "planted":
    cache = local_server.model_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    (cache / f"local-server-{os.getpid()}.env").symlink_to(cache / "planted-target")
cfg = type("Cfg", (), {"llm": type("LLM", (), {"local": LocalModel()})})()
local_server.run_foreground(cfg, log_path=local_server.model_cache_dir() / "log")
"""


@pytest.mark.parametrize(
    "case,signals",
    [
        ("sighup", [signal.SIGHUP]),  # the terminal closed
        ("sigquit", [signal.SIGQUIT]),  # Ctrl-\ in the terminal
        ("second-signal", [signal.SIGTERM, signal.SIGTERM, signal.SIGINT]),  # while stopping
        ("planted", [signal.SIGTERM]),  # a link waits where the key's file goes
    ],
)
def test_the_key_file_is_private_and_outlives_no_stop(tmp_path, case, signals):
    env = {**os.environ, "MEMPROBE_MODEL_CACHE": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", FOREGROUND, case.split("-")[0]],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    line = proc.stdout.readline()  # type: ignore[union-attr]
    assert line.startswith(". "), proc.stderr.read()  # type: ignore[union-attr]
    key_file = Path(line[2:].strip())
    assert key_file.stat().st_mode & 0o777 == 0o600 and not key_file.is_symlink()
    assert "MEMPROBE_LOCAL_API_KEY=" in key_file.read_text()
    time.sleep(1.0)  # the stand-in server ignores SIGTERM by now: stopping takes its grace
    for sig in signals:
        proc.send_signal(sig)
        time.sleep(0.3)
    assert proc.wait(timeout=30) == 0
    assert not key_file.exists() and not key_file.is_symlink()
    assert not (tmp_path / "planted-target").exists()  # the key never went through the link


def test_the_servers_threads_sleep_at_once_unless_a_spin_is_configured():
    # A spinning OpenMP thread beside a busy process drops decoding to 2 tokens/s (measured):
    # sleeping at once is the default, a bounded spin only when asked for.
    assert local_server.wait_env(LocalModel()) == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert local_server.wait_env(LocalModel(spin_count=10000)) == {
        "OMP_WAIT_POLICY": "ACTIVE",
        "GOMP_SPINCOUNT": "10000",
    }
