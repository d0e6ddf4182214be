from memprobe.protocol import preference, records
from memprobe.workflow import glue


def main(job: glue.Job) -> None:
    result = preference.judge_preferences(
        records.load(job.input.episodes, records.Episodes),
        records.load(job.input.bank, records.Bank),
        job.llm("preference"),
        job.input.prompt,
    )
    records.write_atomic(job.output[0], result)


glue.run(main)
