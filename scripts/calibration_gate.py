"""Pass or stop the run on the judge's calibration (rules/calibration.smk says why a marker)."""

import sys

from memprobe import calibration, glue, records


def main(job: glue.Job) -> None:
    p = job.smk.params
    note = calibration.verdict(calibration.read_summary(job.input.summary), p.min_kappa, p.max_bias)
    if note and p.mode == "stop":
        glue.log.error(
            "memprobe: %s (%s); judge.calibration is stop: no rollout started",
            note,
            job.input.summary,
        )
        sys.exit(1)
    records.write_atomic(job.output[0], f"{note or 'judge passed calibration'}\n")


glue.run(main)
