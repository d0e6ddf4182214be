"""The compat switches reach the library through the rule scripts (no Snakemake run: each
script's ``main`` is called with a job that carries the inputs, the config and a recorder)."""

from __future__ import annotations

import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

from memprobe.config import load_config
from memprobe.protocol import records
from memprobe.protocol.prompts import prompt_path
from memprobe.protocol.records import SlotFill, SlotFillEntry
from memprobe.workflow import glue
from tests.conftest import ROOT, tiny_config
from tests.protocol import test_attribution as att
from tests.protocol.test_recovery import BANK
from tests.recording_llm import RecordingLLM


class Input(dict):
    __getattr__ = dict.__getitem__


def script_main(name: str, monkeypatch):
    seen = []
    monkeypatch.setattr(glue, "run", seen.append)
    runpy.run_path(str(ROOT / "scripts" / f"{name}.py"))
    return seen[0]


def job(tmp_path: Path, compat: dict, inputs: dict, llm: RecordingLLM, mode: str = "dump_all"):
    raw = tiny_config("http://127.0.0.1:9/v1")
    raw["compat"] = compat
    files = {}
    for key, value in inputs.items():
        if isinstance(value, str):
            files[key] = value
        else:
            files[key] = str(tmp_path / f"{key}.json")
            records.write_atomic(files[key], value)
    return SimpleNamespace(
        input=Input(files),
        cfg=load_config(raw),
        llm=lambda role: llm,
        output=[str(tmp_path / "out.json")],
        wildcards=SimpleNamespace(mode=mode),
    )


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
    main(job(tmp_path, {"judge_unknown_labels": on}, inputs, llm))
    out = records.load(tmp_path / "out.json", records.Judge)
    assert len(llm.requests) == (2 if on else 0)
    assert out.overall == (0.25 if on else 0.0)


@pytest.mark.parametrize(
    ("on", "mode", "empty"),
    [(False, "retrieve", False), (True, "retrieve", True), (True, "dump_all", False)],
)
def test_retrieve_attribution_empty_transcript_only_in_retrieve_mode(
    on, mode, empty, tmp_path, monkeypatch
):
    main = script_main("attribution", monkeypatch)
    llm = RecordingLLM(att.answer)
    inputs = {
        "judge": att.judge(mode),
        "bank": att.BANK,
        "tasks": att.TASKS,
        "episodes": att.EPISODES,
        "oracle": att.ORACLE,
        **att.PROMPTS,
    }
    main(job(tmp_path, {"retrieve_attribution_empty_transcript": on}, inputs, llm, mode))
    stage1 = llm.prompt_text(0)
    assert ("USER-REVEALED-1" not in stage1) is empty
    assert records.load(tmp_path / "out.json", records.Attribution).mode == mode
