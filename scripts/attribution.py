from memprobe.protocol import attribution
from memprobe.spec import records
from memprobe.workflow import step


def main(job: step.Job) -> None:
    # A retrieve-mode setting: in the slice of retrieve jobs only.
    retrieve = job.wildcards.mode == "retrieve"
    empty = retrieve and job.cfg.compat.retrieve_attribution_empty_transcript
    result = attribution.attribute_user(
        records.load(job.input.judge, records.Judge),
        records.load(job.input.bank, records.Bank),
        records.load(job.input.tasks, records.Tasks),
        records.load(job.input.episodes, records.Episodes),
        records.load(job.input.oracle, records.Oracle),
        job.llm("disclosure"),
        {"disclosure": job.input.disclosure, "subclass": job.input.subclass},
        empty_transcript=empty,
    )
    records.write_atomic(job.output[0], result)


step.run(main)
