"""The release's file formats as we read them (memprobe/release/formats.py): extra keys are the
release's leftovers and pass; a file without what we read is one line naming the key."""

from __future__ import annotations

import json

import pytest

from memprobe.release.formats import RawEpisode, RawReconJudge
from memprobe.release.layout import Layout
from memprobe.spec.records import RecordError
from tests.helpers.release_fixture import FIXTURE, cfg_model


def test_every_recorded_episode_of_the_fixture_reads():
    episodes = sorted((FIXTURE / "history").rglob("episode_*.json"))
    assert episodes
    for path in episodes:
        assert RawEpisode.model_validate_json(path.read_text()).turns is not None


def test_a_leftover_key_passes_and_a_missing_one_is_named(tmp_path):
    lay = Layout(cfg_model(release_dir=str(tmp_path)))
    (recon,) = list((FIXTURE / "output").glob("*/recon_judge/user_001.json"))[:1]
    raw = json.loads(recon.read_text())
    raw["a_leftover_of_the_release"] = 1
    path = tmp_path / "recon.json"
    path.write_text(json.dumps(raw))
    assert lay.load(path, RawReconJudge)
    del raw["details"]
    path.write_text(json.dumps(raw))
    with pytest.raises(RecordError) as err:
        lay.load(path, RawReconJudge)
    assert str(err.value).startswith(f"{path}: ") and "details" in str(err.value)
    assert "\n" not in str(err.value)
