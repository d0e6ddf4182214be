"""The LLM layer through the real openai client against a loopback endpoint."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pydantic import BaseModel, Field

from memprobe.config import load_config
from memprobe.llm.client import LLMError, client_for
from tests.conftest import tiny_config


class Verdict(BaseModel):
    verdict: str = Field(max_length=20)
    score: int


class Recorder:
    """A loopback OpenAI-compatible server that replays given contents and records bodies."""

    def __init__(self, contents: list[str], delay_s: float = 0.0) -> None:
        self.contents = list(contents)
        self.delay_s = delay_s
        self.bodies: list[dict] = []
        self.auth: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.bodies.append(body)
                outer.auth.append(self.headers.get("Authorization", ""))
                # An item is the reply content, or a dict with content, finish_reason, and
                # for an error reply its HTTP code and headers.
                item = outer.contents.pop(0)
                item = item if isinstance(item, dict) else {"content": item}
                time.sleep(outer.delay_s)
                data = json.dumps(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "m",
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": item.get("finish_reason", "stop"),
                                "message": {"role": "assistant", "content": item["content"]},
                            }
                        ],
                        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
                    }
                ).encode()
                if "code" in item:
                    data = json.dumps({"error": {"message": f"HTTP {item['code']}"}}).encode()
                self.send_response(item.get("code", 200))
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in item.get("headers", {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recorder_factory():
    made = []

    def make(contents, delay_s=0.0):
        r = Recorder(contents, delay_s)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def make_llm(base_url, tmp_path, role="judge", **llm):
    raw = tiny_config(base_url)
    raw["llm"].update(cache_dir=str(tmp_path / "cache"), **llm)
    cfg = load_config(raw)
    return client_for(role, cfg, ledger_path=tmp_path / "ledger.csv", job="test")


def ledger(tmp_path):
    with open(tmp_path / "ledger.csv") as fh:
        return list(csv.DictReader(fh))


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
            "with ResponseCache(sys.argv[1]).inflight('ab' * 32):\n"
            "    print('held', flush=True); time.sleep(60)\n",
            str(tmp_path / "cache"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    from memprobe.llm.cache import ResponseCache

    start = time.monotonic()
    with ResponseCache(tmp_path / "cache").inflight("ab" * 32):
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


def test_fake_backend_answers_in_process_with_schema_valid_json(tmp_path):
    raw = tiny_config("http://unused")
    raw["llm"] = {"backend": "fake", "cache_dir": str(tmp_path / "c")}
    llm = client_for("judge", load_config(raw))
    assert isinstance(llm.json([{"role": "user", "content": "x"}], Verdict), Verdict)
