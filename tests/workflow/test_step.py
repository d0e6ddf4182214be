"""What every rule script shares (memprobe/workflow/step.py): a job's attempt, its recoveries
file, and one line for a failure."""

from __future__ import annotations

import json

from memprobe.llm.client import ATTEMPT_STRIDE
from memprobe.protocol import users
from memprobe.spec.prompts import prompt_path
from memprobe.workflow import attempts
from tests.helpers.jobs import ScriptJob

USER = {"user": "user_001"}
PROMPT = {"prompt": str(prompt_path("persona_narrative"))}
OUT = {"persona": "persona.json"}


def narrative(seed: int = 7) -> str:
    n = users.sample_attributes(seed, "user_001")["n_stories"]
    return json.dumps(
        {
            "values": "Keeping promises to family matters most.",
            "attitude": "Practical and patient, though short with waste.",
            "coping": "Long walks.",
            "stories": [f"Story {i}: they rebuilt a porch with a neighbour." for i in range(n)],
            "interests": ["woodwork", "radio"],
        }
    )


def test_a_failed_job_samples_anew_on_its_next_attempt_a_finished_one_replays(
    recorder_factory, tmp_path, monkeypatch, capsys
):
    # Two server errors use up the tiny config's 2 transport attempts: the job fails.
    rec = recorder_factory([{"code": 500, "content": ""}] * 2 + [narrative()])
    job = ScriptJob(tmp_path, monkeypatch, "persona", rec.base_url)
    assert job.run(PROMPT, OUT, USER) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert "memprobe: persona: role generator (user user_001, persona): no reply" in err[-1]
    # Its rerun is attempt 1: the request that failed is sent with a new seed.
    assert job.run(PROMPT, OUT, USER) == 0
    assert [b["seed"] for b in rec.bodies] == [7, 7, 7 + ATTEMPT_STRIDE]
    assert job.recoveries(USER).attempt == 1  # recorded for the run's last lines
    # A finished job run again (its output deleted) sends nothing and writes the same bytes.
    made = job.out("persona.json").read_bytes()
    job.out("persona.json").unlink()
    assert job.run(PROMPT, OUT, USER) == 0
    assert len(rec.bodies) == 3 and job.out("persona.json").read_bytes() == made


def test_a_failure_that_is_not_about_the_llm_is_one_line_and_keeps_the_attempt(
    recorder_factory, tmp_path, monkeypatch, capsys
):
    rec = recorder_factory([])
    job = ScriptJob(tmp_path, monkeypatch, "persona", rec.base_url)
    missing = {"prompt": str(tmp_path / "no_such_prompt.md")}
    assert job.run(missing, OUT, USER) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(f"memprobe: persona: {missing['prompt']}: prompt file not found")
    cfg = job.config
    assert attempts.current(cfg["llm"]["cache_dir"], "persona/user_001", 7, cfg["results_dir"]) == 0
    assert rec.bodies == [] and not job.out("persona.json").exists()


def test_a_rejected_request_stops_the_job_in_one_line(
    recorder_factory, tmp_path, monkeypatch, capsys
):
    rec = recorder_factory([{"code": 400, "content": ""}])
    job = ScriptJob(tmp_path, monkeypatch, "persona", rec.base_url)
    assert job.run(PROMPT, OUT, USER) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert "endpoint rejected the request" in err[-1] and len(rec.bodies) == 1


def test_attempt_counter_is_per_job_seed_and_results_dir(tmp_path):
    cache = str(tmp_path)
    assert attempts.current(cache, "bank/user_001", 0, "results") == 0
    assert attempts.bump(cache, "bank/user_001", 0, "results") == 1
    assert attempts.bump(cache, "bank/user_001", 0, "results") == 2
    assert attempts.current(cache, "bank/user_001", 1, "results") == 0
    assert attempts.current(cache, "bank/user_002", 0, "results") == 0
    assert attempts.current(cache, "bank/user_001", 0, "elsewhere") == 0
