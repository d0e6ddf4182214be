"""A memory system from its own installed package (tests/plugins/tinymem, the example of
docs/plugins.md), through the ``memprobe.systems`` entry point: it runs in the tiny workflow
next to nomem and gets its Table 2 row in both modes, its store answers `memprobe search`,
its settings are checked under ``system_settings.tinymem``, its installed files (not its
source checkout) trigger reruns, and a plugin that reuses a built-in's name
(tests/plugins/shadow) is refused in one line.

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
MEMPROBE = str(Path(sys.executable).with_name("memprobe"))


def install(package: str, tmp: Path, src: Path | None = None) -> dict[str, str]:
    """pip-install tests/plugins/<package> (a copy outside the repository, or ``src`` again)
    into its own folder, as a user installs a plugin; the env that puts it on the path."""
    if src is None:
        src = tmp / "src" / package
        shutil.copytree(HERE / package, src)  # the build's leftovers stay out of the repository
    site = tmp / f"site-{package}"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--upgrade", "--target", str(site), str(src)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": path}


def memprobe_lines(proc: subprocess.CompletedProcess) -> list[str]:
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out[-2000:]
    return [ln for ln in out.splitlines() if ln.startswith("memprobe:")]


def test_a_searchable_plugin_runs_next_to_nomem_and_its_store_answers_memprobe_search(
    endpoint, workflow_factory, tmp_path
):
    """docs/plugins.md, followed: tinymem, built from its own pyproject outside the repository,
    gets its Table 2 row in both modes next to nomem; its search() results are what the guide
    says (at most k items, each with content and score, best first), and `memprobe search`
    on its store gives back what the probe job recorded."""
    env = install("tinymem", tmp_path)
    cfg = tiny_config(endpoint.base_url, systems=["nomem", "tinymem"])
    cfg["system_settings"] = {"tinymem": {"max_notes": 2, "prefix": "tiny"}}
    wf = workflow_factory(cfg)
    wf.run("tables", env=env)
    results = wf.results
    rows = {r["system"]: r for r in csv.DictReader(open(results / "table2.csv"))}
    assert set(rows) == {"nomem", "tinymem"}
    assert rows["tinymem"]["B_dump_all_mean"] != "" and rows["tinymem"]["B_retrieve_mean"] != ""
    assert rows["nomem"]["B_retrieve_mean"] == ""  # nomem has no search
    # its settings reached it (at most 2 notes, each with its prefix) ...
    memories = json.loads((results / "tinymem/user_001/memories.json").read_text())
    assert memories["num_memories"] == 2
    assert all(m["content"].startswith("tiny: ") for m in memories["memories"])
    # ... its probe recorded search()'s items: at most k, content and score, best first ...
    k = cfg["top_k"]
    retrieved = json.loads((results / f"tinymem/user_001/retrieved_k{k}.json").read_text())
    queries = retrieved["queries"]
    assert len(queries) == 5 and any(q["items"] for q in queries)
    for q in queries:
        scores = [item["score"] for item in q["items"]]
        assert len(scores) <= k and scores == sorted(scores, reverse=True)
        assert all(item["content"].startswith("tiny: ") for item in q["items"])
    # ... and `memprobe search` on its store finds the same, and each note first by its own text.
    notes = [m["content"] for m in memories["memories"]]
    qfile = wf.root / "queries.txt"
    qfile.write_text("\n".join([q["query"] for q in queries] + notes) + "\n")
    store = results / "tinymem/user_001/store"
    proc = subprocess.run(
        [MEMPROBE, "search", "--system", "tinymem", "--store", str(store),
         "--configfile", str(wf.config_path), "--k", str(k), "--queries", str(qfile)],
        cwd=wf.root, capture_output=True, text=True, env={**os.environ, **env},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = [json.loads(line) for line in proc.stdout.splitlines()]
    assert found[: len(queries)] == [q["items"] for q in queries]
    for hits, note in zip(found[len(queries) :], notes, strict=True):
        assert hits[0]["content"] == note and hits[0]["score"] == 1.0
    # Its own prompt file, from its package, is an input of its rollout: editing the
    # installed file reruns tinymem's jobs and no other system's.
    prompt = Path(env["PYTHONPATH"].split(os.pathsep)[0]) / "memprobe_tinymem/prompts"
    note = prompt / "tinymem_note.md"
    note.write_text(note.read_text() + "Keep it short.\n")
    dry = wf.run("tables", "-n", env=env)
    out = dry.stdout
    assert re.search(r"^rollout\s+2$", out, re.M), out[-3000:]  # tinymem's two users
    assert "updated input files:\n        rollout" in out, out[-3000:]
    assert f"output: {wf.target('nomem')}" not in out, out[-3000:]


def test_an_edit_to_the_plugins_source_checkout_reruns_nothing(
    endpoint, workflow_factory, tmp_path
):
    """docs/plugins.md: the installed files are the rule inputs. Reinstalling unchanged files
    reruns nothing, an edit to the source a non-editable install was built from reruns
    nothing, and the same edit, installed, reruns."""
    env = install("tinymem", tmp_path)
    cfg = tiny_config(endpoint.base_url, systems=["tinymem"], modes=["dump_all"], n_users=1)
    wf = workflow_factory(cfg)
    wf.run(wf.target("table2.csv"), env=env)
    source = tmp_path / "src/tinymem/memprobe_tinymem/__init__.py"
    install("tinymem", tmp_path, source.parent.parent)  # the same files again: newer, equal
    assert "Nothing to be done" in wf.run(wf.target("table2.csv"), "-n", env=env).stdout
    source.write_text(source.read_text() + "\n# an edit\n")
    assert "Nothing to be done" in wf.run(wf.target("table2.csv"), "-n", env=env).stdout
    install("tinymem", tmp_path, source.parent.parent)
    dry = wf.run(wf.target("table2.csv"), "-n", env=env).stdout
    assert "updated input files:\n        rollout" in dry, dry[-3000:]


def test_a_bad_plugin_setting_stops_the_run_in_one_line(endpoint, workflow_factory, tmp_path):
    env = install("tinymem", tmp_path)
    cfg = tiny_config(endpoint.base_url, systems=["tinymem"], modes=["dump_all"])
    cfg["system_settings"] = {"tinymem": {"max_notes": 0}}
    wf = workflow_factory(cfg)
    proc = wf.run("tables", env=env, check=False)
    (line,) = memprobe_lines(proc)
    assert proc.returncode != 0
    assert "system_settings.tinymem.max_notes" in line and ">= 1" in line.replace(
        "greater than or equal to", ">="
    ), line
    assert not (wf.root / "results").exists()


def test_a_plugin_named_like_a_built_in_is_refused(endpoint, workflow_factory, tmp_path):
    env = install("shadow", tmp_path)
    wf = workflow_factory(tiny_config(endpoint.base_url))
    proc = wf.run("tables", "-n", env=env, check=False)
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
    wf.run(wf.target("table2.csv"), env=env)
    results = wf.results
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
