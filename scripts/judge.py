from memprobe import glue, records, recovery


def main(job: glue.Job) -> None:
    result = recovery.judge_user(
        records.load(job.input.slotfill, records.SlotFill),
        records.load(job.input.bank, records.Bank),
        job.llm("judge"),
        job.input.prompt,
        judge_unknown=job.cfg.compat.judge_unknown_labels,
    )
    records.write_atomic(job.output[0], result)


glue.run(main)
