"""What the Snakefile settles at DAG load (memprobe/workflow/dag_load.py): the validated config
with the layer that set a bad key, the backend's checks, the pool, the prompts and the scored
pairs, each a stop in one line."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml

from memprobe.config.loading import load_config
from memprobe.workflow import dag_load
from tests.helpers.workflow import ROOT, tiny_config


def fake_workflow(tmp_path, *files: dict, command_line: dict | None = None):
    """Snakemake's view of the config files: the Snakefile's, then each --configfile."""
    paths = []
    for i, layer in enumerate(files):
        path = tmp_path / f"layer{i}.yaml"
        path.write_text(yaml.safe_dump(layer))
        paths.append(path)
    return SimpleNamespace(
        configfiles=paths,
        overwrite_configfiles=paths[1:],
        config_settings=SimpleNamespace(config=command_line or {}),
    )


def test_the_layers_are_the_snakefile_s_file_then_each_configfile_then_the_command_line(
    tmp_path,
):
    wf = fake_workflow(tmp_path, {"n_users": 1}, {"seed": 3}, command_line={"top_k": 2})
    layers = dag_load.config_layers(wf)
    assert [name.rsplit("/", 1)[-1] for name, _ in layers] == [
        "layer0.yaml", "layer1.yaml", "--config",
    ]  # fmt: skip
    assert layers[-1][1] == {"top_k": 2}


def test_a_bad_key_stops_the_dag_load_in_one_line_naming_its_layer(tmp_path):
    base = tiny_config("http://127.0.0.1:9/v1")
    wf = fake_workflow(tmp_path, base, {"n_users": -1})
    merged = {**base, "n_users": -1}
    with pytest.raises(SystemExit) as stop:
        dag_load.run_config(wf, merged)
    assert str(stop.value).startswith("memprobe: ") and "layer1.yaml: n_users:" in str(stop.value)
    assert dag_load.run_config(fake_workflow(tmp_path, base), base).n_users == base["n_users"]


def test_the_backend_s_cheap_check_stops_the_dag_load(tmp_path):
    raw = tiny_config("http://127.0.0.1:9/v1")
    raw["llm"] = {"backend": "local", "local": {"model_path": str(tmp_path / "none.gguf")}}
    with pytest.raises(SystemExit, match=r"^memprobe: llm\.local\.model_path: .* does not exist"):
        dag_load.run_config(fake_workflow(tmp_path, raw), raw)


@pytest.mark.parametrize("executor", ["slurm", "kubernetes"])
def test_the_local_backend_under_a_cluster_executor_stops_before_the_dag(tmp_path, executor):
    """issue 46: it planned cleanly and was refused only when the run started its server."""
    from memprobe.workflow import compat

    raw = tiny_config("http://127.0.0.1:9/v1")
    local = {"llm": {"backend": "local", "base_url": None}}
    cfg = load_config({**raw, **local})
    dag_load.check_executor(fake_workflow(tmp_path, raw, local), cfg)
    with pytest.raises(SystemExit) as stop:
        compat.check_executor(executor)
    line = str(stop.value)
    assert line.startswith("memprobe: ") and "\n" not in line
    assert "layer1.yaml: llm.backend: 'local'" in line and f"--executor {executor}" in line
    for here in ("local", "dryrun", "touch"):
        compat.check_executor(here)  # the jobs run on this host: nothing to say


def test_a_backend_the_jobs_reach_anywhere_has_no_executor_check(tmp_path):
    from memprobe.workflow import compat

    raw = tiny_config("http://127.0.0.1:9/v1")
    local = load_config({**raw, "llm": {"backend": "local", "base_url": None}})
    dag_load.check_executor(fake_workflow(tmp_path, raw), local)
    dag_load.check_executor(fake_workflow(tmp_path, raw), load_config(raw))  # the last wins
    compat.check_executor("slurm")


def test_a_pool_without_enough_dimensions_stops_the_dag_load(tmp_path):
    pool = ROOT / "config" / "dimension_pool.yaml"
    dag_load.check_pool(str(pool), {"skill_memory": 2})
    with pytest.raises(SystemExit, match="memprobe: "):
        dag_load.check_pool(str(pool), {"skill_memory": 999})
    (tmp_path / "pool.yaml").write_text("categories: [")
    with pytest.raises(SystemExit, match="pool.yaml"):
        dag_load.check_pool(str(tmp_path / "pool.yaml"))


def test_a_stage_s_prompt_is_the_one_the_config_picks_and_a_missing_one_stops(tmp_path):
    cfg = load_config(tiny_config("http://127.0.0.1:9/v1", prompts={"slotfill": "slotfill_x"}))
    assert dag_load.prompt_file(cfg, "slotfill") == "prompts/slotfill_x.md"
    assert dag_load.prompt_file(cfg, "bank_shorten") == "prompts/bank_shorten.md"
    with pytest.raises(SystemExit, match=r"prompts\.slotfill: prompts/slotfill_x\.md: file not"):
        dag_load.check_prompts(cfg, lambda path: "slotfill_x" not in path)


def test_retrieve_needs_a_searchable_system_or_nothing_is_scored():
    cfg = load_config(tiny_config("http://127.0.0.1:9/v1", systems=["nomem", "longctx_full"]))
    assert ("longctx_full", "retrieve") in dag_load.scored_pairs(cfg)
    assert ("nomem", "retrieve") not in dag_load.scored_pairs(cfg)
    only = load_config(tiny_config("http://127.0.0.1:9/v1", systems=["nomem"], modes=["retrieve"]))
    with pytest.raises(SystemExit, match=r"nothing would be scored .*longctx_full"):
        dag_load.scored_pairs(only)


def test_the_release_pool_is_read_only_inside_the_release(tmp_path):
    """Issue 42: bank.pool: release read the release's pool through a link out of the release
    (the importer's check did not apply); it stops the DAG load in one line, and a job that
    reads it after a link was swapped in refuses it too."""
    import shutil

    from memprobe.spec import taxonomy

    fixture = ROOT / "tests" / "fixtures" / "release"
    rel = tmp_path / "release"
    shutil.copytree(fixture, rel, symlinks=True)
    raw = tiny_config("http://127.0.0.1:9/v1")
    raw["users"] = {"release_dir": str(rel)}
    raw["bank"] = {"pool": "release"}
    cfg = load_config(raw)
    pool = rel / cfg.release.pool_file
    assert dag_load.pool(cfg) == str(pool)  # inside: as the config names it
    (tmp_path / "outside.json").write_bytes(pool.read_bytes())
    pool.unlink()
    pool.symlink_to(tmp_path / "outside.json")
    with pytest.raises(SystemExit) as stop:
        dag_load.pool(cfg)
    assert "points outside users.release_dir" in str(stop.value)
    assert "\n" not in str(stop.value)
    with pytest.raises(taxonomy.TaxonomyError, match="points outside users.release_dir"):
        taxonomy.run_pool(cfg, str(pool))  # what the jobs read it with
