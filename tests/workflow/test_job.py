"""One job run by hand (`memprobe job`) writes what Snakemake wrote, byte for byte; jobs run on
the interpreter that runs Snakemake, so a venv's snakemake works without activating the venv."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from memprobe.workflow.job import JobError, parse_wildcards
from tests.helpers.workflow import tiny_config

JUDGE = "longctx_full/user_001/retrieve/judge.json"  # in the run's folder


def test_wildcards_are_name_value_pairs():
    assert parse_wildcards(["user=user_001", "mode=a=b"]) == {"user": "user_001", "mode": "a=b"}
    for bad in ("user", "=user_001"):
        with pytest.raises(JobError, match="expected WILDCARD=VALUE"):
            parse_wildcards([bad])


@pytest.mark.workflow
def test_a_judge_job_run_by_hand_writes_the_file_snakemake_wrote(endpoint, workflow_factory):
    wf = workflow_factory(tiny_config(endpoint.base_url))
    venv_bin = str(Path(sys.executable).parent)  # not resolved: the venv's own bin/
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != venv_bin)
    env = {"PATH": path, "VIRTUAL_ENV": ""}  # as if the venv were never activated
    wf.run(wf.target(JUDGE), env=env)
    out = wf.results / JUDGE
    by_snakemake = out.read_bytes()
    out.unlink()
    ledger = wf.results / "usage/judge/longctx_full_user_001_retrieve.csv"
    bill = ledger.read_text()

    wildcards = ["user=user_001", "system=longctx_full", "mode=retrieve"]
    cmd = [sys.executable, "-m", "memprobe.cli", "job", "judge", *wildcards]
    subprocess.run(
        [*cmd, "--configfile", str(wf.config_path)],
        cwd=wf.root,
        env={**os.environ, **env},
        check=True,
        timeout=300,
    )
    assert out.read_bytes() == by_snakemake
    # Its calls were replayed: the run's bill stands, without them (memprobe estimate's rates).
    assert ledger.read_text() == bill

    # A job whose input was never built is one line, and writes nothing.
    proc = subprocess.run(
        [
            *cmd[:-3],
            "user=user_002",
            "system=longctx_full",
            "mode=retrieve",
            "--configfile",
            str(wf.config_path),
        ],  # fmt: skip
        cwd=wf.root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("memprobe job: job judge")
    assert "is missing" in proc.stderr
    assert not (wf.results / "longctx_full/user_002/retrieve/judge.json").exists()

    def mistake(*args: str) -> str:
        """The one line a mistaken `memprobe job` ends with (nothing else on stderr)."""
        p = subprocess.run(
            [*cmd[:-3], *args], cwd=wf.root, capture_output=True, text=True, timeout=300
        )
        assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-3000:]
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1, p.stderr
        return lines[0]

    # A job the run never makes: nomem has no search, so no retrieve-mode judge.
    line = mistake(
        "user=user_001", "system=nomem", "mode=retrieve", "--configfile", str(wf.config_path)
    )
    assert "judge user=user_001 system=nomem mode=retrieve: not a job of the run" in line, line
    assert "its judge jobs are like" in line and "--configfile" in line
    # Another config under the run's name: the run's files were made under other settings.
    other = wf.root / "other.yaml"
    other.write_text(yaml.safe_dump({**wf.config, "seed": wf.config.get("seed", 0) + 1}))
    line = mistake(*wildcards, "--configfile", str(other))
    assert "was made with other settings than" in line and str(other) in line, line
    assert "give the run's --configfile" in line
    # The run's --configfile left out: the default run's job, whose files are not there.
    line = mistake(*wildcards)
    assert "is missing" in line and "input results/" in line, line
    assert f"results/{wf.name}/" not in line, line  # the default run's: results/ itself
    assert out.read_bytes() == by_snakemake  # neither wrote anything
