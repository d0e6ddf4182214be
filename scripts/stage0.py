from memprobe.protocol import attribution, records
from memprobe.workflow import glue


def main(job: glue.Job) -> None:
    oracle = attribution.run_oracle(
        records.load(job.input.bank, records.Bank),
        records.load(job.input.tasks, records.Tasks),
        job.llm("oracle"),
        job.input.prompt,
    )
    records.write_atomic(job.output[0], oracle)


glue.run(main)
