"""Replies derived from the request alone (memprobe/testing/fake_responder.py): an instance of
every role's reply schema, the same reply for the same request, and OpenAI's reply shapes."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import BaseModel

from memprobe.protocol import attribution, preference, simulation
from memprobe.protocol.bank import bank_schema
from memprobe.protocol.judge import JudgeReply
from memprobe.protocol.persona import narrative_schema
from memprobe.protocol.slotfill import SlotReply
from memprobe.protocol.tasks import CriticReply, TaskDraft
from memprobe.testing.fake_responder import (
    completion_body,
    embedding_body,
    fake_content,
    instance,
    parse_outcomes,
    request_digest,
)

REPLY_SCHEMAS: list[type[BaseModel]] = [
    narrative_schema(2),
    bank_schema(["a_skill", "b_skill", "c_skill", "d_skill"], 3),
    TaskDraft,
    CriticReply,
    simulation.SimulatorReply,
    preference.reply_schema(5),
    SlotReply,
    JudgeReply,
    attribution.OracleReply,
    attribution.DisclosureReply,
    attribution.SubclassReply,
]


@pytest.mark.parametrize("schema", REPLY_SCHEMAS, ids=lambda s: s.__name__)
def test_generated_instance_validates(schema):
    for digest in ("0" * 64, "f" * 64, "1234abcd" * 8):
        schema.model_validate(instance(schema.model_json_schema(), digest))


def test_enum_items_in_arrays_are_distinct():
    schema = bank_schema([f"d{i}_skill" for i in range(9)], 4).model_json_schema()
    names = [d["name"] for d in instance(schema, "ab" * 32)["dims"]]
    assert len(set(names)) == 4


def test_bounds_lengths_constants_and_nullable_fields_are_honoured():
    schema = {
        "type": "object",
        "properties": {
            "short": {"type": "string", "maxLength": 5},
            "long": {"type": "string", "minLength": 80},
            "level": {"type": "integer", "minimum": 3, "maximum": 4},
            "kind": {"const": "fixed"},
            "maybe": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/Flag"}]},
            "few": {"type": "array", "items": {"type": "number"}, "minItems": 3},
        },
        "$defs": {"Flag": {"type": "boolean"}},
    }
    for digest in ("0" * 64, "9" * 64, "abcdef12" * 8):
        got = instance(schema, digest)
        assert len(got["short"]) <= 5 and len(got["long"]) >= 80
        assert got["level"] in (3, 4) and got["kind"] == "fixed"
        assert isinstance(got["maybe"], bool)  # the non-null option, through its $ref
        assert len(got["few"]) == 3 and all(isinstance(x, float) for x in got["few"])


def chat(content: str = "hi", **extra) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": content}], "seed": 7, **extra}


def test_the_same_request_gets_the_same_reply_and_another_request_another():
    assert fake_content(chat()) == fake_content(chat(temperature=0.9))  # not part of the digest
    assert request_digest(chat()) != request_digest(chat(seed=8))
    assert fake_content(chat()) != fake_content(chat("hello"))
    assert fake_content(chat()).startswith("Here is a practical answer: ")


def test_a_json_schema_request_gets_an_instance_and_a_json_object_one_an_object():
    fmt = {
        "type": "json_schema",
        "json_schema": {"schema": JudgeReply.model_json_schema()},
    }
    JudgeReply.model_validate_json(fake_content(chat(response_format=fmt)))
    reply = json.loads(fake_content(chat(response_format={"type": "json_object"})))
    assert isinstance(reply["facts"], list) and reply["facts"]


def test_a_completion_carries_the_content_and_token_usage():
    body = chat("x" * 400)
    out = completion_body(body, "y" * 40)
    assert out["choices"][0]["message"] == {"role": "assistant", "content": "y" * 40}
    assert out["model"] == "m" and out["id"] == f"fake-{request_digest(body)[:16]}"
    usage = out["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (100, 10)
    assert usage["total_tokens"] == 110


def test_embeddings_are_unit_vectors_derived_from_each_text():
    out = embedding_body({"input": ["alpha", "beta", "alpha"], "dimensions": 16})
    vecs = [d["embedding"] for d in out["data"]]
    assert [d["index"] for d in out["data"]] == [0, 1, 2]
    assert all(len(v) == 16 and math.isclose(sum(x * x for x in v), 1.0) for v in vecs)
    assert vecs[0] == vecs[2] != vecs[1]
    single = embedding_body({"input": "alpha"})  # one string, no dimensions: 8 long
    assert len(single["data"]) == 1 and len(single["data"][0]["embedding"]) == 8
    assert out["usage"]["prompt_tokens"] == 3


@pytest.mark.parametrize("rate", [None, 0.4])
def test_a_rigged_outcome_comes_at_its_rate_and_the_others_still_come(rate):
    """Benchmarks end episodes as often as the release's (--outcomes); unrigged, the enum's
    even spread: 1 in 7."""
    schema = simulation.reply_schema(None).model_json_schema()
    fmt = {"type": "json_schema", "json_schema": {"schema": schema}}
    rig = {"feedback_type": ("satisfied", rate)} if rate is not None else None
    replies = [
        simulation.SimulatorReply.model_validate_json(
            fake_content(chat(f"turn {i}", response_format=fmt), rig)
        )
        for i in range(700)
    ]
    share = sum(r.feedback_type == "satisfied" for r in replies) / len(replies)
    assert share == pytest.approx(rate if rate is not None else 1 / 7, abs=0.05)
    assert len({r.feedback_type for r in replies}) == 7


def test_a_rig_leaves_other_schemas_and_fields_alone():
    fmt = {
        "type": "json_schema",
        "json_schema": {"schema": JudgeReply.model_json_schema()},
    }
    body = chat(response_format=fmt)
    assert fake_content(body, {"feedback_type": ("satisfied", 1.0)}) == fake_content(body)
    critic = {
        "type": "json_schema",
        "json_schema": {"schema": CriticReply.model_json_schema()},
    }
    verdicts = {
        CriticReply.model_validate_json(
            fake_content(chat(str(i), response_format=critic), {"verdict": ("neutral", 1.0)})
        ).verdict
        for i in range(50)
    }
    assert verdicts == {"neutral"}


@pytest.mark.parametrize("text", ["verdict=neutral", "verdict=neutral:2", "=x:0.5", "v=:0.1"])
def test_a_bad_outcome_is_one_line_naming_it(text):
    with pytest.raises(ValueError, match="outcomes: .* is not FIELD=VALUE:RATE"):
        parse_outcomes(text)
