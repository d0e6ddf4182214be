"""Issue 20: what one LLM call and one job cost, without giving up what the reliability tests
guarantee. The paid-once, kill and fault tests live in tests/reliability/."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

from memprobe.llm.cache import ResponseCache
from memprobe.llm.ledger import Ledger
from tests.llm.test_llm import Verdict, ledger, make_llm, recorder_factory  # noqa: F401

MSGS = [{"role": "user", "content": "hi"}]


def _python(
    code: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_paid_calls_go_through_openai_and_replays_never_import_it(tmp_path):
    # A paid call is sent by the openai package's client; openai's import (~0.35 s of CPU)
    # is paid only by a job that sends: one whose calls all replay from the cache never loads it.
    code = """
        import sys
        from pydantic import BaseModel
        from memprobe.config import load_config
        from memprobe.llm.client import client_for

        class V(BaseModel):
            verdict: str

        cfg = load_config({"n_users": 1, "systems": ["nomem"], "llm": {"backend": "fake",
                           "cache_dir": sys.argv[1]}})
        client_for("judge", cfg).json([{"role": "user", "content": "x"}], V)
        print("openai" in sys.modules)
        """
    paid = _python(code, str(tmp_path / "cache"))
    replayed = _python(code, str(tmp_path / "cache"))
    assert paid.returncode == 0 and replayed.returncode == 0, paid.stderr + replayed.stderr
    assert (paid.stdout.strip(), replayed.stdout.strip()) == ("True", "False")


def test_roles_on_one_endpoint_share_one_client(recorder_factory, tmp_path):  # noqa: F811
    rec = recorder_factory(['{"verdict": "a", "score": 1}', "hello"])
    judge = make_llm(rec.base_url, tmp_path, role="judge")
    critic = make_llm(rec.base_url, tmp_path, role="critic")
    judge.json(MSGS, Verdict)
    critic.text([{"role": "user", "content": "other"}])
    assert judge.provider is critic.provider and judge.client is critic.client
    assert judge.ledger is critic.ledger  # one descriptor, one header


def test_the_json_schema_is_built_once_per_client(recorder_factory, tmp_path, monkeypatch):  # noqa: F811
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


def test_a_ledger_row_is_in_the_file_when_record_returns(tmp_path):
    # Rows are not buffered in the process: a SIGKILL right after a paid call keeps its row.
    path = tmp_path / "usage.csv"
    proc = _python(
        f"""
        import os, signal
        from memprobe.llm.ledger import Ledger
        Ledger({str(path)!r}, job="j").record(role="judge", model="m", prompt_tokens=1,
            completion_tokens=2, latency_s=0.5, cached=False, key="k1")
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    assert proc.returncode == -signal.SIGKILL
    lines = path.read_text().splitlines()
    assert lines[0].startswith("ts,job,role,model") and lines[1].split(",")[-3] == "k1"


def test_a_ledger_moved_away_under_a_job_starts_a_new_file(tmp_path):
    path = tmp_path / "usage.csv"
    led = Ledger(path, job="j")
    row = dict(role="r", model="m", prompt_tokens=0, completion_tokens=0, latency_s=0.0)
    led.record(**row, cached=False, key="a")
    os.replace(path, tmp_path / "done.csv")  # glue.Job.finish renames the pending ledger
    led.record(**row, cached=True, key="b")
    assert len((tmp_path / "done.csv").read_text().splitlines()) == 2
    assert [r["key"] for r in ledger_rows(path)] == ["b"]


def ledger_rows(path):
    import csv

    with open(path) as fh:
        return list(csv.DictReader(fh))


def test_cache_entries_are_written_without_fsync_and_leave_no_temp_file(tmp_path, monkeypatch):
    def no_fsync(fd):
        raise AssertionError("fsync per cache entry")

    monkeypatch.setattr(os, "fsync", no_fsync)
    cache = ResponseCache(tmp_path / "cache")
    cache.put("ab" * 32, {"content": "x"})
    assert cache.get("ab" * 32) == {"content": "x"}
    assert [p.name for p in (tmp_path / "cache").rglob("*") if p.is_file()] == ["ab" * 32 + ".json"]


def test_an_entry_torn_by_a_power_cut_is_asked_again(recorder_factory, tmp_path):  # noqa: F811
    # Without fsync, a power cut can leave a renamed entry empty or cut: it reads as a miss.
    rec = recorder_factory(["first", "again"])
    llm = make_llm(rec.base_url, tmp_path)
    assert llm.text(MSGS) == "first"
    (entry,) = (tmp_path / "cache").rglob("*.json")
    entry.write_text('{"content": "fir')
    assert make_llm(rec.base_url, tmp_path).text(MSGS) == "again"
    assert json.loads(entry.read_text())["content"] == "again"


def test_a_job_writes_its_cpu_and_call_counts_when_asked(tmp_path):
    stats = tmp_path / "stats"
    proc = _python(
        f"""
        import sys
        from memprobe.config import load_config
        from memprobe.llm.client import client_for

        cfg = load_config({{"n_users": 1, "systems": ["nomem"], "llm": {{"backend": "fake",
                           "cache_dir": {str(tmp_path / "cache")!r}}}}})
        llm = client_for("assistant", cfg)
        llm.text([{{"role": "user", "content": "x"}}])
        llm.text([{{"role": "user", "content": "x"}}])
        """,
        env={"MEMPROBE_JOB_STATS": str(stats)},
    )
    assert proc.returncode == 0, proc.stderr
    (f,) = stats.glob("*.json")
    got = json.loads(f.read_text())
    assert got["paid"] == 1 and got["replayed"] == 1 and got["client"] == 1
    assert 0 < got["startup_cpu_s"] <= got["cpu_s"] and got["paid_cpu_s"] > 0


def test_the_key_echoed_in_an_error_body_never_reaches_the_message(tmp_path, monkeypatch):
    # The reliability test checks this through an injected openai client; this is the
    # provider's own client, the one every job builds.
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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
