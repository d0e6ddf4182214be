"""Agreement between the LLM's labels and the filled audit sheets (memprobe/audit.py)."""

from memprobe import audit, glue, records


def main(job: glue.Job) -> None:
    text = audit.agreement_csv(list(job.input.sheets), seed=job.smk.params.seed)
    records.write_atomic(job.output[0], text)


glue.run(main)
