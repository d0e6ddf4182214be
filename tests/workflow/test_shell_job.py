"""Shell script jobs get what `script:` gave them: named files, wildcards, params, config."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memprobe.config.loading import load_config
from memprobe.workflow import shell_job

BASE = {"n_users": 1, "systems": ["nomem"], "llm": {"backend": "fake"}}

ROOT = Path(__file__).resolve().parents[2]


class FakeNamedlist(list):
    """What Snakemake hands a params function: a list with named entries."""

    def __init__(self, names: dict):
        flat = []
        for v in names.values():
            flat += v if isinstance(v, list) else [v]
        super().__init__(flat)
        self._names = names

    def items(self):
        return self._names.items()


def test_render_and_spec_job_round_trip(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(shell_job.CONFIG_ENV, raising=False)  # restored (unset) afterwards
    shell_job.export_config(load_config({**BASE, "seed": 3}))
    spec = shell_job.render(
        FakeNamedlist({"user": "user_001", "system": "amem"}),
        FakeNamedlist({"bank": "b.json", "judge": ["j1.json", "j2.json"], "prompt": "p.md"}),
        FakeNamedlist({"table": "t.csv"}),
        {"ks": [5, 10]},
    )
    job = shell_job.SpecJob("judge", "logs/x.log", "results/usage/judge/x.csv", spec)
    assert job.rule == "judge" and job.log == ["logs/x.log", "results/usage/judge/x.csv"]
    assert job.log.usage == "results/usage/judge/x.csv"
    assert job.input.bank == "b.json" and job.input.judge == ["j1.json", "j2.json"]
    assert list(job.input) == ["b.json", "j1.json", "j2.json", "p.md"]
    assert dict(job.input.items())["prompt"] == "p.md"
    assert job.output[0] == "t.csv" == job.output.table
    assert dict(job.wildcards) == {"system": "amem", "user": "user_001"}
    assert list(job.wildcards) == ["user_001", "amem"]  # the rule's order, not sorted
    assert job.wildcards.user == "user_001"
    assert job.params.ks == [5, 10]
    assert shell_job.run_config()["seed"] == 3  # the run's validated config, not a param
    with pytest.raises(AttributeError):
        job.input.missing  # noqa: B018


def test_the_config_file_is_content_addressed_and_outside_the_params(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(shell_job.CONFIG_ENV, raising=False)  # restored (unset) afterwards
    a = shell_job.export_config(load_config({**BASE, "llm": {"backend": "fake", "concurrency": 1}}))
    b = shell_job.export_config(load_config({**BASE, "llm": {"backend": "fake", "concurrency": 8}}))
    assert a != b and a.exists() and b.exists()
    assert os.environ[shell_job.CONFIG_ENV] == str(b.resolve())
    assert json.loads(a.read_text())["llm"]["concurrency"] == 1  # a running job's file stays


def test_a_script_run_by_hand_says_how_it_is_run(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != shell_job.CONFIG_ENV}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "judge.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode != 0
    assert "RULE LOG USAGE JOB_JSON" in proc.stderr and "Traceback" not in proc.stderr


def test_a_job_starts_without_importing_snakemake(tmp_path):
    """A shell job (scripts/judge.py, stopped by its missing input) never imports Snakemake."""
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"n_users": 1, "systems": ["nomem"], "llm": {"backend": "fake"}}))
    spec = json.dumps({"input": {"all": [], "names": {"slotfill": "missing.json"}},
                       "output": {"all": ["j.json"], "names": {}},
                       "wildcards": {"user": "user_001"}, "params": {}})  # fmt: skip
    code = (
        "import atexit, runpy, sys\n"
        "atexit.register(lambda: print('imported:', sorted({m.split('.')[0] for m in "
        "sys.modules} & {'snakemake', 'snakemake_interface_common'})))\n"
        f"sys.argv = ['judge.py', 'judge', 'j.log', 'u.csv', {spec!r}]\n"
        f"runpy.run_path({str(ROOT / 'scripts' / 'judge.py')!r}, run_name='__main__')\n"
    )
    env = {**os.environ, shell_job.CONFIG_ENV: str(cfg)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert "missing.json" in proc.stderr  # it ran as far as reading its input
    assert "imported: []" in proc.stdout
