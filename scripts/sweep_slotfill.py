from memprobe.protocol import records, recovery, taxonomy
from memprobe.workflow import glue


def main(job: glue.Job) -> None:
    result = recovery.slotfill_user(
        user_id=job.wildcards.user,
        system=job.wildcards.system,
        mode="retrieve",
        bank=records.load(job.input.bank, records.Bank),
        guides=taxonomy.load_guides(job.input.guides),
        llm=job.llm("slotfill"),
        prompt=job.input.prompt,
        retrieved=records.load(job.input.memory, records.Retrieved),
    )
    records.write_atomic(job.output[0], result)


glue.run(main)
