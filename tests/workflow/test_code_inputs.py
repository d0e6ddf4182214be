"""A rule's library inputs are the modules its script runs, found from the imports
(memprobe/workflow/code_inputs.py), and every rule declares those of the script it runs."""

from __future__ import annotations

import re
import shutil
import sys

import pytest

from memprobe.workflow import code_inputs
from tests.helpers.workflow import ROOT, tiny_config


def rule_blocks() -> dict[str, str]:
    """rule name -> its text, for every rule of rules/*.smk."""
    blocks = {}
    for path in sorted((ROOT / "rules").glob("*.smk")):
        parts = re.split(r"^\s*rule (\w+):\n", path.read_text(encoding="utf-8"), flags=re.M)
        blocks |= dict(zip(parts[1::2], parts[2::2], strict=True))
    return blocks


def test_every_rule_declares_the_modules_of_the_script_it_runs():
    checked = 0
    for rule, text in rule_blocks().items():
        script = re.search(r'(?:code="|script:\s+"\.\./)scripts/(\w+)\.py"', text)
        if script is None:
            continue  # runs no script (rule all)
        lib = re.search(r'lib=library\("(\w+)"\)', text)
        assert lib, f"rule {rule}: runs scripts/{script.group(1)}.py but declares no lib input"
        assert lib.group(1) == script.group(1), (rule, lib.group(1), script.group(1))
        checked += 1
    assert checked >= 19


def test_the_judge_runs_the_taxonomy_it_reads():
    """The hand-kept list this replaces left spec.taxonomy out of the judge's inputs."""
    assert code_inputs.logic_modules(str(ROOT / "scripts/judge.py")) == (
        "memprobe.protocol.judge",
        "memprobe.protocol.judge_form",
        "memprobe.protocol.offline_judge",
        "memprobe.protocol.opposites",
        "memprobe.protocol.slotfill",
        "memprobe.spec.rubric",
        "memprobe.spec.taxonomy",
    )
    # the rollout runs the bank module, whose bank block the simulator reads
    assert "memprobe.protocol.bank" in code_inputs.logic_modules(str(ROOT / "scripts/rollout.py"))


def test_each_users_stage_runs_its_own_module_and_those_before_it_only():
    """A module per rule: the task writer's module is no input of a persona or bank job."""
    modules = {
        stage: code_inputs.logic_modules(str(ROOT / f"scripts/{stage}.py"))
        for stage in ("persona", "bank", "tasks")
    }
    assert modules["persona"] == ("memprobe.protocol.persona",)
    assert "memprobe.protocol.tasks" not in modules["bank"] + modules["persona"]
    assert "memprobe.protocol.bank" not in modules["tasks"] + modules["persona"]
    assert "memprobe.protocol.tasks" in modules["tasks"]


def test_imports_are_followed_through_logic_not_plumbing(tmp_path):
    script = tmp_path / "step.py"
    script.write_text(
        "from memprobe.workflow import step\n"
        "from memprobe.spec import records\n"
        "def main():\n    from memprobe.report import audit  # lazy: counted too\n"
    )
    found = code_inputs.logic_modules(str(script))
    assert "memprobe.report.audit" in found
    assert "memprobe.report.inspect_site" in found  # audit imports it
    assert not [m for m in found if m.startswith(("memprobe.workflow", "memprobe.spec.records"))]
    assert code_inputs.module_files(str(script))[0].endswith(".py")


def second_checkout(root) -> None:
    """``root`` given a package of its own, as a second checkout sharing this venv has."""
    shutil.copytree(ROOT / "memprobe", root / "memprobe", ignore=shutil.ignore_patterns("*.pyc"))
    (root / "scripts").mkdir(exist_ok=True)


def test_jobs_import_the_package_the_venv_installed():
    """This venv is installed from this checkout: its jobs run its own code."""
    assert code_inputs.jobs_package(sys.executable, ROOT) == ROOT / "memprobe"
    assert code_inputs.foreign_code(ROOT, sys.executable) is None


def test_a_checkout_whose_jobs_run_another_s_package_is_named_in_one_line(tmp_path):
    """issue 46: two checkouts sharing one venv: the DAG loads this one's package (the
    Snakefile's folder comes first), the jobs import the venv's, so code inputs and code part."""
    assert code_inputs.foreign_code(tmp_path, sys.executable) is None  # no package: the venv's
    second_checkout(tmp_path)
    line = code_inputs.foreign_code(tmp_path, sys.executable)
    assert line and "\n" not in line, line
    assert line.startswith(f"{tmp_path}: its jobs would import the memprobe package at {ROOT}/")
    assert f"run from {ROOT}" in line


@pytest.mark.workflow
def test_a_second_checkout_sharing_the_venv_stops_at_dag_load(workflow_factory):
    wf = workflow_factory(tiny_config("http://127.0.0.1:9/v1"))
    wf.scheduled()  # a copy of the workflow alone plans: its jobs and its DAG use the venv's
    second_checkout(wf.root)
    proc = wf.run("-n", check=False)
    said = [ln for ln in proc.stderr.splitlines() if ln.startswith("memprobe:")]
    assert proc.returncode != 0 and len(said) == 1, proc.stderr[-3000:]
    assert f"{wf.root}: its jobs would import the memprobe package at {ROOT}" in said[0]


def test_a_later_snakemake_reads_the_kept_imports_and_parses_an_edited_file_again(
    tmp_path, monkeypatch
):
    """keep_imports_in: the first reader parses and keeps each file's imports; the next finds
    the same text's imports there and parses nothing; an edited file is parsed again."""
    monkeypatch.setattr(code_inputs, "_kept", None)  # undone after the test, failed or not
    script = tmp_path / "job.py"
    script.write_text("from memprobe.protocol import bank\n")
    first = code_inputs.logic_modules.__wrapped__(str(script))
    code_inputs.keep_imports_in(tmp_path / "kept")
    assert code_inputs.logic_modules.__wrapped__(str(script)) == first
    assert (tmp_path / "kept" / "imports.json").is_file()

    code_inputs.keep_imports_in(tmp_path / "kept")  # the next process
    parsed = []
    real_parse = code_inputs._parse
    monkeypatch.setattr(code_inputs, "_parse", lambda text: parsed.append(text) or real_parse(text))
    assert code_inputs.logic_modules.__wrapped__(str(script)) == first
    assert parsed == []
    script.write_text("from memprobe.protocol import judge\n")
    code_inputs.imported.cache_clear()
    assert "memprobe.protocol.judge" in code_inputs.logic_modules.__wrapped__(str(script))
    assert parsed[0] == "from memprobe.protocol import judge\n"  # then judge's own modules
    bank = (code_inputs.PACKAGE / "protocol" / "bank.py").read_text(encoding="utf-8")
    assert bank not in parsed  # kept from the first reader
    code_inputs.imported.cache_clear()
