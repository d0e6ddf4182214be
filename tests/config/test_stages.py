"""The protocol stages' blocks (memprobe/config/stages.py): the judge's settings, the users'
generation and the prompt files, each bad value one line naming its key."""

from __future__ import annotations

import pytest

from memprobe.config.base import ConfigError
from memprobe.config.loading import load_config
from memprobe.config.stages import PROMPT_STAGES, PromptFiles, parse_users
from tests.helpers.workflow import tiny_config


@pytest.mark.parametrize(
    ("judge", "message"),
    [
        ({"calibration": {"source": "release"}}, "judge.calibration.release_dir: required"),
        ({"calibration": {"n": 201}}, "judge.calibration.n: 201: expected a multiple of 5"),
        ({"calibration": {"users": "26-x"}}, "judge.calibration.users: '26-x': expected"),
        ({"form": "scorer", "cross_check": True}, "cross_check: the offline judge would"),
    ],
)
def test_bad_judge_settings_are_one_line_naming_the_key(judge, message):
    with pytest.raises(ConfigError, match=message):
        load_config(tiny_config("http://x/v1", judge=judge))


def test_judge_settings_are_validated():
    cfg = load_config(tiny_config("http://x/v1"))
    judge = cfg.judge
    assert (judge.calibration.on_fail, judge.min_kappa, judge.max_bias) == ("warn", 0.6, 0.15)
    assert (judge.form, judge.calibration.source) == ("llm", "anchors")
    with pytest.raises(ConfigError, match="judge.calibration"):
        load_config(tiny_config("http://x/v1", judge={"calibration": "halt"}))
    # the earlier shorthand `judge.calibration: stop` still means on_fail: stop
    stop = load_config(tiny_config("http://x/v1", judge={"calibration": "stop"}))
    assert stop.judge.calibration.on_fail == "stop"


def test_user_ranges_parse_and_a_bad_part_is_named():
    assert parse_users("26-28,30") == {26, 27, 28, 30}
    assert parse_users(" 5 ") == {5}
    for bad in ("3-1", "1-x", "", "1,,2"):
        with pytest.raises(ValueError, match="expected user numbers or ranges"):
            parse_users(bad)


def test_every_stage_reads_its_own_prompt_file_by_default():
    picked = PromptFiles()
    assert [getattr(picked, stage) for stage in PROMPT_STAGES] == list(PROMPT_STAGES)
    with pytest.raises(ConfigError, match=r"prompts\.task_write: String should match pattern"):
        load_config(tiny_config("http://x/v1", prompts={"task_write": "Task Write"}))
