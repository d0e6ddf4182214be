"""Issue 32: two runs in one checkout, each under its own name (docs/runs.md).

The offline default (config/config.yaml: backend local, nomem + longctx_full) and the smoke run
(tests/configs/tiny.yaml) run one after the other in one copy of the workflow. The default's
llama.cpp server is the fake endpoint behind the real launcher (tests/serving/fake_llama: the
real 0.5B model takes 20+ minutes), the smoke run's endpoint the fake endpoint itself; the
embedding server is the real one.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from memprobe.serving import local_server
from tests.helpers.endpoint import Endpoint
from tests.helpers.workflow import ROOT, Workflow, tiny_config

pytestmark = pytest.mark.workflow

FAKE_LLAMA = ROOT / "tests" / "serving" / "fake_llama"
JUDGE = ["judge", "user=user_001", "system=longctx_full", "mode=retrieve"]


@dataclass
class Runs:
    wf: Workflow
    default: Path  # the default run's --configfile: the stand-in model only
    smoke: Path
    env: dict[str, str]  # the default run's: the fake llama.cpp launcher
    llama_log: Path
    inspector: subprocess.CompletedProcess  # `snakemake inspector` on the finished default run
    starts_before: int  # fake llama.cpp servers started before it
    embed_log: tuple[int, int] | None  # the embedding server's log (mtime, size) before it
    smoke_run: subprocess.CompletedProcess


def _starts(llama_log: Path) -> int:
    """The fake llama.cpp servers started so far (each logs ``start <pid>``)."""
    lines = llama_log.read_text().splitlines() if llama_log.exists() else []
    return sum(ln.startswith("start ") for ln in lines)


def _stat(path: Path) -> tuple[int, int] | None:
    return (path.stat().st_mtime_ns, path.stat().st_size) if path.exists() else None


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Runs:
    tmp = tmp_path_factory.mktemp("runs")
    gguf = tmp / "stand-in.gguf"
    gguf.write_bytes(b"GGUF" + bytes(60))
    sha = hashlib.sha256(gguf.read_bytes()).hexdigest()
    # The default config, unchanged but for the model file llama.cpp would load.
    layer = {"llm": {"local": {"model_path": str(gguf), "sha256": sha, "startup_timeout_s": 60}}}
    root = tmp / "checkout"
    root.mkdir()
    wf = Workflow(root, layer)
    llama_log = tmp / "fake_llama.log"
    env = {
        "PYTHONPATH": str(FAKE_LLAMA),
        "MEMPROBE_FAKE_LLAMA": str(llama_log),
        "MEMPROBE_FAKE_LLAMA_FAIL": "0",
        local_server.BASE_URL_ENV: "",  # never a server from the environment
    }
    ep = Endpoint()
    try:
        # The default run, its tables first; then its inspector, as README suggests.
        wf.run("tables", env=env, timeout=1800)
        embed_log = _stat(wf.logs / "embed_server.log")
        before = _starts(llama_log)
        inspector = wf.run("inspector", env=env)
        # Then the smoke run, in the same checkout, its own config.
        smoke = root / "smoke.yaml"
        smoke.write_text(yaml.safe_dump(tiny_config(ep.base_url)))
        smoke_run = wf.run(configfile=smoke, timeout=1800)
        yield Runs(
            wf, wf.config_path, smoke, env, llama_log, inspector, before, embed_log, smoke_run
        )
    finally:
        ep.close()


def test_the_inspector_of_a_finished_default_run_starts_no_server(runs):
    """No job of `snakemake inspector` calls an LLM or embeds: neither server starts."""
    assert runs.starts_before == 1  # the run itself started one, for its LLM jobs
    out = runs.inspector.stdout + runs.inspector.stderr
    assert "inspector" in out and "starting llama.cpp" not in out, out[-2000:]
    assert _starts(runs.llama_log) == runs.starts_before
    # the embedding server writes its log when it starts: the default run's is untouched
    assert runs.embed_log is not None
    assert _stat(runs.wf.logs / "embed_server.log") == runs.embed_log
    assert (runs.wf.results / "inspect" / "index.html").exists()


def test_each_run_completes_in_its_own_folder(runs):
    """The default run (no name) writes into results/ and logs/ themselves, the smoke run into
    results/smoke/ and logs/smoke/ (docs/runs.md)."""
    wf = runs.wf
    results, logs = wf.root / "results", wf.root / "logs"
    for folder, log_folder in ((results, logs), (results / "smoke", logs / "smoke")):
        for part in ("table2.csv", "figures/category_b.png", "inspect/index.html"):
            assert (folder / part).exists(), (folder, part)
        assert (folder / "usage" / "judge").is_dir()
        assert (log_folder / "judge").is_dir()
    # Other settings (seed, endpoint, bank): each run made its own users, none shared; the
    # default run's copies sit beside the shared folders, in results/users/.
    shared = sorted(p.name for p in (results / "users").iterdir() if "-" in p.name)
    assert len(shared) == 6, shared
    default = (results / "users" / "user_001" / "persona.json").read_bytes()
    smoke_user = (results / "smoke" / "users" / "user_001" / "persona.json").read_bytes()
    assert default != smoke_user
    # The smoke run's judge is the fake endpoint, which fails calibration (docs/runs.md):
    # expected, and its last word says so.
    last = [ln for ln in runs.smoke_run.stderr.splitlines() if ln.startswith("memprobe:")][-1]
    assert last.startswith("memprobe: warning: judge failed calibration"), last
    assert "results/smoke/judge_calibration.csv" in last


def test_the_missions_command_builds_the_default_run(runs):
    """`snakemake results/table2.csv` is the default run's Table 2 (README): on the finished
    run, nothing to do; a run named after one of the default run's folders is one line."""
    assert runs.wf.scheduled("results/table2.csv", configfile=runs.default, env=runs.env) == {}
    proc = runs.wf.run(
        "-n", "--config", "run={name: nomem}", configfile=runs.default, env=runs.env, check=False
    )
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("memprobe:")]
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr[-2000:]
    assert "run.name: 'nomem' is also the default run's results/nomem" in lines[0]


def _snapshot(root: Path) -> dict[str, tuple[int, str]]:
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for part in ("results", "logs")
        for p in sorted((root / part).rglob("*"))
        if p.is_file()
    }


def test_later_commands_of_one_run_leave_the_other_alone(runs, tmp_path):
    """A dry run, `memprobe job` and `snakemake inspector`, each with its run's own config,
    reschedule and rewrite only that run's files."""
    wf = runs.wf
    default = {"configfile": runs.default, "env": runs.env}
    smoke = {"configfile": runs.smoke}
    before = _snapshot(wf.root)
    for run in (default, smoke):
        assert wf.scheduled(**run) == {}
        assert "Nothing to be done" in (lambda p: p.stdout + p.stderr)(wf.run("inspector", **run))
    assert _snapshot(wf.root) == before

    memprobe = [sys.executable, "-m", "memprobe.cli", "job", *JUDGE]
    # The default run's judge job by hand, on the stand-in model's cached replies.
    llm_env = {
        local_server.BASE_URL_ENV: "http://127.0.0.1:9/v1",
        local_server.MODEL_ID_ENV: yaml.safe_load(runs.default.read_text())["llm"]["local"][
            "sha256"
        ],
        local_server.KEY_ENV: "unused",
    }
    subprocess.run(
        [*memprobe, "--configfile", str(runs.default)],
        cwd=wf.root, env={**os.environ, **llm_env}, check=True, timeout=300,
    )  # fmt: skip
    # The smoke run's, from another folder: the workflow named with --directory.
    subprocess.run(
        [*memprobe, "--configfile", str(runs.smoke), "--directory", str(wf.root)],
        cwd=tmp_path, check=True, timeout=300,
    )  # fmt: skip
    after = _snapshot(wf.root)
    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    # the default run's own files are at the top of results/ and logs/ (docs/runs.md)
    own = {
        "smoke": [p for p in changed if p.split("/")[1] == "smoke"],
        "": [p for p in changed if p.split("/")[1] not in ("smoke", "users")],
    }
    assert sorted(own[""] + own["smoke"]) == sorted(changed), changed
    for name, paths in own.items():
        # its judge file, rewritten byte for byte (the cache replays), its log and its ledger
        judge = "/".join(
            p for p in ("results", name, "longctx_full/user_001/retrieve/judge.json") if p
        )
        assert judge in paths and before[judge][1] == after[judge][1]
        assert all("judge" in p and "user_001" in p for p in paths), paths
    # The rewritten files hold the same bytes: neither run's dry run schedules anything.
    for run in (default, smoke):
        assert wf.scheduled(**run) == {}
