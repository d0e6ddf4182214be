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
import threading
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from memprobe.testing.fake_endpoint import make_server

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW_PARTS = ("Snakefile", "rules", "scripts", "prompts", "config", "profiles", "envs")
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "false")


class Endpoint:
    def __init__(self, script: str | None = None) -> None:
        self.server = make_server("127.0.0.1", 0, script)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


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
        counts: dict[str, int] = {}
        lines = (proc.stdout + proc.stderr).splitlines()
        if "Job stats:" not in lines:
            # "nothing scheduled" only when Snakemake says so: output we cannot parse is a
            # failure, never an empty schedule.
            if not any(line.startswith("Nothing to be done") for line in lines):
                raise AssertionError(f"no job stats in the dry run:\n{proc.stdout[-2000:]}")
            return counts
        for line in lines[lines.index("Job stats:") + 3 :]:
            parts = line.split()
            if len(parts) != 2 or not parts[1].isdigit():
                break
            if parts[0] != "total":
                counts[parts[0]] = int(parts[1])
        return counts


@pytest.fixture
def workflow_factory(tmp_path: Path):
    def make(config: dict, name: str = "wf") -> Workflow:
        root = tmp_path / name
        root.mkdir()
        return Workflow(root, config)

    return make
