"""A loopback endpoint that replays given replies, a client on it, and its ledger rows."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from pydantic import BaseModel, Field

from memprobe.config.loading import load_config
from memprobe.llm.client import client_for
from tests.helpers.workflow import tiny_config


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


def make_llm(base_url, tmp_path, role="judge", **llm):
    raw = tiny_config(base_url)
    raw["llm"].update(cache_dir=str(tmp_path / "cache"), **llm)
    cfg = load_config(raw)
    return client_for(role, cfg, ledger_path=tmp_path / "ledger.csv", job="test")


def ledger(tmp_path):
    with open(tmp_path / "ledger.csv") as fh:
        return list(csv.DictReader(fh))


def run_python(
    code: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run a Python snippet in a fresh interpreter (what a job pays at import)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )


def short_writes(monkeypatch, fail_after: int | None = None):
    """``os.write`` that takes at most 7 bytes at a time (a full disk, a signal), and raises
    ENOSPC after ``fail_after`` calls."""
    real, calls = os.write, []

    def write(fd, data):
        calls.append(fd)
        if fail_after is not None and len(calls) > fail_after:
            raise OSError(28, "No space left on device")
        return real(fd, bytes(data[:7]))

    monkeypatch.setattr(os, "write", write)
