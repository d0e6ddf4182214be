"""Shared fixtures: a loopback fake endpoint and a runner for real Snakemake in a temp dir.

Workflow tests copy the workflow (Snakefile, rules, scripts, prompts, config, profiles) into
``tmp_path`` and run the real ``snakemake`` CLI there, so parallel test runs never share
results/, logs/ or the LLM cache.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from memprobe.report.jobdag import job_counts
from memprobe.testing.background import Background
from memprobe.testing.fake_endpoint import make_server

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW_PARTS = ("Snakefile", "rules", "scripts", "prompts", "config", "profiles", "envs")
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))

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
_RUNNING: dict[str, pytest.Item] = {}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _RUNNING["item"] = item  # before its fixtures, which may build a Workflow


def _needs_workflow_mark() -> None:
    """The fast tier fails a test that builds a test workflow without the `workflow` marker."""
    item = _RUNNING.get("item")
    if item is None or item.config.getoption("--integration"):
        return
    if not item.get_closest_marker("workflow"):
        pytest.fail(f"{item.name} runs real Snakemake: mark it `workflow`")


class Endpoint(Background):
    """The fake endpoint on a background thread (``script``: its pinned replies)."""

    def __init__(self, script: str | None = None) -> None:
        super().__init__(make_server("127.0.0.1", 0, script))


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    ep = Endpoint()
    yield ep
    ep.close()


def record_requests(ep: Endpoint) -> dict[str, list[dict]]:
    """Record every chat request the endpoint receives, per json_schema name (= role)."""
    seen: dict[str, list[dict]] = defaultdict(list)
    base = ep.server.RequestHandlerClass

    class Recording(base):  # type: ignore[misc, valid-type]
        def do_POST(self) -> None:
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(data or b"{}")
            name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "")
            seen[name].append(body)
            self.rfile = io.BytesIO(data)  # let the real handler read the same body
            super().do_POST()

    ep.server.RequestHandlerClass = Recording
    return seen


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


def tiny_config(base_url: str, **overrides) -> dict:
    cfg = yaml.safe_load((ROOT / "tests" / "configs" / "tiny.yaml").read_text())
    cfg["llm"]["base_url"] = base_url
    for key, value in overrides.items():
        cfg[key] = value
    return cfg


class Workflow:
    """A copy of the workflow in a temp dir, with a config file, run by the real CLI."""

    def __init__(self, root: Path, config: dict) -> None:
        _needs_workflow_mark()
        self.root = root
        for part in WORKFLOW_PARTS:
            src = ROOT / part
            if src.is_dir():
                shutil.copytree(src, root / part, dirs_exist_ok=True)
            else:
                shutil.copy2(src, root / part)
        self.config_path = root / "test-config.yaml"
        self.write_config(config)

    def write_config(self, config: dict) -> None:
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))

    def run(
        self, *args: str, check: bool = True, env: dict | None = None, timeout: float = 600
    ) -> subprocess.CompletedProcess:
        cmd = [SNAKEMAKE, *args, "--cores", "2", "--configfile", str(self.config_path)]
        proc = subprocess.run(
            cmd,
            cwd=self.root,
            capture_output=True,
            text=True,
            env={**os.environ, **(env or {})},
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        return proc

    def scheduled(self, *args: str) -> dict[str, int]:
        """Job counts per rule of a dry run (``snakemake -n``)."""
        proc = self.run(*args, "-n")
        out = proc.stdout + proc.stderr
        counts = job_counts(out)
        # "nothing scheduled" only when Snakemake says so: output we cannot parse is a
        # failure, never an empty schedule.
        if not counts and not any(ln.startswith("Nothing to be done") for ln in out.splitlines()):
            raise AssertionError(f"no job stats in the dry run:\n{out[-2000:]}")
        return counts


@pytest.fixture
def workflow_factory(tmp_path: Path):
    def make(config: dict, name: str = "wf") -> Workflow:
        root = tmp_path / name
        root.mkdir()
        return Workflow(root, config)

    return make
