"""A stand-in for a Mem-T server, for tests: OpenAI-compatible, on loopback, deterministic.

It answers the three kinds of Mem-T requests our client sends (told apart by the tools named
in the system message) with ``<tool_call>{json}</tool_call>`` text, as Mem-T-4B does:

- formation: create_fact, create_experience, update_persona, update_summary, then one
  malformed block (broken JSON), so the client's tolerance is exercised on every turn;
- update: add_item when nothing similar is stored, else a choice among add/update/delete/
  ignore derived from a hash of the candidate;
- retrieve: search_facts, a malformed step, search_experiences, search_personas,
  search_summary, finish (one call per step, chosen by how many steps came before).

Never a real model: it only makes the protocol, the store and the workflow testable offline.
On a thread (:class:`StandIn`) it listens on a loopback port; :func:`serve` runs it as a fake
``vllm serve --uds PATH`` would, on that Unix socket with ``VLLM_API_KEY``. It also answers
``GET /health`` like vLLM.
"""

from __future__ import annotations

import hashlib
import json
import os
import socketserver
from http.server import ThreadingHTTPServer
from typing import Any

from memprobe.serving.json_http import QuietJSONHandler
from memprobe.serving.served_process import UnixHTTPServer
from memprobe.testing.background import Background
from memprobe.testing.fake_responder import completion_body

MALFORMED = '<tool_call>{"name": "create_fact", "arguments": {"content": </tool_call>'
RETRIEVE_PLAN = (
    "search_facts",
    None,  # a malformed step
    "search_experiences",
    "search_personas",
    "search_summary",
    "finish",
)


def _call(tool: str, **arguments: Any) -> str:
    return f"<tool_call>{json.dumps({'name': tool, 'arguments': arguments})}</tool_call>"


def _hash(text: str) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16)


def _after(text: str, marker: str) -> str:
    return text.split(marker, 1)[1].strip() if marker in text else text.strip()


def _gist(text: str, words: int = 12) -> str:
    return " ".join(text.removeprefix("user said:").split()[:words])


def formation_reply(user: str) -> str:
    gist = _gist(_after(user, "Newest message:"))
    return "\n".join(
        [
            _call("create_fact", content=f"The user said they {gist}"),
            _call("create_experience", content=f"The user once dealt with: {gist}"),
            _call("update_persona", name="User", content=f"A person who wrote: {gist}"),
            _call("update_summary", content=f"So far the user talked about: {gist}"),
            MALFORMED,
        ]
    )


def update_reply(user: str) -> str:
    candidate = _after(user, "Candidate:").split("Most similar stored items:")[0].strip()
    try:  # with its times, the candidate is a JSON object (system_settings.memt.update_times)
        candidate = str(json.loads(candidate)["content"])
    except (json.JSONDecodeError, KeyError, TypeError):
        pass
    similar_text = _after(user, "Most similar stored items:")
    try:
        similar = json.loads(similar_text)
    except json.JSONDecodeError:
        similar = []
    if not similar:
        return _call("add_item", content=candidate)
    choice = _hash(candidate) % 10
    if choice < 6:
        return _call("add_item", content=candidate)
    if choice < 8:
        first = similar[0]
        return _call("update_item", id=first["id"], content=f"{first['content']}; {candidate}")
    if choice < 9:
        return _call("ignore_item")
    return _call("delete_item", id=similar[-1]["id"])


def retrieve_reply(messages: list[dict[str, Any]]) -> str:
    step = sum(1 for m in messages if m.get("role") == "assistant")
    question = _after(str(messages[1]["content"]) if len(messages) > 1 else "", "Question:")
    tool = RETRIEVE_PLAN[min(step, len(RETRIEVE_PLAN) - 1)]
    if tool is None:
        return "<tool_call>search_facts(query=...)</tool_call>"
    if tool == "finish":
        return _call("finish", answer="done")
    return _call(tool, query=question)


def reply_for(body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    system = str(messages[0].get("content", "")) if messages else ""
    user = str(messages[1].get("content", "")) if len(messages) > 1 else ""
    if "create_fact" in system:
        return formation_reply(user)
    if "add_item" in system:
        return update_reply(user)
    if "search_facts" in system:
        return retrieve_reply(messages)
    return "I only speak the Mem-T tool protocol."


def make_server(
    host: str = "127.0.0.1", port: int = 0, api_key: str | None = None, uds: str | None = None
) -> socketserver.BaseServer:
    """The stand-in on ``host:port``, or on the Unix socket ``uds`` when given."""

    class Handler(QuietJSONHandler):
        protocol_version = "HTTP/1.1"

        def _refused(self) -> bool:
            """Like vLLM with VLLM_API_KEY: every /v1 route needs the bearer key."""
            if api_key and self.headers.get("Authorization") != f"Bearer {api_key}":
                self._send(401, {"error": {"message": "Unauthorized"}})
                return True
            return False

        def do_GET(self) -> None:
            path = self.path.rstrip("/")
            if path.endswith("/health"):
                self._send(200, {"status": "ok"})
            elif self._refused():
                return
            elif path.endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": "Mem-T-4B"}]})
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                self._send(400, {"error": {"message": "invalid JSON body"}})
                return
            if self._refused():
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": "not found"}})
                return
            self._send(200, completion_body(body, reply_for(body)))

    if uds:
        return UnixHTTPServer(uds, Handler)
    return ThreadingHTTPServer((host, port), Handler)


class StandIn(Background):
    """The stand-in on a background thread (for tests): ``.base_url``, ``.close()``."""

    def __init__(self) -> None:
        super().__init__(make_server())  # type: ignore[arg-type]


def serve(uds: str) -> None:
    """Serve on ``uds`` until killed, with the key vLLM would read (``VLLM_API_KEY``)."""
    make_server(api_key=os.environ.get("VLLM_API_KEY"), uds=uds).serve_forever()
