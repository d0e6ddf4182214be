"""Agreement between the LLM's labels and the filled audit sheets (memprobe/report/audit.py)."""

from memprobe.report import audit
from memprobe.spec import records
from memprobe.workflow import step


def main(job: step.Job) -> None:
    text = audit.agreement_csv(list(job.input.sheets), seed=job.smk.params.seed)
    records.write_atomic(job.output[0], text)


step.run(main)
