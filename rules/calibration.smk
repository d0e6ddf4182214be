# Judge calibration (memprobe/protocol/calibration.py): before its B counts, the run's judge scores the
# hand-written anchors of config/judge_calibration.yaml with the judge rule's own prompt,
# schema and role settings. It needs only the judge role; the tables read its verdict.
#
# judge.calibration: stop checks the judge in `onstart` (rules/common.smk), before any job:
# a DAG edge from a gate to the first jobs would either rerun every job when the calibration
# reruns, or (as an ancient() input) hide the jobs below it from Snakemake's rerun checks.
# The job itself then replays the same calls from the response cache.

import os

from memprobe.protocol import calibration

ANCHORS = "config/judge_calibration.yaml"
CALIBRATION = f"{R}/judge_calibration.csv"
# The report's opening lines (the judge's verdict), written by the tables job.
REPORT_HEADER = f"{R}/report_header.rst"
# judge.degenerate_as_unknown: the judge jobs read the pool's axis questions. Otherwise no
# extra input, so turning the option on or off reruns exactly the judge jobs.
DEGENERATE_POOL = {"pool": POOL} if CFG.judge.degenerate_as_unknown else {}


rule judge_calibration:
    input:
        code="scripts/judge_calibration.py",
        lib=library("judge_calibration"),
        anchors=ANCHORS,
        prompt=prompt("recovery_judge"),
    output:
        summary=CALIBRATION,
        replies=f"{R}/judge_calibration_replies.csv",
    log:
        "logs/judge_calibration.log",
        usage=usage_log("judge_calibration"),
    priority: 1
    conda:
        "../envs/memprobe.yaml"
    resources:
        llm_slots=1,
    params:
        **settings("judge_calibration"),
        job=script_job(),
    shell:
        run_script("judge_calibration")
