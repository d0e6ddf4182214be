"""A memory system from its own installed package (tests/plugins/tinymem), through the
``memprobe.systems`` entry point: it runs in the tiny workflow and gets its Table 2 row, its
settings are checked under ``system_settings.tinymem``, and a plugin that reuses a built-in's
name (tests/plugins/shadow) is refused in one line.

The packages are installed for real (pip, into a folder on PYTHONPATH for the Snakemake
subprocess), so importlib.metadata finds their entry points as it would in a user's venv.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.workflow import tiny_config

pytestmark = pytest.mark.workflow

HERE = Path(__file__).resolve().parent


def install(package: str, tmp: Path) -> dict[str, str]:
    """pip-install tests/plugins/<package> into its own folder; the env that puts it on the path."""
    src = tmp / "src" / package
    shutil.copytree(HERE / package, src)  # the build's leftovers stay out of the repository
    site = tmp / f"site-{package}"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--target", str(site), str(src)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": path}


def memprobe_lines(proc: subprocess.CompletedProcess) -> list[str]:
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out[-2000:]
    return [ln for ln in out.splitlines() if ln.startswith("memprobe:")]


def test_plugin_runs_in_the_tiny_workflow_and_gets_its_table2_row(
    endpoint, workflow_factory, tmp_path
):
    env = install("tinymem", tmp_path)
    cfg = tiny_config(endpoint.base_url, systems=["nomem", "tinymem"], modes=["dump_all"])
    cfg["system_settings"] = {"tinymem": {"max_notes": 2, "prefix": "tiny"}}
    wf = workflow_factory(cfg)
    wf.run("results/table2.csv", env=env)
    results = wf.root / "results"
    rows = {r["system"]: r for r in csv.DictReader(open(results / "table2.csv"))}
    assert set(rows) == {"nomem", "tinymem"}
    assert rows["tinymem"]["B_dump_all_mean"] != ""
    # its settings reached it (at most 2 notes, each with its prefix) ...
    memories = (results / "tinymem" / "user_001" / "memories.json").read_text()
    assert '"num_memories": 2' in memories and '"content": "tiny: ' in memories
    # ... and its own prompt file, from its package, is an input of its rollout: editing it
    # reruns tinymem's jobs and no other system's.
    prompt = Path(env["PYTHONPATH"].split(os.pathsep)[0]) / "memprobe_tinymem/prompts"
    note = prompt / "tinymem_note.md"
    note.write_text(note.read_text() + "Keep it short.\n")
    dry = wf.run("results/table2.csv", "-n", env=env)
    out = dry.stdout
    assert re.search(r"^rollout\s+2$", out, re.M), out[-3000:]  # tinymem's two users
    assert "updated input files:\n        rollout" in out, out[-3000:]
    assert "output: results/nomem" not in out, out[-3000:]


def test_a_bad_plugin_setting_stops_the_run_in_one_line(endpoint, workflow_factory, tmp_path):
    env = install("tinymem", tmp_path)
    cfg = tiny_config(endpoint.base_url, systems=["tinymem"], modes=["dump_all"])
    cfg["system_settings"] = {"tinymem": {"max_notes": 0}}
    wf = workflow_factory(cfg)
    proc = wf.run("results/table2.csv", env=env, check=False)
    (line,) = memprobe_lines(proc)
    assert proc.returncode != 0
    assert "system_settings.tinymem.max_notes" in line and ">= 1" in line.replace(
        "greater than or equal to", ">="
    ), line
    assert not (wf.root / "results").exists()


def test_a_plugin_named_like_a_built_in_is_refused(endpoint, workflow_factory, tmp_path):
    env = install("shadow", tmp_path)
    wf = workflow_factory(tiny_config(endpoint.base_url))
    proc = wf.run("results/table2.csv", "-n", env=env, check=False)
    (line,) = memprobe_lines(proc)
    assert proc.returncode != 0
    assert "'longctx_full'" in line and "built-in" in line, line


def test_a_replayed_plugin_gets_its_table2_row_marked_as_replayed(
    endpoint, workflow_factory, tmp_path
):
    from tests.helpers.release_fixture import recorded, release_users_config

    run = "mem0_pooled_50"  # any recorded run: a plugin was never in the paper's
    env = install("tinymem", tmp_path)
    cfg = release_users_config(
        endpoint.base_url, n_users=2, systems=["tinymem"], modes=["dump_all"],
        rollout={"replay": run},
    )  # fmt: skip
    wf = workflow_factory(cfg)
    wf.run("results/table2.csv", env=env)
    results = wf.root / "results"
    (row,) = csv.DictReader(open(results / "table2.csv"))
    assert row["system"] == "tinymem" and row["conversations"] == f"replay: {run}"
    assert row["B_dump_all_mean"] != "" and row["D_mean"] == ""
    (flags,) = csv.DictReader(open(results / "table2_flags.csv"))
    assert "not applicable" in flags["D_mean"] and run in flags["A"]
    # its notes: one per recorded user message it was shown (turn 1: the task), no more
    memories = json.loads((results / "tinymem" / "user_001" / "memories.json").read_text())
    shown = sum(len(ep["turns"]) for ep in recorded(run, "user_001"))
    assert memories["num_memories"] == shown
    rows = [r for f in (results / "usage").rglob("*.csv") for r in csv.DictReader(open(f))]
    assert {r["role"] for r in rows if r["job"].startswith("replay/")} == {"writer"}
