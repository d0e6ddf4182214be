"""Reading and merging config layers (memprobe/config/loading.py): Snakemake's merge, one line
naming the layer that set a bad key, and the run stopped before any job."""

from __future__ import annotations

import copy
import json
import subprocess

import pytest
import yaml
from snakemake.utils import update_config

from memprobe.config.base import ConfigError
from memprobe.config.loading import (
    WORKFLOW_CONFIG,
    load_config,
    load_layers,
    read_config_file,
    snakemake_merge,
)
from tests.helpers.workflow import ROOT, SNAKEMAKE, tiny_config


def base() -> dict:
    return tiny_config("http://127.0.0.1:9/v1")


@pytest.mark.workflow
@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda c: c.update(systems=["nomem", "gpt_memory"]), "unknown system 'gpt_memory'"),
        (lambda c: c.update(n_users=-1), "n_users:"),
        (lambda c: c["dims_per_category"].update(hobby_memory=2), "dims_per_category.hobby_memory"),
        (lambda c: c["llm"].pop("base_url"), "llm.base_url: required"),
        (lambda c: None, "llm.base_url: endpoint http://127.0.0.1:9/v1 is unreachable"),
        (
            lambda c: c.update(prompts={"user_simulator": "no_such_prompt"}),
            "prompts.user_simulator: prompts/no_such_prompt.md: file not found",
        ),
    ],
    ids=[
        "unknown-system",
        "negative-users",
        "unknown-category",
        "missing-base-url",
        "unreachable",
        "missing-prompt-file",
    ],
)
def test_bad_input_stops_the_run_with_one_line_and_no_artifact(change, expected, workflow_factory):
    raw = base()  # port 9 (discard) has no listener: the endpoint is unreachable
    change(raw)
    wf = workflow_factory(raw)
    # The default config must not fill in what this test removed: make it the test's own.
    (wf.root / "config" / "config.yaml").write_text(wf.config_path.read_text())
    proc = wf.run("tables", check=False)
    assert proc.returncode != 0
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("memprobe: ")]
    assert len(lines) == 1 and expected in lines[0], proc.stderr[-2000:]
    assert not (wf.root / "results").exists()


def test_duplicate_yaml_keys_are_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("n_users: 1\nllm:\n  backend: fake\n  backend: openai\n")
    with pytest.raises(ConfigError, match="line 4: key 'backend' appears twice"):
        read_config_file(path)


@pytest.mark.parametrize("text", ["? [a, b]\n: 1\n", "n_users: 1\n? {x: 1}\n: 2\n"])
def test_an_unhashable_yaml_key_is_one_line(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"c\.yaml: line \d+: a key must be a plain value") as err:
        read_config_file(path)
    assert "\n" not in str(err.value)


BASE = {"n_users": 1, "systems": ["nomem"], "llm": {"backend": "fake"}}


def dry_run(*args: str) -> subprocess.CompletedProcess:
    """`snakemake -n` in the repository with the default config plus ``args``."""
    return subprocess.run(
        [SNAKEMAKE, "-n", "-q", "--cores", "1", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.workflow
def test_nested_config_on_the_command_line_reaches_the_model():
    """The form docs/configuration.md shows: a YAML mapping for a nested key, merged key by key."""
    proc = dry_run("--config", "llm={concurrency: 0}")
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1] == (
        "memprobe: --config: llm.concurrency: Input should be greater than or equal to 1"
    )
    # the other llm keys of config/config.yaml survive the nested override
    assert dry_run("--config", "llm={concurrency: 2}").returncode == 0


@pytest.mark.workflow
def test_a_command_line_typo_is_blamed_on_the_command_line():
    proc = dry_run("--config", "n_user=3")
    assert proc.stderr.strip().splitlines()[-1] == "memprobe: --config: n_user: unknown key"


@pytest.mark.workflow
def test_top_k_can_be_set_on_the_command_line():
    """Snakemake's --config takes keys of two or more letters: the key is top_k."""
    proc = subprocess.run(
        [SNAKEMAKE, "-n", "--cores", "1", "--config", "top_k=10"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "retrieved_k10.json" in proc.stdout and "retrieved_k5.json" not in proc.stdout


def test_the_old_key_k_names_its_new_name():
    with pytest.raises(ConfigError) as err:
        load_layers([("config/config.yaml", BASE), ("old.yaml", {"k": 10})])
    assert str(err.value) == "old.yaml: k: renamed top_k (write top_k: 10, or --config top_k=...)"


def test_errors_name_the_layer_that_set_the_key():
    layers = [("config/config.yaml", BASE), ("site.yaml", {"llm": {"timeout_s": -1}})]
    with pytest.raises(ConfigError, match=r"^site\.yaml: llm\.timeout_s: "):
        load_layers(layers)
    # a key nobody set (or a rule across keys) names every layer
    with pytest.raises(ConfigError, match=r"^a\.yaml \+ b\.yaml: n_users: required key"):
        load_layers([("a.yaml", {"systems": ["nomem"]}), ("b.yaml", {"llm": {"backend": "fake"}})])


def test_a_roles_typo_lists_the_roles():
    with pytest.raises(ConfigError) as err:
        load_config({**BASE, "llm": {"backend": "fake", "roles": {"judgee": {"model": "m"}}}})
    msg = str(err.value)
    assert "llm.roles.judgee: unknown key" in msg and "judge" in msg and "oracle" in msg
    assert "skill_memory" not in msg


@pytest.mark.workflow
def test_a_config_that_scores_nothing_stops_before_any_job():
    proc = dry_run("--config", "systems=[nomem]", "modes=[retrieve]")
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("memprobe: systems ['nomem'] x modes ['retrieve']: nothing would be")


# -- one merge, Snakemake's (issue 32) --------------------------------------------------------
SCALAR_UNDER_EMPTY = {"top_k": {}, "llm": {"max_tokens": {}}}  # `{}` over config.yaml's scalars


def test_an_empty_mapping_over_a_scalar_keeps_the_scalar_as_snakemake_does():
    """Snakemake's update_config keeps a scalar under `{}`; the config that is validated is
    merged by that same function, so it is the config the jobs read."""
    base = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    snakemake = copy.deepcopy(base)
    update_config(snakemake, copy.deepcopy(SCALAR_UNDER_EMPTY))
    assert snakemake["top_k"] == 5 and snakemake["llm"]["max_tokens"] == 1000
    assert snakemake_merge([base, SCALAR_UNDER_EMPTY]) == snakemake
    cfg = load_layers([("config/config.yaml", base), ("over.yaml", SCALAR_UNDER_EMPTY)])
    assert cfg == load_config(snakemake)
    assert cfg.top_k == 5 and cfg.llm.max_tokens == 1000


@pytest.mark.workflow
def test_the_config_validated_at_dag_load_is_the_config_the_jobs_read(workflow_factory):
    wf = workflow_factory(base())
    over = wf.root / "over.yaml"
    over.write_text(yaml.safe_dump(SCALAR_UNDER_EMPTY))
    proc = subprocess.run(
        [SNAKEMAKE, "-n", "tables", "--cores", "1", "--configfile", str(wf.config_path),
         str(over)],
        cwd=wf.root, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    # The DAG was built from the validated config: top_k is 5 (the probe's file names it).
    assert "retrieved_k5.json" in proc.stdout
    # What every job reads (memprobe/workflow/shell_job.py) holds the same values.
    (exported,) = (wf.root / ".snakemake" / "memprobe").glob("config-*.json")
    jobs = json.loads(exported.read_text())
    assert jobs["top_k"] == 5 and jobs["llm"]["max_tokens"] == 1000
    layers = [
        (str(f), yaml.safe_load(f.read_text()))
        for f in (wf.root / WORKFLOW_CONFIG, wf.config_path, over)
    ]
    assert load_config(jobs) == load_layers(layers)


def test_the_smoke_config_takes_another_port_from_the_command_line():
    """tests/configs/tiny.yaml and the README: `--config 'llm={base_url: ...}'` changes the
    endpoint only (Snakemake merges the mapping into the file's llm block)."""
    tiny = yaml.safe_load((ROOT / "tests" / "configs" / "tiny.yaml").read_text())
    base = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cli = {"llm": yaml.safe_load('{base_url: "http://127.0.0.1:9000/v1"}')}
    cfg = load_layers([("config/config.yaml", base), ("tiny.yaml", tiny), ("--config", cli)])
    assert cfg.llm.base_url == "http://127.0.0.1:9000/v1"
    assert cfg.llm.backend == tiny["llm"]["backend"] and cfg.run.name == "smoke"
    assert "--port 9000" in (ROOT / "README.md").read_text()
