"""Grade the calibration pairs with the run's judge (memprobe/protocol/calibration.py)."""

from memprobe.protocol import calibration, judge_form
from memprobe.release import judge_verdicts
from memprobe.spec import records
from memprobe.workflow import step


def main(job: step.Job) -> None:
    files = dict(job.input.items())
    pairs = judge_verdicts.calibration_pairs(job.cfg, files.get("anchors", ""))
    # Its outputs are tables: its stand-ins are handed to the job (step.Job.stand_ins).
    grade = judge_form.grader(
        job.cfg, lambda: job.llm("judge"), files.get("prompt"), files.get("pool"), job.stand_ins
    )
    replies = calibration.score_anchors(pairs, grade)
    summary = calibration.summarize(replies)
    records.write_atomic(job.output.replies, calibration.replies_csv(replies))
    records.write_atomic(job.output.summary, calibration.summary_csv(summary))
    cfg = job.cfg.judge
    note = calibration.verdict(summary, cfg.min_kappa, cfg.max_bias)
    step.log.info(
        "judge calibration (%s, %s) on %d pairs: exact %.2f, within one level %.2f, "
        "bias %+.2f, kappa %.2f (%s the thresholds)",
        cfg.form,
        cfg.calibration.source,
        summary.n,
        summary.exact,
        summary.within_one,
        summary.bias,
        summary.kappa,
        "below" if note else "within",
    )


step.run(main)
