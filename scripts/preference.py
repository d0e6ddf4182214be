from memprobe.protocol import preference
from memprobe.spec import records
from memprobe.workflow import step


def main(job: step.Job) -> None:
    result = preference.judge_preferences(
        records.load(job.input.episodes, records.Episodes),
        records.load(job.input.bank, records.Bank),
        job.llm("preference"),
        job.input.prompt,
    )
    records.write_atomic(job.output[0], result)


step.run(main)
