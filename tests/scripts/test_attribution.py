"""scripts/attribution.py passes the compat switches to the library (its ``main`` is called
with a job that carries the inputs, the config and a recorder; no Snakemake run)."""

from __future__ import annotations

import pytest

from memprobe.spec import records
from tests.helpers.attribution_case import BANK, EPISODES, ORACLE, PROMPTS, TASKS, answer, judge
from tests.helpers.recording_llm import RecordingLLM
from tests.helpers.scripts import job, script_main


@pytest.mark.parametrize(
    ("on", "mode", "empty"),
    [(False, "retrieve", False), (True, "retrieve", True), (True, "dump_all", False)],
)
def test_retrieve_attribution_empty_transcript_only_in_retrieve_mode(
    on, mode, empty, tmp_path, monkeypatch
):
    main = script_main("attribution", monkeypatch)
    llm = RecordingLLM(answer)
    inputs = {
        "judge": judge(mode),
        "bank": BANK,
        "tasks": TASKS,
        "episodes": EPISODES,
        "oracle": ORACLE,
        **PROMPTS,
    }
    main(
        job(
            "attribution",
            tmp_path,
            {"retrieve_attribution_empty_transcript": on},
            inputs,
            llm,
            mode,
        )
    )
    stage1 = llm.prompt_text(0)
    assert ("USER-REVEALED-1" not in stage1) is empty
    assert records.load(tmp_path / "out.json", records.Attribution).mode == mode
