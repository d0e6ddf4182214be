"""scripts/judge.py passes the compat switches to the library (its ``main`` is called with a
job that carries the inputs, the config and a recorder; no Snakemake run)."""

from __future__ import annotations

import pytest

from memprobe.spec import records
from memprobe.spec.prompts import prompt_path
from memprobe.spec.records import SlotFill, SlotFillEntry
from tests.helpers.recording_llm import RecordingLLM
from tests.helpers.recovery_case import BANK
from tests.helpers.scripts import job, script_main


@pytest.mark.parametrize("on", [False, True])
def test_judge_unknown_labels_reaches_the_judge(on, tmp_path, monkeypatch):
    main = script_main("judge", monkeypatch)
    slotfill = SlotFill(
        user_id="user_001",
        system="memt",
        mode="dump_all",
        overflow=False,
        memory_tokens=10,
        entries=[
            SlotFillEntry(category=e.category, dimension=e.dimension, label="unknown", reason="")
            for e in BANK.entries
        ],
    )
    llm = RecordingLLM(lambda m, s: {"score": 0.25, "reason": "r"})
    inputs = {"slotfill": slotfill, "bank": BANK, "prompt": str(prompt_path("recovery_judge"))}
    main(job("judge", tmp_path, {"judge_unknown_labels": on}, inputs, llm))
    out = records.load(tmp_path / "out.json", records.Judge)
    assert len(llm.requests) == (2 if on else 0)
    assert out.overall == (0.25 if on else 0.0)
