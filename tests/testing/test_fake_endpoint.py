"""The fake endpoint answers every role's reply schema with a valid instance."""

from __future__ import annotations

import json
import threading

import openai
import pytest
from pydantic import BaseModel

from memprobe.protocol import attribution, preference, recovery, simulation, users
from memprobe.testing.fake_endpoint import Gate
from memprobe.testing.fake_responder import instance

REPLY_SCHEMAS: list[type[BaseModel]] = [
    users.narrative_schema(2),
    users.bank_schema(["a_skill", "b_skill", "c_skill", "d_skill"], 3),
    users.TaskDraft,
    users.CriticReply,
    simulation.SimulatorReply,
    preference.reply_schema(5),
    recovery.SlotReply,
    recovery.JudgeReply,
    attribution.OracleReply,
    attribution.DisclosureReply,
    attribution.SubclassReply,
]


@pytest.mark.parametrize("schema", REPLY_SCHEMAS, ids=lambda s: s.__name__)
def test_generated_instance_validates(schema):
    for digest in ("0" * 64, "f" * 64, "1234abcd" * 8):
        schema.model_validate(instance(schema.model_json_schema(), digest))


def test_enum_items_in_arrays_are_distinct():
    schema = users.bank_schema([f"d{i}_skill" for i in range(9)], 4).model_json_schema()
    names = [d["name"] for d in instance(schema, "ab" * 32)["dims"]]
    assert len(set(names)) == 4


def test_server_is_deterministic_and_speaks_openai(endpoint):
    client = openai.OpenAI(base_url=endpoint.base_url, api_key="unused")
    fmt = {
        "type": "json_schema",
        "json_schema": {"name": "judge", "schema": recovery.JudgeReply.model_json_schema()},
    }
    msgs = [{"role": "user", "content": "grade this"}]
    a = client.chat.completions.create(model="m", messages=msgs, response_format=fmt)
    b = client.chat.completions.create(model="m", messages=msgs, response_format=fmt)
    assert a.choices[0].message.content == b.choices[0].message.content
    recovery.JudgeReply.model_validate(json.loads(a.choices[0].message.content))
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
