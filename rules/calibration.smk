# Judge calibration (memprobe/protocol/calibration.py): before its B counts, the run's judge
# grades calibration pairs exactly as the judge rule grades labels (same form, prompt, schema
# and role settings): the hand-written anchors of config/judge_calibration.yaml, or with
# judge.calibration.source: release a seeded draw of pairs the paper's judge scored (read from
# the release; the draw's settings are params). It needs only the judge; the tables read its
# verdict.
#
# judge.calibration.on_fail: stop checks the judge in `onstart` (memprobe/workflow/lifecycle.py),
# before any job: a DAG edge from a gate to the first jobs would either rerun every job when
# the calibration reruns, or (as an ancient() input) hide the jobs below it from Snakemake's
# rerun checks.
# The job itself then replays the same calls from the response cache.

import os

ANCHORS = "config/judge_calibration.yaml"
CALIBRATION = f"{R}/judge_calibration.csv"
# The report's opening lines (the judge's verdict), written by the tables job.
REPORT_HEADER = f"{R}/report_header.rst"
# judge.cross_check: the two judges per B cell, written by the tables job.
CROSS_CHECK = f"{R}/judge_cross_check.csv"
DEGENERATE = f"{R}/degenerate_labels.csv"  # its share is one of the run's last lines
# The files a judge reads besides its labels: the prompt (an LLM judge); the offline judge's
# figures (form: scorer, or beside an LLM with cross_check); the pool's axis questions (the
# offline judge and judge.degenerate_as_unknown). Only what is read is an input, so switching
# an option reruns exactly the jobs it changes.
USES_SCORER = CFG.judge.form == "scorer" or CFG.judge.cross_check
JUDGE_FILES = (
    ({"prompt": prompt("recovery_judge")} if CFG.judge.form == "llm" else {})
    | ({"scorer": CFG.judge.scorer} if USES_SCORER else {})
    | ({"pool": POOL} if USES_SCORER or CFG.judge.degenerate_as_unknown else {})
)
# An offline judge calls no LLM: its jobs take no LLM slot.
JUDGE_LLM_SLOTS = LLM_JOB if CFG.judge.form == "llm" else 0
CALIBRATION_FILES = JUDGE_FILES | (
    {"anchors": ANCHORS} if CFG.judge.calibration.source == "anchors" else {}
)


rule judge_calibration:
    input:
        **CALIBRATION_FILES,
        code="scripts/judge_calibration.py",
        lib=library("judge_calibration"),
    output:
        summary=CALIBRATION,
        replies=f"{R}/judge_calibration_replies.csv",
    log:
        job_log("judge_calibration", "run"),
        usage=usage_log("judge_calibration"),
    priority: 1
    conda:
        "../envs/memprobe.yaml"
    resources:
        llm_slots=JUDGE_LLM_SLOTS,
    params:
        **settings("judge_calibration"),
        job=script_job(),
    shell:
        run_script("judge_calibration")
