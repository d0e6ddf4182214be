"""Score the calibration anchors with the run's judge (memprobe/protocol/calibration.py)."""

from memprobe.protocol import calibration
from memprobe.spec import records
from memprobe.workflow import step


def main(job: step.Job) -> None:
    anchors = calibration.load_anchors(job.input.anchors)
    replies = calibration.score_anchors(anchors, job.llm("judge"), job.input.prompt)
    summary = calibration.summarize(replies)
    records.write_atomic(job.output.replies, calibration.replies_csv(replies))
    records.write_atomic(job.output.summary, calibration.summary_csv(summary))
    cfg = job.cfg.judge
    note = calibration.verdict(summary, cfg.min_kappa, cfg.max_bias)
    step.log.info(
        "judge calibration on %d anchors: exact %.2f, within one level %.2f, bias %+.2f, "
        "kappa %.2f (%s the thresholds)",
        summary.n,
        summary.exact,
        summary.within_one,
        summary.bias,
        summary.kappa,
        "below" if note else "within",
    )


step.run(main)
