"""What every rule script shares (memprobe/workflow/step.py): a job's attempt, its recoveries
file, one line for a failure, and the terminal shows the run, not the wire (the HTTP clients'
per-request lines go to the job's log file only)."""

from __future__ import annotations

import json
import logging
import shutil

from memprobe.config.loading import load_config
from memprobe.llm.client import ATTEMPT_STRIDE
from memprobe.protocol.persona import sample_attributes
from memprobe.spec.prompts import prompt_path
from memprobe.workflow import attempts, step
from tests.helpers.jobs import ScriptJob

USER = {"user": "user_001"}
PROMPT = {"prompt": str(prompt_path("persona_narrative"))}
OUT = {"persona": "persona.json"}


def narrative(seed: int = 7) -> str:
    n = sample_attributes(seed, "user_001")["n_stories"]
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
    ledger = str(job.usage(USER))
    assert attempts.current(cfg["llm"]["cache_dir"], "persona/user_001", 7, ledger) == 0
    assert rec.bodies == [] and not job.out("persona.json").exists()


def test_a_rejected_request_stops_the_job_in_one_line(
    recorder_factory, tmp_path, monkeypatch, capsys
):
    rec = recorder_factory([{"code": 400, "content": ""}])
    job = ScriptJob(tmp_path, monkeypatch, "persona", rec.base_url)
    assert job.run(PROMPT, OUT, USER) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert "endpoint rejected the request" in err[-1] and len(rec.bodies) == 1


def test_http_request_lines_go_to_the_log_file_not_the_terminal(tmp_path, capsys):
    log = tmp_path / "job.log"
    try:
        step.setup_logging(str(log))
        wire = logging.getLogger("httpx2")  # the client the providers send with
        wire.info('HTTP Request: POST http://127.0.0.1:1/v1/chat/completions "HTTP/1.1 200 OK"')
        logging.getLogger("openai._base_client").info("Retrying request to /chat/completions")
        wire.warning("connection pool is full")
        step.log.info("judge calibration on 47 pairs")
        for h in logging.getLogger().handlers:
            h.flush()
        terminal = capsys.readouterr().err
        written = log.read_text()
    finally:
        logging.getLogger().handlers.clear()
    assert "HTTP Request: POST" in written and "Retrying request" in written
    assert "HTTP Request" not in terminal and "Retrying request" not in terminal
    assert "connection pool is full" in terminal  # a warning still reaches the terminal
    assert "judge calibration on 47 pairs" in terminal and "judge calibration" in written


def test_inside_snakemake_the_wire_goes_to_its_own_file(tmp_path, caplog):
    log = tmp_path / "onstart.log"
    with caplog.at_level(logging.INFO):
        with step.wire_to(str(log)):
            logging.getLogger("httpx2").info("HTTP Request: POST http://127.0.0.1:1/v1")
        logging.getLogger("httpx2").info("after the block")
    assert "HTTP Request: POST" in log.read_text()
    assert "HTTP Request" not in caplog.text  # never reached the root (Snakemake's) handlers
    assert "after the block" in caplog.text and "after the block" not in log.read_text()


def test_a_job_run_by_hand_keeps_the_run_s_bill_and_adds_only_what_it_paid(
    recorder_factory, tmp_path, monkeypatch
):
    """`memprobe job` on a finished job replays its calls: the ledger, which the estimate's
    rates count, keeps the run's rows and gains none for the replays; a call it pays is on it."""
    from memprobe.llm.ledger import read_rows
    from memprobe.report import estimate_rates

    rec = recorder_factory([narrative(), narrative()])
    job = ScriptJob(tmp_path, monkeypatch, "persona", rec.base_url)
    assert job.run(PROMPT, OUT, USER) == 0
    bill = read_rows([job.usage(USER)])
    assert [r["cached"] for r in bill] == ["false"]
    rates = estimate_rates.observed(tmp_path / "results", load_config(job.config))

    monkeypatch.setenv(step.BY_HAND_ENV, "1")
    assert job.run(PROMPT, OUT, USER) == 0  # replayed from the cache, nothing sent
    assert len(rec.bodies) == 1 and read_rows([job.usage(USER)]) == bill
    again = estimate_rates.observed(tmp_path / "results", load_config(job.config))
    assert again is not None and rates is not None and again.tokens == rates.tokens

    shutil.rmtree(tmp_path / "cache")  # nothing to replay: the hand run pays, and says so
    assert job.run(PROMPT, OUT, USER) == 0
    paid = read_rows([job.usage(USER)])
    assert len(rec.bodies) == 2 and [r["cached"] for r in paid] == ["false", "false"]

    monkeypatch.delenv(step.BY_HAND_ENV)  # Snakemake forcing the same job: replays are listed
    assert job.run(PROMPT, OUT, USER) == 0
    assert [r["cached"] for r in read_rows([job.usage(USER)])][-1] == "true"
