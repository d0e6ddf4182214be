"""A named run's folders are none of the default run's entries (memprobe/workflow/run_names.py)."""

from __future__ import annotations

import pytest
import yaml

from memprobe.config.loading import load_config
from memprobe.workflow import run_names
from tests.helpers.workflow import ROOT, tiny_config


def cfg(name: str):
    return load_config(tiny_config("http://127.0.0.1:9/v1") | {"run": {"name": name}})


def rule_files(name: str) -> list[tuple[str, str]]:
    """A few of the rules' outputs and logs as the Snakefile sees them under run ``name``."""
    run, logs = f"results/{name}", f"logs/{name}"
    return [
        ("rollout", f"{run}/{{system}}/{{user}}/episodes.json"),
        ("rollout", f"{logs}/rollout/{{system}}/{{user}}.log"),
        ("tables", f"{run}/figures/category_b.png"),
        ("tables", f"{run}/table2.csv"),
        ("probe", f"{run}/{{system}}/{{user}}/retrieved_k{{k}}.json"),
        ("audit", f"{run}/audit_{{sample}}/sheet.csv"),
        ("persona", "results/users/persona-0a1b/{user}/persona.json"),  # shared: not the run's
    ]


def test_the_default_run_has_no_name_to_check():
    assert run_names.clash(cfg(""), rule_files("")) is None


@pytest.mark.parametrize(
    ("name", "where", "what"),
    [
        # any registered system's folder, also of a system this config does not run
        ("nomem", "results/nomem", "system nomem's files"),
        ("mem0", "results/mem0", "system mem0's files"),
        # a fixed entry of a rule's outputs, and a file
        ("figures", "results/figures", "rule tables's files"),
        ("table2.csv", "results/table2.csv", "rule tables's files"),
        # a name a wildcard entry can take
        ("audit_pilot", "results/audit_pilot", "rule audit's files"),
        # a rule's log folder, of a rule in this workflow and of one in another config's
        ("rollout", "logs/rollout", "rule rollout's logs"),
        ("import_runs", "logs/import_runs", "rule import_runs's logs"),
        # written outside the rules
        ("slurm", "logs/slurm", "the SLURM profile's job logs, its slurm-logdir"),
        ("report.html", "results/report.html", "the report (snakemake --report)"),
    ],
)
def test_a_name_the_default_run_uses_is_one_line(name, where, what):
    line = run_names.clash(cfg(name), rule_files(name))
    assert line == (
        f"run.name: {name!r} is also the default run's {where} ({what}), so the two runs' "
        "files would mix; choose another name"
    )


@pytest.mark.parametrize("name", ["smoke", "paper", "default", "audit", "persona-0a1b", "nomem2"])
def test_other_names_are_free(name):
    assert run_names.clash(cfg(name), rule_files(name)) is None


SHIPPED = sorted(
    p.relative_to(ROOT).as_posix()
    for p in [*ROOT.glob("config/*.yaml"), *ROOT.glob("config/examples/*.yaml")]
    if "run" in (yaml.safe_load(p.read_text(encoding="utf-8")) or {})
)


@pytest.mark.parametrize("path", SHIPPED)
def test_each_shipped_configs_run_name_is_free(path):
    """config/replay.yaml's run was named `replay`, which is also rule replay's log folder of
    the default run: the shipped command stopped at DAG load."""
    name = yaml.safe_load((ROOT / path).read_text(encoding="utf-8"))["run"]["name"]
    assert name and run_names.clash(cfg(name), rule_files(name)) is None, path
