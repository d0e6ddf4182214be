"""The terminal shows the run, not the wire: the HTTP clients' per-request lines go to the
job's log file only (memprobe/workflow/step.py)."""

from __future__ import annotations

import logging

from memprobe.workflow import step


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
