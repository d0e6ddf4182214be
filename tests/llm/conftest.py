"""The LLM layer's fixtures."""

from __future__ import annotations

import pytest

from tests.helpers.llm import Recorder


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
