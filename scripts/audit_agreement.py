"""Agreement between the LLM's labels and the filled audit sheets (memprobe/report/audit.py)."""

from memprobe.protocol import records
from memprobe.report import audit
from memprobe.workflow import glue


def main(job: glue.Job) -> None:
    text = audit.agreement_csv(list(job.input.sheets), seed=job.smk.params.seed)
    records.write_atomic(job.output[0], text)


glue.run(main)
