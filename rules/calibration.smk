# Judge calibration (memprobe/calibration.py): before its B counts, the run's judge scores the
# hand-written anchors of config/judge_calibration.yaml with the judge rule's own prompt,
# schema and role settings. It needs only the judge role and runs first.
#
# The gate marker orders the run: persona and rollout name it as an ancient() input, so they
# wait for it on a fresh run but never rerun because it was rewritten. With
# judge.calibration: stop a failed judge fails the gate: one line, no rollout started.

import os

from memprobe import calibration

ANCHORS = "config/judge_calibration.yaml"
CALIBRATION = f"{R}/judge_calibration.csv"
CALIBRATION_GATE = f"{R}/judge_calibration.ok"
# The report's opening lines (the judge's verdict), written by the tables job.
REPORT_HEADER = f"{R}/report_header.rst"
# judge.degenerate_as_unknown: the judge jobs read the pool's axis questions. Otherwise no
# extra input, so turning the option on or off reruns exactly the judge jobs.
DEGENERATE_POOL = {"pool": POOL} if CFG.judge.degenerate_as_unknown else {}


rule judge_calibration:
    input:
        code="scripts/judge_calibration.py",
        anchors=ANCHORS,
        prompt=prompt("recovery_judge"),
    output:
        summary=CALIBRATION,
        replies=f"{R}/judge_calibration_replies.csv",
    log:
        "logs/judge_calibration.log",
    conda:
        "../envs/memprobe.yaml"
    resources:
        llm_slots=1,
    params:
        job=script_job(),
    shell:
        run_script("judge_calibration")


rule calibration_gate:
    input:
        code="scripts/calibration_gate.py",
        summary=CALIBRATION,
    output:
        CALIBRATION_GATE,
    log:
        "logs/calibration_gate.log",
    localrule: True
    conda:
        "../envs/memprobe.yaml"
    params:
        job=script_job(
            mode=CFG.judge.calibration,
            min_kappa=CFG.judge.min_kappa,
            max_bias=CFG.judge.max_bias,
        ),
    shell:
        run_script("calibration_gate")
