"""Calibration against the paper's judge (memprobe/release/judge_verdicts.py): the seeded,
stratified draw from the release's recorded verdicts, and a replies file whose κ and bias
recompute from its own rows."""

from __future__ import annotations

import csv
import io
from collections import Counter

import pytest

from memprobe.config.loading import load_config
from memprobe.protocol import calibration
from memprobe.protocol.judge import JudgeReply
from memprobe.protocol.slotfill import is_unknown
from memprobe.release import judge_verdicts
from memprobe.spec.rubric import LEVELS
from tests.helpers.workflow import ROOT, tiny_config

RELEASE = ROOT / "tests" / "fixtures" / "release"


def test_verdicts_are_the_judged_labels_of_the_listed_users_in_every_run():
    found = judge_verdicts.verdicts(RELEASE, {1, 2})
    assert {v.user for v in found} == {"user_001", "user_002"}
    assert not any(is_unknown(v.label) for v in found)
    runs = {v.run for v in found}
    assert {"mem0_pooled_50", "mem0_pooled_50_retrieve", "longctx_full_pooled_50"} <= runs
    assert "_task_design_oracle" not in runs


def test_the_draw_is_seeded_and_equal_per_recorded_level():
    drawn = judge_verdicts.release_anchors(str(RELEASE), "1-2", 10, seed=0)
    assert Counter(a.score for a in drawn.items) == dict.fromkeys(LEVELS, 2)
    assert {a.user for a in drawn.items} <= {"user_001", "user_002"}
    assert all(a.kind == "recorded" and a.run for a in drawn.items)
    again = judge_verdicts.release_anchors(str(RELEASE), "1-2", 10, seed=0)
    other = judge_verdicts.release_anchors(str(RELEASE), "1-2", 10, seed=1)
    assert [a.id for a in again.items] == [a.id for a in drawn.items]
    assert [a.id for a in other.items] != [a.id for a in drawn.items]


def test_a_draw_larger_than_a_level_holds_is_one_line():
    with pytest.raises(ValueError, match=r"only \d+ recorded pairs at level 0, 50 needed"):
        judge_verdicts.release_anchors(str(RELEASE), "1-3", 250, seed=0)
    with pytest.raises(ValueError, match="no <run>/recon_judge"):
        judge_verdicts.verdicts(ROOT / "config", {1})


def test_the_replies_file_lists_each_pair_and_its_kappa_and_bias_recompute():
    pairs = judge_verdicts.release_anchors(str(RELEASE), "1-3", 25, seed=0)

    def lenient(items):  # a judge one level too generous below 1.0
        recorded = {f"calibration pair {a.id}": a.score for a in pairs.items}
        return [JudgeReply(reason="r", score=min(1.0, recorded[it.where] + 0.25)) for it in items]

    replies = calibration.score_anchors(pairs, lenient)
    summary = calibration.summarize(replies)
    rows = list(csv.DictReader(io.StringIO(calibration.replies_csv(replies))))
    assert len(rows) == 25
    assert {"user", "run", "dimension", "truth", "label", "expected", "judged"} <= set(rows[0])
    assert all(r["user"].startswith("user_00") and r["run"] for r in rows)
    # κ and bias from the file's own columns: recorded (expected) vs ours (judged)
    recorded = [float(r["expected"]) for r in rows]
    ours = [float(r["judged"]) for r in rows]
    k = len(LEVELS)
    confusion = [[0] * k for _ in range(k)]
    for a, b in zip(recorded, ours, strict=True):
        confusion[LEVELS.index(a)][LEVELS.index(b)] += 1
    assert calibration.quadratic_kappa(confusion) == pytest.approx(summary.kappa)
    assert sum(b - a for a, b in zip(recorded, ours, strict=True)) / 25 == pytest.approx(
        summary.bias
    )
    assert summary.bias == pytest.approx(0.2)  # 20 of 25 pairs one level up


def test_calibration_from_the_release_is_configured_in_one_place():
    cfg = load_config(
        tiny_config(
            "http://x/v1",
            release_dir=str(RELEASE),
            judge={"calibration": {"source": "release", "n": 25, "users": "1-3"}},
        )
    )
    cal = cfg.judge.calibration
    assert cal.release_dir == str(RELEASE)  # the run's release_dir when unset
    pairs = judge_verdicts.calibration_pairs(cfg, "config/judge_calibration.yaml")
    assert len(pairs.items) == 25 and all(a.kind == "recorded" for a in pairs.items)
    anchors = judge_verdicts.calibration_pairs(
        load_config(tiny_config("http://x/v1")), ROOT / "config" / "judge_calibration.yaml"
    )
    assert all(a.kind != "recorded" for a in anchors.items)


def test_calibration_pairs_are_read_only_inside_the_release(tmp_path):
    """Issue 42: the release's verdicts are read with the importer's check, at read time: a
    judged file, or a whole run folder, linked out of the release is refused in one line."""
    import shutil

    from memprobe.spec.records import RecordError

    rel = tmp_path / "release"
    shutil.copytree(RELEASE, rel, symlinks=True)
    judged = sorted((rel / "output").glob("*/recon_judge/user_001.json"))[0]
    (tmp_path / "secret.json").write_bytes(judged.read_bytes())
    judged.unlink()
    judged.symlink_to(tmp_path / "secret.json")
    with pytest.raises(RecordError, match="user_001.json points outside") as err:
        judge_verdicts.verdicts(rel, {1})
    assert "\n" not in str(err.value)
    judged.unlink()
    judged.write_bytes((tmp_path / "secret.json").read_bytes())
    run = judged.parent.parent
    shutil.move(run, tmp_path / "run")
    run.symlink_to(tmp_path / "run")
    with pytest.raises(RecordError, match="points outside"):
        judge_verdicts.verdicts(rel, {1})
