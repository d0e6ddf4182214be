"""Where a run's files go (memprobe/workflow/paths.py, docs/runs.md)."""

from __future__ import annotations

import copy

import pytest

from memprobe.config.base import ConfigError
from memprobe.config.loading import load_config
from memprobe.workflow import paths
from tests.helpers.workflow import tiny_config

RAW = tiny_config("http://127.0.0.1:9/v1")
FILES = {"persona": ["prompts/persona_narrative.md"], "bank": ["prompts/bank_select.md"]}


def folders(change=None, files=FILES, **raw) -> dict[str, str]:
    cfg = copy.deepcopy(RAW) | raw
    if change:
        change(cfg)
    return paths.users_folders(load_config(cfg), files=files)


def test_a_run_owns_its_folders_and_shares_its_users():
    p = paths.of(load_config(RAW), files=FILES)
    assert (p.results, p.logs) == ("results/smoke", "logs/smoke")
    assert p.results_of("judge") == "results/smoke" and p.logs_of("judge") == "logs/smoke"
    assert p.results_of("bank") == p.users["bank"] == f"results/users/{folders()['bank']}"
    assert p.logs_of("tasks") == f"logs/users/{folders()['tasks']}"
    default = paths.of(load_config({k: v for k, v in RAW.items() if k != "run"}), files=FILES)
    # The default run (no name): results/ and logs/ themselves; its users are the same files.
    assert (default.results, default.logs) == ("results", "logs") and default.users == p.users
    assert default.results_of("judge") == "results" and default.logs_of("judge") == "logs"


def test_each_users_file_is_keyed_by_what_it_is_made_from():
    """A setting re-keys the files made from it and the files made after them, no other."""
    base = folders()
    assert list(base) == ["persona", "bank", "tasks"]
    assert all(name.startswith(f"{part}-") for part, name in base.items())
    assert folders(n_users=5, top_k=3, max_turns=9) == base  # not users settings

    def changed(other: dict[str, str]) -> list[str]:
        return [part for part in base if other[part] != base[part]]

    assert changed(folders(tasks={"max_edits": 1})) == ["tasks"]
    assert changed(folders(bank={"pool_sample": 3})) == ["bank", "tasks"]
    assert changed(folders(seed=8)) == ["persona", "bank", "tasks"]
    assert changed(folders(lambda c: c["llm"].update(model="other"))) == [
        "persona",
        "bank",
        "tasks",
    ]
    critic = folders(lambda c: c["llm"].update(roles={"critic": {"temperature": 0.3}}))
    assert changed(critic) == ["tasks"]
    # a file a config picks (a prompt, the pool) is part of it too
    other_prompt = {**FILES, "bank": ["prompts/another_bank_select.md"]}
    assert changed(folders(files=other_prompt)) == ["bank", "tasks"]


def test_imported_users_share_one_folder_keyed_by_the_release(tmp_path):
    raw = {"users": {"source": "release", "release_dir": str(tmp_path / "a")}}
    a = folders(**raw)
    assert len(set(a.values())) == 1 and a["persona"].startswith("release-")
    b = folders(users={"source": "release", "release_dir": str(tmp_path / "b")})
    assert a != b


@pytest.mark.parametrize("name", ["users", "a/b", "..", "-x", " "])
def test_a_run_name_is_one_folder_and_not_the_shared_users(name):
    with pytest.raises(ConfigError, match=r"^config: run\.name: "):
        load_config(RAW | {"run": {"name": name}})


def test_a_runs_users_folders_come_from_its_config_alone():
    """`memprobe estimate` finds a run's users as the Snakefile keys them, from the config only:
    the prompt files and the pool the config picks for the users rules (paths.users_files)."""
    cfg = load_config(RAW)
    files = paths.users_files(cfg)
    assert files["bank"] == ["prompts/bank_select.md", "config/dimension_pool.yaml"]
    assert paths.users_folders(cfg) == paths.users_folders(cfg, files=files)
    paper = {**RAW, "prompts": {"bank_select": "bank_select_paper"}}
    moved = paths.users_folders(load_config(paper))
    assert [p for p in moved if moved[p] != paths.users_folders(cfg)[p]] == ["bank", "tasks"]


def test_another_run_is_found_by_its_name_beside_this_one(tmp_path):
    cfg = load_config(tiny_config("http://127.0.0.1:9/v1", results_dir=str(tmp_path)))
    assert cfg.run_folder("release") == f"{tmp_path}/release"
    assert cfg.run_folder(cfg.run.name) == cfg.run_dir  # as this run's own
    assert paths.runs_with_tables(cfg) == []
    for name in ("release", "half_done", "users"):
        (tmp_path / name).mkdir()
    (tmp_path / "release" / paths.SCORED).write_text("{}")
    (tmp_path / "users" / paths.SCORED).write_text("{}")  # the shared users, never a run
    assert paths.runs_with_tables(cfg) == ["release"]


def test_the_default_run_is_found_by_its_empty_name(tmp_path):
    raw = tiny_config("http://127.0.0.1:9/v1", results_dir=str(tmp_path))
    named = load_config({**raw, "run": {"name": "mine"}})
    default = load_config({**raw, "run": {"name": ""}})
    assert named.run_folder("") == str(tmp_path) == default.run_dir
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / paths.SCORED).write_text("{}")
    (tmp_path / paths.SCORED).write_text("{}")
    assert paths.runs_with_tables(named) == ["", "mine"]
