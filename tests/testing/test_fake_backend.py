"""``llm.backend: fake`` (memprobe/testing/fake_backend.py): every role answered in-process,
through the real openai client and provider, by the fake responder, with no network."""

from __future__ import annotations

import json

from memprobe.config.loading import load_config
from memprobe.llm.client import client_for
from memprobe.protocol.judge import JudgeReply
from memprobe.testing.fake_backend import BACKEND, FAKE_URL
from memprobe.testing.fake_responder import embedding_body, fake_content
from tests.helpers.llm import Verdict
from tests.helpers.workflow import tiny_config


def fake_config(tmp_path):
    raw = tiny_config("http://unused")
    raw["llm"] = {"backend": "fake", "cache_dir": str(tmp_path / "c"), "timeout_s": 33}
    return load_config(raw)


def test_fake_backend_answers_in_process_with_schema_valid_json(tmp_path):
    llm = client_for("judge", fake_config(tmp_path))
    assert isinstance(llm.json([{"role": "user", "content": "x"}], Verdict), Verdict)


def test_its_endpoint_is_the_fake_url_keyed_as_fake(tmp_path):
    cfg = fake_config(tmp_path)
    ep = BACKEND.endpoint(cfg, {"api_key_env": "NO_SUCH_KEY"})
    assert (ep.backend, ep.base_url, ep.api_key_env, ep.timeout_s) == (
        "fake", FAKE_URL, "NO_SUCH_KEY", 33
    )  # fmt: skip
    assert BACKEND.identity(cfg, "http://anything/v1") == "fake"


def test_the_provider_sends_through_openai_to_the_responder_not_the_network(tmp_path):
    # fake.invalid resolves nowhere: a reply proves the request never left the process.
    provider = BACKEND.provider(BACKEND.endpoint(fake_config(tmp_path), {"api_key_env": None}))
    fmt = {
        "type": "json_schema",
        "json_schema": {"schema": JudgeReply.model_json_schema()},
    }
    req = {"model": "m", "messages": [{"role": "user", "content": "grade"}], "response_format": fmt}
    reply = provider.complete(req)
    assert reply.content == fake_content(req) and reply.finish_reason == "stop"
    JudgeReply.model_validate_json(reply.content)
    emb = {"model": "e", "input": ["a", "b"], "dimensions": 4}
    vectors = json.loads(provider.embed(emb).content)
    assert vectors == [d["embedding"] for d in embedding_body(emb)["data"]]
