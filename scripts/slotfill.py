from memprobe.protocol import records, recovery, taxonomy
from memprobe.workflow import glue


def main(job: glue.Job) -> None:
    mode = job.wildcards.mode
    memories = retrieved = None
    if mode == "dump_all":
        memories = records.load(job.input.memory, records.Memories).memories
    else:
        retrieved = records.load(job.input.memory, records.Retrieved)
    result = recovery.slotfill_user(
        user_id=job.wildcards.user,
        system=job.wildcards.system,
        mode=mode,
        bank=records.load(job.input.bank, records.Bank),
        guides=taxonomy.load_guides(job.input.guides),
        llm=job.llm("slotfill"),
        prompt=job.input.prompt,
        memories=memories,
        retrieved=retrieved,
        context_tokens=job.cfg.slotfill.context_tokens,
        overflow=job.cfg.slotfill.overflow,
    )
    records.write_atomic(job.output[0], result)


glue.run(main)
