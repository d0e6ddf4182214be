"""The fake endpoint (memprobe/testing/fake_endpoint.py): OpenAI's API on loopback, the same
reply for the same request, and a gate that holds requests."""

from __future__ import annotations

import json
import threading

import openai

from memprobe.protocol.judge import JudgeReply
from memprobe.testing.fake_endpoint import Gate


def test_server_is_deterministic_and_speaks_openai(endpoint):
    client = openai.OpenAI(base_url=endpoint.base_url, api_key="unused")
    fmt = {
        "type": "json_schema",
        "json_schema": {"name": "judge", "schema": JudgeReply.model_json_schema()},
    }
    msgs = [{"role": "user", "content": "grade this"}]
    a = client.chat.completions.create(model="m", messages=msgs, response_format=fmt)
    b = client.chat.completions.create(model="m", messages=msgs, response_format=fmt)
    assert a.choices[0].message.content == b.choices[0].message.content
    JudgeReply.model_validate(json.loads(a.choices[0].message.content))
    assert a.usage.prompt_tokens > 0
    assert [m.id for m in client.models.list()] == ["fake"]


def test_gate_answers_n_requests_then_holds_the_next_until_released(endpoint):
    gate = endpoint.server.gate = Gate(2)
    client = openai.OpenAI(base_url=endpoint.base_url, api_key="unused", max_retries=0)
    msgs = [{"role": "user", "content": "hello"}]
    for _ in range(2):
        client.chat.completions.create(model="m", messages=msgs)
    assert not gate.held.is_set()
    failed: list[Exception] = []

    def third() -> None:
        try:
            client.chat.completions.create(model="m", messages=msgs)
        except Exception as e:  # the hang-up after release
            failed.append(e)

    t = threading.Thread(target=third)
    t.start()
    assert gate.held.wait(30), "the third request was not held"
    assert t.is_alive()  # still waiting for its answer
    gate.release.set()
    t.join(30)
    assert gate.admitted == 2 and len(failed) == 1


def test_the_documented_script_pins_replies_in_order_and_by_what_the_request_says(tmp_path):
    """docs/testing.md's example is the format Script reads."""
    import re

    from memprobe.testing.fake_endpoint import Script
    from tests.helpers.workflow import ROOT

    doc = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    example = re.search(r"```json\n(.*?)\n```", doc.split("## The fake endpoint", 1)[1], re.S)
    assert example is not None
    path = tmp_path / "pinned.json"
    path.write_text(example.group(1))
    script = Script(str(path))
    first, second = script.next("critic"), script.next("critic")
    assert (first["verdict"], second["verdict"]) == ("fishing", "neutral")
    assert script.next("critic") is None  # used up: the generated replies resume
    match = "Target: Wants bullet points\nLabel: prefers bullet points"
    assert script.next("judge", match)["score"] == 1.0
    assert script.next("judge", "anything else")["score"] == 0.0
    assert script.next("judge", match)["score"] == 1.0  # a rule is never used up
