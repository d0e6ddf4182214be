from memprobe.protocol import attribution
from memprobe.spec import records
from memprobe.workflow import step


def main(job: step.Job) -> None:
    oracle = attribution.run_oracle(
        records.load(job.input.bank, records.Bank),
        records.load(job.input.tasks, records.Tasks),
        job.llm("oracle"),
        job.input.prompt,
    )
    records.write_atomic(job.output[0], oracle)


step.run(main)
