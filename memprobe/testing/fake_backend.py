"""``llm.backend: fake``: every role answered in-process by the fake responder.

The requests go through the same ``openai`` client and provider as a real endpoint's, over an
in-memory transport instead of the network, so a dry run exercises the whole client (schemas,
validation, the cache, the ledger) with no server and no key. Never the backend of a real run.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from memprobe.config.schema import Config
from memprobe.llm.providers import BackendBase, Endpoint, OpenAICompatible, Provider
from memprobe.testing.fake_responder import completion_body, embedding_body, fake_content

if TYPE_CHECKING:
    import httpx2

FAKE_URL = "http://fake.invalid/v1"


class FakeBackend(BackendBase):
    name = "fake"
    # A dry run's stand-in for every model: a system's own served one (Mem-T's policy) too.
    answers_served_models = True

    def endpoint(self, cfg: Config, settings: dict[str, Any]) -> Endpoint:
        return Endpoint(self.name, FAKE_URL, FAKE_URL, settings["api_key_env"], cfg.llm.timeout_s)

    def identity(self, cfg: Config, base_url: str | None) -> str:
        return "fake"

    def provider(self, endpoint: Endpoint) -> Provider:
        return OpenAICompatible(endpoint, transport=transport())


BACKEND = FakeBackend()


def transport() -> httpx2.MockTransport:
    import httpx2

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content or b"{}")
        if request.url.path.endswith("/embeddings"):
            return httpx2.Response(200, json=embedding_body(body))
        return httpx2.Response(200, json=completion_body(body, fake_content(body)))

    return httpx2.MockTransport(handler)
