"""A rule script's main, called with a job that carries its inputs, config and a recorder."""

from __future__ import annotations

import runpy
from pathlib import Path
from types import SimpleNamespace

from memprobe.config.loading import load_config
from memprobe.spec import records
from memprobe.workflow import step
from memprobe.workflow.config_slices import JobConfig, job_keys
from tests.helpers.recording_llm import RecordingLLM
from tests.helpers.workflow import ROOT, tiny_config


class Input(dict):
    __getattr__ = dict.__getitem__


def script_main(name: str, monkeypatch):
    seen = []
    monkeypatch.setattr(step, "run", seen.append)
    runpy.run_path(str(ROOT / "scripts" / f"{name}.py"))
    return seen[0]


def job(
    rule: str,
    tmp_path: Path,
    compat: dict,
    inputs: dict,
    llm: RecordingLLM,
    mode: str = "dump_all",
):
    """The job of ``rule``: its config is what a job of that rule may read (its slice)."""
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
        cfg=JobConfig(
            rule, load_config(raw).model_dump(mode="json"), job_keys(rule, {"mode": mode})
        ),
        llm=lambda role: llm,
        output=[str(tmp_path / "out.json")],
        wildcards=SimpleNamespace(mode=mode),
    )
