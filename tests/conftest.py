"""The tiers (fast by default, ``--integration`` adds the marked tests) and the shared fixtures:
a loopback fake endpoint and a runner for real Snakemake in a temp dir (tests/helpers/)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.endpoint import Endpoint, record_requests
from tests.helpers.llm import Recorder
from tests.helpers.workflow import RUNNING, Workflow

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "false")

# The fast tier (the default) leaves out tests with these markers; --integration runs them too.
INTEGRATION = ("workflow", "torch", "browser", "local_model")
HEAVY_MODULES = ("torch", "sentence_transformers", "transformers", "mem0")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--integration",
        action="store_true",
        help=f"also run the integration tier (markers: {', '.join(INTEGRATION)})",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--integration"):
        return
    slow = [i for i in items if any(i.get_closest_marker(m) for m in INTEGRATION)]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [i for i in items if i not in set(slow)]
    heavy_at_collection = [m for m in HEAVY_MODULES if m in sys.modules]
    if heavy_at_collection:
        raise pytest.UsageError(
            f"fast tier: collecting the tests imported {heavy_at_collection[0]}: import it "
            "inside the test, and mark the test `torch`"
        )


@pytest.fixture(autouse=True)
def _fast_tier_stays_light(request: pytest.FixtureRequest) -> Iterator[None]:
    """A fast-tier test that imports torch & co. (10+ s each) fails: mark it `torch`."""
    yield
    if request.config.getoption("--integration"):
        return
    heavy = [m for m in HEAVY_MODULES if m in sys.modules and m not in _REPORTED]
    if heavy:
        _REPORTED.update(heavy)  # only the test that imported it fails
        pytest.fail(f"fast tier: this test imported {heavy[0]}: mark it `torch`")


_REPORTED: set[str] = set()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    RUNNING["item"] = item  # before its fixtures, which may build a Workflow


@pytest.fixture(autouse=True)
def _fresh_providers() -> Iterator[None]:
    """Each test's in-process jobs get their own HTTP clients: a cached one would reach a
    closed endpoint of an earlier test that had the same port (memprobe/llm/providers.py)."""
    yield
    from memprobe.llm.providers import forget_providers

    forget_providers()


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    ep = Endpoint()
    yield ep
    ep.close()


@pytest.fixture
def scripted(tmp_path):
    """Start an endpoint whose replies are pinned per role; returns it and its request log."""
    started: list[Endpoint] = []

    def start(script: dict) -> tuple[Endpoint, dict[str, list[dict]]]:
        path = tmp_path / f"script{len(started)}.json"
        path.write_text(json.dumps(script))
        ep = Endpoint(str(path))
        started.append(ep)
        return ep, record_requests(ep)

    yield start
    for ep in started:
        ep.close()


@pytest.fixture
def workflow_factory(tmp_path: Path):
    def make(config: dict, name: str = "wf") -> Workflow:
        root = tmp_path / name
        root.mkdir()
        return Workflow(root, config)

    return make


@pytest.fixture
def recorder_factory():
    """Loopback OpenAI-compatible servers that replay given contents and record bodies."""
    made = []

    def make(contents, delay_s=0.0):
        r = Recorder(contents, delay_s)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()
