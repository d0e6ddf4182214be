"""Where the release keeps each record (memprobe/release/layout.py): run ids, the checks at DAG
load, and every read kept inside the release's folder."""

from __future__ import annotations

import json
import shutil

import pytest

from memprobe.config.loading import load_config
from memprobe.release import importer, layout
from memprobe.spec.records import RecordError
from tests.helpers.release_fixture import (
    FIXTURE,
    REPLAY_RUN,
    cfg_model,
    replay_cfg,
)
from tests.helpers.workflow import tiny_config


def test_missing_release_file_is_named(tmp_path):
    copy = tmp_path / "release"
    shutil.copytree(FIXTURE, copy)
    (copy / "output/longctx_full_pooled_50_retrieve/attribution/user_003.json").unlink()
    with pytest.raises(RecordError, match="missing .*retrieve/attribution/user_003.json"):
        layout.check_layout(cfg_model(release_dir=str(copy)))


def test_release_runs_maps_a_system_to_another_run_folder(tmp_path):
    lay = layout.Layout(cfg_model())
    assert lay.run_id("memt") == "memt_memonly_pooled_50"  # the release's agent name
    assert lay.run_id("longctx_full") == "longctx_full_pooled_50"
    copy = tmp_path / "release"
    shutil.copytree(FIXTURE, copy)
    out = copy / "output"
    for old in sorted(copy.rglob("longctx_full_pooled_50*"), reverse=True):
        if old.is_dir():  # output/<run>, output/<run>_retrieve, memory/<run>, ...
            old.rename(old.with_name(old.name.replace("longctx_full_pooled_50", "longctx_rerun_7")))
    cfg = cfg_model(
        release_dir=str(copy),
        release={"import_runs": True, "runs": {"longctx_full": "longctx_rerun_7"}},
    )
    lay = layout.Layout(cfg)
    assert lay.output_dir("longctx_full", "dump_all") == out / "longctx_rerun_7"
    assert lay.output_dir("longctx_full", "retrieve") == out / "longctx_rerun_7_retrieve"
    mem = importer.memories(lay, "longctx_full", "user_001")
    assert mem.meta == {"source": "release", "run": "longctx_rerun_7"}
    assert mem.memories == importer.memories(layout.Layout(cfg_model()), "longctx_full",
                                            "user_001").memories  # fmt: skip


def test_release_paths_must_stay_inside_the_release_dir(tmp_path):
    from memprobe.release.layout import check_layout
    from memprobe.spec.records import RecordError

    rel = tmp_path / "release"
    rel.mkdir()
    (tmp_path / "outside.json").write_text("{}")
    raw = tiny_config("http://127.0.0.1:9/v1")
    raw["users"] = {"source": "release", "release_dir": str(rel)}
    raw["release"] = {"bank_file": "../outside.json", "tasks_dir": "."}
    with pytest.raises(RecordError, match="outside users.release_dir"):
        check_layout(load_config(raw))
    (rel / "bank.json").symlink_to(tmp_path / "outside.json")
    raw["release"] = {"bank_file": "bank.json", "tasks_dir": "."}
    with pytest.raises(RecordError, match="outside users.release_dir"):
        check_layout(load_config(raw))


def test_every_read_is_checked_inside_the_release_dir_when_it_happens(tmp_path):
    # pref_judge files are optional and merged reports are found by glob: neither is in the
    # DAG-load check's list, so the check must hold when the file is read.
    rel = tmp_path / "release"
    shutil.copytree(FIXTURE, rel)
    secret = {"turns": [{"turn": 1, "per_pref": [{"idx": 0, "score": 1, "reason": "OUTSIDE"}]}]}
    (tmp_path / "secret.json").write_text(json.dumps(secret))
    (tmp_path / "report.json").write_text(json.dumps({"aggregate": {"leak": "OUTSIDE"}}))
    judged = rel / "pref_judge" / "nomem_pooled_50" / "user_001" / "episode_1.json"
    judged.parent.mkdir(parents=True, exist_ok=True)
    judged.unlink(missing_ok=True)
    judged.symlink_to(tmp_path / "secret.json")
    (rel / "output" / "nomem_pooled_50" / "z_merged.json").symlink_to(tmp_path / "report.json")
    cfg = cfg_model(release_dir=str(rel))
    layout.check_layout(cfg)  # neither file is one the DAG load knows about
    lay = layout.Layout(cfg)
    bank = importer.bank(lay, "user_001", cfg.dims_per_category)
    tasks = importer.tasks(lay, "user_001", bank)
    with pytest.raises(RecordError, match="episode_1.json points outside users.release_dir"):
        importer.preference(lay, "nomem", "user_001", tasks)
    report = lay.merged_report("nomem", "dump_all")
    with pytest.raises(RecordError, match="z_merged.json points outside users.release_dir"):
        importer.report_aggregate(lay, report)
    # A file swapped for a link after the DAG load is refused when read, too.
    memories = lay.memories("nomem", "user_001")
    memories.unlink()
    memories.symlink_to(tmp_path / "secret.json")
    with pytest.raises(RecordError, match="outside users.release_dir"):
        importer.memories(lay, "nomem", "user_001")


def test_a_replay_source_is_checked_when_the_dag_loads(tmp_path):
    layout.check_layout(replay_cfg())  # the fixture holds the run for every user
    with pytest.raises(RecordError) as err:
        layout.check_layout(replay_cfg(run="nosuch_pooled_50"))
    assert str(err.value).startswith("rollout.replay: no recorded run 'nosuch_pooled_50' in ")
    assert f"found: amem_pooled_50, {REPLAY_RUN}, mem0_pooled_50" in str(err.value)
    copy = tmp_path / "release"
    shutil.copytree(FIXTURE, copy)
    (copy / "history" / REPLAY_RUN / "user_003" / "episode_8.json").unlink()
    with pytest.raises(RecordError, match=r"rollout.replay: missing .*user_003/episode_8.json"):
        layout.check_layout(replay_cfg(copy))
    shutil.rmtree(copy / "history" / REPLAY_RUN / "user_003")
    with pytest.raises(RecordError, match=f"rollout.replay: run '{REPLAY_RUN}' has no user_003"):
        layout.check_layout(replay_cfg(copy))
