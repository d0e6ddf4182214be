"""The LLM layer through the real openai client against a loopback endpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memprobe.config.loading import load_config
from memprobe.llm.cache import ResponseCache
from memprobe.llm.client import ATTEMPT_STRIDE, LLMError, client_for, redact
from memprobe.llm.salvage import Exhausted
from memprobe.serving import served_process
from memprobe.testing.memt_standin import StandIn
from tests.helpers.endpoint import Drip
from tests.helpers.llm import Recorder, Verdict, ledger, make_llm, run_python
from tests.helpers.workflow import tiny_config


def test_structured_request_carries_the_schema_named_after_the_role(recorder_factory, tmp_path):
    rec = recorder_factory(['{"verdict": "ok", "score": 3}'])
    llm = make_llm(rec.base_url, tmp_path, role="critic")
    out = llm.json([{"role": "user", "content": "hi"}], Verdict)
    assert out == Verdict(verdict="ok", score=3)
    fmt = rec.bodies[0]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "critic"
    assert fmt["json_schema"]["schema"]["properties"]["score"]["type"] == "integer"
    assert rec.bodies[0]["temperature"] == 0.0  # the critic's release temperature


def test_invalid_reply_is_reasked_then_accepted(recorder_factory, tmp_path):
    rec = recorder_factory(['{"verdict": "ok"}', "not json", '{"verdict": "ok", "score": 1}'])
    llm = make_llm(rec.base_url, tmp_path, max_reasks=2, resample_invalid=0)
    assert llm.json([{"role": "user", "content": "hi"}], Verdict).score == 1
    assert len(rec.bodies) == 3
    # Each re-ask shows the model its bad reply and what was wrong with it.
    assert rec.bodies[1]["messages"][-2]["content"] == '{"verdict": "ok"}'
    assert "score" in rec.bodies[1]["messages"][-1]["content"]
    assert [r["reask"] for r in ledger(tmp_path)] == ["0", "1", "2"]


def test_invalid_reply_is_first_resampled_with_the_identical_request(recorder_factory, tmp_path):
    rec = recorder_factory(["{truncated", '{"verdict": "ok", "score": 2}'])
    llm = make_llm(rec.base_url, tmp_path, resample_invalid=1)
    assert llm.json([{"role": "user", "content": "hi"}], Verdict).score == 2
    assert rec.bodies[0] == rec.bodies[1]


def test_reask_budget_ends_in_a_loud_error_with_the_raw_reply(recorder_factory, tmp_path):
    rec = recorder_factory(["nope", "still nope"])
    llm = make_llm(rec.base_url, tmp_path, max_reasks=1, resample_invalid=0)
    with pytest.raises(LLMError) as err:
        llm.json([{"role": "user", "content": "hi"}], Verdict, where="user user_001, x")
    msg = str(err.value)
    assert "role judge (user user_001, x)" in msg and "still nope" in msg and "\n" not in msg


def test_spent_re_asks_go_to_the_stage_s_stand_in_whose_replay_is_the_same(
    recorder_factory, tmp_path
):
    rec = recorder_factory(["nope", '{"verdict": "far too long a verdict here", "score": 2}'])
    seen: list[Exhausted] = []

    def stand_in(spent: Exhausted) -> Verdict:
        seen.append(spent)
        return Verdict(verdict="stand-in", score=0)

    msgs = [{"role": "user", "content": "hi"}]
    llm = make_llm(rec.base_url, tmp_path, max_reasks=1, resample_invalid=0)
    assert llm.json(msgs, Verdict, where="w", stand_in=stand_in) == Verdict(
        verdict="stand-in", score=0
    )
    [spent] = seen
    assert spent.replies == ["nope", '{"verdict": "far too long a verdict here", "score": 2}']
    assert spent.problem.startswith("verdict: String should have at most 20 characters")
    assert (spent.role, spent.where) == ("judge", "w")
    # The chain stays cached: a replay (a new job on the same cache) stands in the same way
    # without a call; without a stand-in function the chain is dropped and the call fails.
    again = make_llm(rec.base_url, tmp_path, max_reasks=1, resample_invalid=0)
    assert again.json(msgs, Verdict, stand_in=stand_in).verdict == "stand-in"
    assert len(rec.bodies) == 2 and len(seen) == 2 and seen[1].replies == spent.replies


def test_a_failed_chain_without_a_stand_in_is_dropped_from_the_cache(recorder_factory, tmp_path):
    rec = recorder_factory(["nope", "still nope", '{"verdict": "ok", "score": 1}'])
    msgs = [{"role": "user", "content": "hi"}]
    llm = make_llm(rec.base_url, tmp_path, max_reasks=1, resample_invalid=0)
    with pytest.raises(LLMError):
        llm.json(msgs, Verdict)
    assert llm.json(msgs, Verdict).score == 1  # asked again, not replayed
    assert len(rec.bodies) == 3


def test_a_later_attempt_replays_what_earlier_ones_got_and_samples_the_rest_anew(
    recorder_factory, tmp_path
):
    rec = recorder_factory(['{"verdict": "a", "score": 1}', '{"verdict": "b", "score": 2}'])
    raw = tiny_config(rec.base_url)
    raw["llm"]["cache_dir"] = str(tmp_path / "cache")
    cfg = load_config(raw)
    first = client_for("judge", cfg, ledger_path=tmp_path / "ledger.csv", attempt=0)
    second = client_for("judge", cfg, ledger_path=tmp_path / "ledger.csv", attempt=2)
    asked = [{"role": "user", "content": "answered at attempt 0"}]
    assert first.json(asked, Verdict).verdict == "a"
    assert second.json(asked, Verdict).verdict == "a"  # replayed: no request
    assert second.json([{"role": "user", "content": "new"}], Verdict).verdict == "b"
    assert [b["seed"] for b in rec.bodies] == [7, 7 + 2 * ATTEMPT_STRIDE]


def test_cache_replays_without_a_call_and_ledger_says_so(recorder_factory, tmp_path):
    rec = recorder_factory(['{"verdict": "a", "score": 1}'])
    llm = make_llm(rec.base_url, tmp_path)
    msgs = [{"role": "user", "content": "same"}]
    first = llm.json(msgs, Verdict)
    again = make_llm(rec.base_url, tmp_path).json(msgs, Verdict)  # a new job, same cache
    assert first == again
    assert len(rec.bodies) == 1
    rows = ledger(tmp_path)
    assert [r["cached"] for r in rows] == ["false", "true"]
    assert rows[0]["prompt_tokens"] == "11" and rows[0]["completion_tokens"] == "3"


def test_identical_requests_in_flight_together_are_paid_once(recorder_factory, tmp_path):
    # Two jobs (own clients, shared cache) send the same request while the endpoint is slow:
    # the second waits for the first's reply and replays it.
    rec = recorder_factory(['{"verdict": "a", "score": 1}', '{"verdict": "b", "score": 2}'], 1.0)
    msgs = [{"role": "user", "content": "same"}]
    llms = [make_llm(rec.base_url, tmp_path) for _ in range(2)]
    for llm in llms:
        llm.client  # noqa: B018  built up front so both threads reach the request together
    out: list = [None, None]

    def ask(i):
        out[i] = llms[i].json(msgs, Verdict)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out[0] == out[1] == Verdict(verdict="a", score=1)
    assert len(rec.bodies) == 1
    assert sorted(r["cached"] for r in ledger(tmp_path)) == ["false", "true"]


def test_a_killed_sender_does_not_block_the_resume(recorder_factory, tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from memprobe.llm.cache import ResponseCache\n"
            "with ResponseCache(sys.argv[1]).inflight('ab' * 32, wait_s=60):\n"
            "    print('held', flush=True); time.sleep(60)\n",
            str(tmp_path / "cache"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()

    start = time.monotonic()
    with ResponseCache(tmp_path / "cache").inflight("ab" * 32, wait_s=60):
        pass
    assert time.monotonic() - start < 1.0


def test_sample_index_keeps_repeated_samples_distinct(recorder_factory, tmp_path):
    rec = recorder_factory(["one", "two"])
    llm = make_llm(rec.base_url, tmp_path, role="simulator")
    msgs = [{"role": "user", "content": "same"}]
    assert llm.text(msgs, sample=0) == "one"
    assert llm.text(msgs, sample=1) == "two"
    assert llm.text(msgs, sample=0) == "one"  # cached
    assert len(rec.bodies) == 2


def test_api_key_is_sent_but_never_stored(recorder_factory, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMPROBE_TEST_KEY", "sk-sentinel-123456")
    rec = recorder_factory(['{"verdict": "a", "score": 1}'])
    llm = make_llm(rec.base_url, tmp_path)
    llm.json([{"role": "user", "content": "k"}], Verdict)
    stored = [p.read_text() for p in tmp_path.rglob("*") if p.is_file()]
    assert stored and not any("sk-sentinel-123456" in s for s in stored)


MSGS = [{"role": "user", "content": "rate it"}]

GOOD = '{"verdict": "a", "score": 1}'

SENTINEL = "sk-sentinel-openai-0123456789"


@pytest.fixture
def endpoint_of():
    """A loopback endpoint answering the given items (tests/helpers/llm.py's Recorder)."""
    made: list[Recorder] = []

    def make(items, delay_s=0.0):
        made.append(Recorder(items, delay_s))
        return made[-1]

    yield make
    for r in made:
        r.close()


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


@pytest.mark.parametrize(
    "ending",
    [
        {"content": "", "code": 422},  # the re-ask is rejected
        {"content": "", "code": 500},  # retries spent
        {"content": '{"verdict": "a", "sc', "finish_reason": "length"},  # cut, no limit to raise
    ],
)
def test_a_chain_that_ends_in_an_exception_leaves_no_entry(endpoint_of, tmp_path, ending):
    rec = endpoint_of(['{"verdict": 1}', ending, GOOD])  # step 0 paid (off schema), then fails
    llm = make_llm(rec.base_url, tmp_path, resample_invalid=0, max_attempts=1)
    with pytest.raises(LLMError):
        llm.json(MSGS, Verdict)
    assert len(rec.bodies) == 2
    assert not list((tmp_path / "cache").rglob("*.json"))  # the rerun asks step 0 again


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


def test_a_cut_free_text_reply_is_recorded_as_length(endpoint_of, tmp_path):
    rec = endpoint_of([{"content": "a long answ", "finish_reason": "length"}])
    assert make_llm(rec.base_url, tmp_path).text(MSGS) == "a long answ"
    assert [(r["status"], r["finish_reason"]) for r in ledger(tmp_path)] == [("ok", "length")]


@pytest.mark.parametrize("reason", ["error", "content_filter"])
def test_a_reply_that_did_not_finish_is_billed_asked_again_and_never_cached(
    endpoint_of, tmp_path, reason
):
    """Issue 42: a free-text reply the endpoint ended with an error or a content filter is no
    answer: caching it would replay the broken text in every later run."""
    rec = endpoint_of([{"content": "half an ans", "finish_reason": reason}, "whole"])
    assert make_llm(rec.base_url, tmp_path, backoff_s=0.0).text(MSGS) == "whole"
    assert [(r["status"], r["finish_reason"]) for r in ledger(tmp_path)] == [
        ("unfinished", reason),
        ("ok", "stop"),
    ]
    rec = endpoint_of([{"content": "half an ans", "finish_reason": reason}] * 2)
    llm = make_llm(rec.base_url, tmp_path, max_attempts=2, backoff_s=0.0)
    with pytest.raises(LLMError, match=f"finish_reason {reason}"):
        llm.text([{"role": "user", "content": "another question"}])
    cached = [p for p in (tmp_path / "cache").rglob("*.json")]
    assert len(cached) == 1  # the first question's whole reply only


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


@pytest.mark.parametrize("part", ["body", "headers"])
def test_a_server_that_drips_its_reply_is_cut_off_at_the_timeout(tmp_path, part):
    # The client's calls run under memprobe/llm/deadline.py's budget (tests/llm/test_deadline.py):
    # the headers count too (they held a call 5.7 s past a 0.5 s timeout; issue 27).
    server = Drip(part)
    try:
        llm = make_llm(server.base_url, tmp_path, timeout_s=1.0, max_attempts=1)
        llm.client  # noqa: B018  built (openai imported) before the clock starts
        t0 = time.monotonic()
        with pytest.raises(LLMError, match="timed out|Timeout"):
            llm.text(MSGS)
        assert time.monotonic() - t0 < 2.0
    finally:
        server.close()


def test_url_credentials_are_redacted():
    assert redact("no reply from https://bob:hunter2@proxy.example/v1") == (
        "no reply from https://***@proxy.example/v1"
    )


def test_paid_calls_go_through_openai_and_replays_never_import_it(tmp_path):
    # A paid call is sent by the openai package's client; openai's import (~0.35 s of CPU)
    # is paid only by a job that sends: one whose calls all replay from the cache never loads it.
    code = """
        import sys
        from pydantic import BaseModel
        from memprobe.config.loading import load_config
        from memprobe.llm.client import client_for

        class V(BaseModel):
            verdict: str

        cfg = load_config({"n_users": 1, "systems": ["nomem"], "llm": {"backend": "fake",
                           "cache_dir": sys.argv[1]}})
        client_for("judge", cfg).json([{"role": "user", "content": "x"}], V)
        print("openai" in sys.modules)
        """
    paid = run_python(code, str(tmp_path / "cache"))
    replayed = run_python(code, str(tmp_path / "cache"))
    assert paid.returncode == 0 and replayed.returncode == 0, paid.stderr + replayed.stderr
    assert (paid.stdout.strip(), replayed.stdout.strip()) == ("True", "False")


def test_roles_on_one_endpoint_share_one_client(recorder_factory, tmp_path):
    rec = recorder_factory(['{"verdict": "a", "score": 1}', "hello"])
    judge = make_llm(rec.base_url, tmp_path, role="judge")
    critic = make_llm(rec.base_url, tmp_path, role="critic")
    judge.json(MSGS, Verdict)
    critic.text([{"role": "user", "content": "other"}])
    assert judge.provider is critic.provider and judge.client is critic.client
    assert judge.ledger is critic.ledger  # one descriptor, one header


def test_the_json_schema_is_built_once_per_client(recorder_factory, tmp_path, monkeypatch):
    rec = recorder_factory([f'{{"verdict": "v{i}", "score": {i}}}' for i in range(3)])
    llm = make_llm(rec.base_url, tmp_path)
    built = []
    real = Verdict.model_json_schema.__func__

    def counting(cls, *args, **kwargs):
        built.append(cls)
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(Verdict, "model_json_schema", classmethod(counting))
    for i in range(3):
        llm.json([{"role": "user", "content": f"q{i}"}], Verdict)
    assert len(rec.bodies) == 3 and len(built) == 1
    assert all(b["response_format"]["json_schema"]["schema"] for b in rec.bodies)


def test_the_key_echoed_in_an_error_body_never_reaches_the_message(tmp_path, monkeypatch):
    # The reliability test checks this through an injected openai client; this is the
    # provider's own client, the one every job builds.
    import threading

    import pytest

    from memprobe.llm.client import LLMError

    secret = "sk-test-" + "z" * 24
    monkeypatch.setenv("MEMPROBE_TEST_KEY", secret)

    class Echo(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            auth = self.headers.get("Authorization", "")
            body = json.dumps({"error": {"message": f"bad key {auth}; key={secret}"}}).encode()
            self.send_response(401)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        llm = make_llm(f"http://127.0.0.1:{server.server_address[1]}/v1", tmp_path)
        with pytest.raises(LLMError) as err:
            llm.text(MSGS)
    finally:
        server.shutdown()
        server.server_close()
    assert "AuthenticationError" in str(err.value) and "bad key" in str(err.value)
    assert secret not in str(err.value) and secret[8:20] not in str(err.value)


def test_embeddings_go_through_the_client_cache_and_ledger(endpoint, tmp_path, monkeypatch):
    embedder = make_llm(endpoint.base_url, tmp_path, role="writer").embedder("embed-small")
    vectors = embedder.embed(["kayak trip", "seasick"], dimensions=8)
    assert len(vectors) == 2 and all(len(v) == 8 for v in vectors)
    again = make_llm(endpoint.base_url, tmp_path, role="writer").embedder("embed-small")
    assert again.embed(["kayak trip", "seasick"], dimensions=8) == vectors
    assert len(endpoint.server.embedding_requests) == 1  # the rerun replayed it
    rows = [(r["role"], r["model"], r["cached"]) for r in ledger(tmp_path)]
    assert rows == [("embedder", "embed-small", "false"), ("embedder", "embed-small", "true")]
    # The writer's key rules hold for its embedder: no key over plain http to another host.
    monkeypatch.setenv("MEMPROBE_TEST_KEY", SENTINEL)
    remote = make_llm("http://10.255.255.1:8000/v1", tmp_path, api_key_env="MEMPROBE_TEST_KEY")
    with pytest.raises(LLMError, match="plain http"):
        remote.embedder("embed-small").embed(["x"])
