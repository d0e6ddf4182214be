"""Issue 16: a failed reply is never replayed, keys go only where meant, every paid call is
on the bill, servers prove they are ours. Each test names the item of the issue it covers."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memprobe.config import ConfigError, check_yaml_keys, load_config
from memprobe.llm.client import LLMError, _strip_fence, client_for, redact
from memprobe.protocol import records
from memprobe.serving import served_process, vllm_server
from memprobe.testing.memt_standin import StandIn, make_server
from tests.conftest import tiny_config
from tests.llm.test_llm import Recorder, Verdict, ledger, make_llm

MSGS = [{"role": "user", "content": "rate it"}]
GOOD = '{"verdict": "a", "score": 1}'
SENTINEL = "sk-sentinel-openai-0123456789"


@pytest.fixture
def endpoint_of():
    """A loopback endpoint answering the given items (tests/llm/test_llm.py's Recorder)."""
    made: list[Recorder] = []

    def make(items, delay_s=0.0):
        made.append(Recorder(items, delay_s))
        return made[-1]

    yield make
    for r in made:
        r.close()


# -- 1. a failed chain leaves nothing to replay; a good chain replays as it was ---------------
def test_a_chain_that_succeeded_after_a_reask_replays_exactly(endpoint_of, tmp_path):
    rec = endpoint_of(['{"verdict": 1}', GOOD], 0.0)
    first = make_llm(rec.base_url, tmp_path, resample_invalid=0).json(MSGS, Verdict)
    again = make_llm(rec.base_url, tmp_path, resample_invalid=0).json(MSGS, Verdict)
    assert first == again == Verdict(verdict="a", score=1)
    assert len(rec.bodies) == 2  # the rerun replayed both steps of the chain, paid nothing


def test_a_chain_rejected_by_check_leaves_no_entry(endpoint_of, tmp_path):
    rec = endpoint_of([GOOD, GOOD, GOOD, '{"verdict": "b", "score": 2}'])

    def check(v):
        if v.verdict == "a":
            raise ValueError("duplicate dimension")

    llm = make_llm(rec.base_url, tmp_path, resample_invalid=0, max_reasks=2)
    with pytest.raises(LLMError, match="duplicate dimension"):
        llm.json(MSGS, Verdict, check=check)
    assert not list((tmp_path / "cache").rglob("*.json"))
    assert llm.json(MSGS, Verdict, check=lambda v: None) == Verdict(verdict="b", score=2)


# -- 4. keys go only to the endpoints configured for them ------------------------------------
def test_a_role_with_its_own_base_url_never_gets_the_default_key(
    endpoint_of, tmp_path, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    main, other = endpoint_of([GOOD]), endpoint_of([GOOD])
    raw = tiny_config(main.base_url)
    raw["llm"].update(api_key_env="OPENAI_API_KEY", cache_dir=str(tmp_path / "c"))
    raw["llm"]["roles"] = {"judge": {"base_url": other.base_url}}
    cfg = load_config(raw)
    client_for("judge", cfg).json(MSGS, Verdict)
    client_for("critic", cfg).json(MSGS, Verdict)
    assert other.auth and not any(SENTINEL in a for a in other.auth)
    assert main.auth == [f"Bearer {SENTINEL}"]  # the default endpoint still gets its key


def test_a_key_is_never_sent_over_plain_http_to_another_host(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMPROBE_TEST_KEY", SENTINEL)
    llm = make_llm("http://10.255.255.1:8000/v1", tmp_path)
    with pytest.raises(LLMError, match="plain http") as err:
        llm.text(MSGS)
    assert SENTINEL not in str(err.value)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://x/v1", "http:///v1", "nohost"])
def test_endpoint_urls_must_be_http_with_a_host(url):
    raw = tiny_config(url)
    with pytest.raises(ConfigError, match="llm.base_url"):
        load_config(raw)
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["memt"], memt={"endpoint": url})
    with pytest.raises(ConfigError, match="memt.endpoint"):
        load_config(raw)


# -- 5. loopback traffic ignores proxy settings ----------------------------------------------
def test_loopback_calls_ignore_a_proxy(endpoint_of, tmp_path, monkeypatch):
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")  # nothing listens: via it, all fail
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    rec = endpoint_of([GOOD])
    assert make_llm(rec.base_url, tmp_path, max_attempts=1).json(MSGS, Verdict)
    standin = StandIn()
    try:
        served_process.wait_healthy(None, standin.base_url, timeout_s=3, poll_s=0.1)
    finally:
        standin.close()


# -- 3. a server proves it is ours; 2. the vLLM server gets the run's key --------------------
def test_a_port_squatter_that_accepts_any_key_is_refused():
    squatter = StandIn()  # answers every request, with or without a key
    try:
        with pytest.raises(served_process.NotOurs, match="another server"):
            served_process.prove_ours(squatter.base_url, "the-runs-key")
    finally:
        squatter.close()


def test_vllm_on_a_port_another_server_holds_fails_in_one_line(tmp_path):
    from tests.agents.test_memt import SERVE_STANDIN, fake_vllm, serve_settings

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
    from tests.agents.test_memt import fake_vllm, serve_settings

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


@pytest.mark.parametrize("arg", ["--host", "--host=0.0.0.0", "--api-key"])
def test_vllm_args_cannot_override_host_or_key(arg):
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["memt"])
    raw["memt"] = {"serve": True, "model_path": "/m", "vllm_args": [arg, "0.0.0.0"]}
    with pytest.raises(ConfigError, match="memt.vllm_args"):
        load_config(raw)


# -- 6. the cache identity of a served model is its weights ----------------------------------
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


def test_a_local_server_url_without_a_model_id_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMPROBE_LOCAL_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.delenv("MEMPROBE_LOCAL_MODEL_ID", raising=False)
    raw = tiny_config("http://127.0.0.1:9/v1")
    raw["llm"] = {"backend": "local", "cache_dir": str(tmp_path / "c")}
    with pytest.raises(LLMError, match="MEMPROBE_LOCAL_MODEL_ID") as err:
        client_for("judge", load_config(raw))
    assert "\n" not in str(err.value)


# -- 7. every paid reply is on the bill ------------------------------------------------------
def test_an_empty_reply_with_usage_is_on_the_ledger(endpoint_of, tmp_path):
    rec = endpoint_of([{"content": "", "finish_reason": "length"}, "hello"])
    assert make_llm(rec.base_url, tmp_path).text(MSGS) == "hello"
    rows = ledger(tmp_path)
    assert [(r["status"], r["finish_reason"]) for r in rows] == [
        ("empty", "length"),
        ("ok", "stop"),
    ]
    assert all(r["prompt_tokens"] == "11" for r in rows)


def test_a_failed_cache_write_is_on_the_ledger_and_fails_in_one_line(endpoint_of, tmp_path):
    rec = endpoint_of(["hello"])
    (tmp_path / "cache").write_text("")  # the cache dir is a file: every write fails
    llm = make_llm(rec.base_url, tmp_path)
    with pytest.raises(LLMError, match="response cache") as err:
        llm.text(MSGS)
    assert "\n" not in str(err.value)
    assert [r["status"] for r in ledger(tmp_path)] == ["ok"]


def test_a_reply_ending_in_a_lone_surrogate_is_cached_and_replayed(tmp_path):
    # The Recorder sends JSON, which can carry a lone surrogate escape (an emoji cut in two).
    rec_reply = {"content": "cut emoji \ud83d", "finish_reason": "length"}
    rec = Recorder([rec_reply])
    try:
        first = make_llm(rec.base_url, tmp_path).text(MSGS)
        again = make_llm(rec.base_url, tmp_path).text(MSGS)
    finally:
        rec.close()
    assert first == again == "cut emoji \ufffd" and len(rec.bodies) == 1


# -- 8. finish_reason: length --------------------------------------------------------------
def test_a_cut_free_text_reply_is_recorded_as_length(endpoint_of, tmp_path):
    rec = endpoint_of([{"content": "a long answ", "finish_reason": "length"}])
    assert make_llm(rec.base_url, tmp_path).text(MSGS) == "a long answ"
    assert [(r["status"], r["finish_reason"]) for r in ledger(tmp_path)] == [("ok", "length")]


def test_a_cut_structured_reply_is_asked_again_with_a_higher_limit(endpoint_of, tmp_path):
    rec = endpoint_of([{"content": '{"verdict": "a", "sc', "finish_reason": "length"}, GOOD])
    llm = make_llm(rec.base_url, tmp_path, max_tokens=50)
    assert llm.json(MSGS, Verdict) == Verdict(verdict="a", score=1)
    assert [b["max_tokens"] for b in rec.bodies] == [50, 100]
    assert [r["status"] for r in ledger(tmp_path)] == ["cut", "ok"]
    # cached under the request as configured: the rerun replays it without a call
    assert make_llm(rec.base_url, tmp_path, max_tokens=50).json(MSGS, Verdict)
    assert len(rec.bodies) == 2


def test_a_structured_reply_cut_without_a_limit_fails_naming_max_tokens(endpoint_of, tmp_path):
    rec = endpoint_of([{"content": '{"verdict": "a", "sc', "finish_reason": "length"}])
    with pytest.raises(LLMError, match="max_tokens") as err:
        make_llm(rec.base_url, tmp_path).json(MSGS, Verdict)
    assert "\n" not in str(err.value) and len(rec.bodies) == 1


# -- 9. the smaller ones -------------------------------------------------------------------
@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_a_nonsense_retry_after_falls_back_to_backoff(endpoint_of, tmp_path, value):
    rec = endpoint_of([{"content": "", "code": 429, "headers": {"Retry-After": value}}, "ok"])
    assert make_llm(rec.base_url, tmp_path, backoff_s=0.01).text(MSGS) == "ok"


@pytest.mark.parametrize("code", [403, 404, 422])
def test_client_errors_are_not_retried(endpoint_of, tmp_path, code):
    rec = endpoint_of([{"content": "", "code": code}, "ok"])
    with pytest.raises(LLMError, match="rejected"):
        make_llm(rec.base_url, tmp_path, max_attempts=3, backoff_s=0.01).text(MSGS)
    assert len(rec.bodies) == 1


@pytest.mark.parametrize("code", [408, 409])
def test_transient_client_errors_are_retried(endpoint_of, tmp_path, code):
    rec = endpoint_of([{"content": "", "code": code}, "ok"])
    assert make_llm(rec.base_url, tmp_path, max_attempts=3, backoff_s=0.01).text(MSGS) == "ok"


def test_a_server_that_drips_its_reply_is_cut_off_at_the_timeout(tmp_path):
    class Drip(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            try:
                for _ in range(200):  # one byte every 0.1 s: each read is quick, the whole slow
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Drip)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        llm = make_llm(url, tmp_path, timeout_s=1.0, max_attempts=1)
        t0 = time.monotonic()
        with pytest.raises(LLMError):
            llm.text(MSGS)
        assert time.monotonic() - t0 < 3.0
    finally:
        server.shutdown()
        server.server_close()


def test_fence_stripping_is_linear_on_long_whitespace():
    text = "```json\n" + " \n" * 50_000 + "x"
    t0 = time.monotonic()
    _strip_fence(text)
    assert time.monotonic() - t0 < 0.5
    assert _strip_fence('```json\n{"a": 1}\n```') == '{"a": 1}'


def test_release_system_names_must_be_safe_path_parts():
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["../../x"])
    raw["users"] = {"source": "release", "release_dir": "/tmp"}
    raw["release"] = {"import_runs": True}
    with pytest.raises(ConfigError, match="system name"):
        load_config(raw)


def test_release_paths_must_stay_inside_the_release_dir(tmp_path):
    from memprobe.protocol.records import RecordError
    from memprobe.release.importer import check_layout

    rel = tmp_path / "release"
    rel.mkdir()
    (tmp_path / "outside.json").write_text("{}")
    raw = tiny_config("http://127.0.0.1:9/v1")
    raw["users"] = {"source": "release", "release_dir": str(rel)}
    raw["release"] = {"bank_file": "../outside.json", "tasks_dir": "."}
    with pytest.raises(RecordError, match="outside users.release_dir"):
        check_layout(load_config(raw))
    (rel / "bank.json").symlink_to(tmp_path / "outside.json")
    raw["release"] = {"bank_file": "bank.json", "tasks_dir": "."}
    with pytest.raises(RecordError, match="outside users.release_dir"):
        check_layout(load_config(raw))


@pytest.mark.parametrize("kind", ["latin1", "directory", "deep"])
def test_unreadable_json_inputs_fail_in_one_line_naming_the_file(tmp_path, kind):
    path = tmp_path / "in.json"
    if kind == "latin1":
        path.write_bytes('{"name": "Jos\xe9"}'.encode("latin-1"))
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(records.RecordError) as err:
        records.read_json(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_nan_scores_are_refused(tmp_path):
    entry = {f: "x" for f in records.JudgeEntry.model_fields} | {"score": "NaN"}
    path = tmp_path / "judge_entry.json"
    path.write_text(json.dumps(entry).replace('"NaN"', "NaN"))  # json.load reads bare NaN
    with pytest.raises(records.RecordError, match="score"):
        records.load(path, records.JudgeEntry)


def test_duplicate_yaml_keys_are_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("n_users: 1\nllm:\n  backend: fake\n  backend: openai\n")
    with pytest.raises(ConfigError, match="line 4: key 'backend' appears twice"):
        check_yaml_keys([path])


@pytest.mark.parametrize("key,value", [("k", [5, 5]), ("modes", ["retrieve", "retrieve"])])
def test_repeated_k_or_modes_are_refused(key, value):
    with pytest.raises(ConfigError, match="twice"):
        load_config(tiny_config("http://127.0.0.1:9/v1", **{key: value}))


def test_children_never_inherit_secrets(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    env = served_process.child_env(OMP_WAIT_POLICY="PASSIVE")
    assert "OPENAI_API_KEY" not in env and "HF_TOKEN" not in env
    assert env["OMP_WAIT_POLICY"] == "PASSIVE" and env["PATH"] == os.environ["PATH"]


def test_url_credentials_are_redacted():
    assert redact("no reply from https://bob:hunter2@proxy.example/v1") == (
        "no reply from https://***@proxy.example/v1"
    )


def test_artifacts_follow_the_umask(tmp_path):
    records.write_atomic(tmp_path / "a.json", {"x": 1})
    mode = stat.S_IMODE((tmp_path / "a.json").stat().st_mode)
    assert mode == 0o666 & ~records._UMASK


def test_local_server_key_is_in_no_argv_and_no_state_file(tmp_path):
    from memprobe.config import LocalModel
    from memprobe.serving import local_server

    server = local_server.Server(
        local_server.ResolvedModel(tmp_path / "m.gguf", None), LocalModel(), tmp_path / "log"
    )
    assert server.key and server.key not in " ".join(server.command(5))
    assert "--port" not in server.command(5)  # the child binds a port itself


def test_the_local_backend_refuses_a_cluster_executor():
    from memprobe.serving import local_server

    raw = tiny_config("http://127.0.0.1:9/v1")
    raw["llm"] = {"backend": "local"}
    cfg = load_config(raw)
    local_server.check_executor(cfg, non_local_exec=False)
    with pytest.raises(local_server.LocalModelError, match="cluster executor"):
        local_server.check_executor(cfg, non_local_exec=True)
