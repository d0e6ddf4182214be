from memprobe.protocol import slotfill
from memprobe.spec import records, taxonomy
from memprobe.workflow import step


def main(job: step.Job) -> None:
    # Rule slotfill_sweep (retrieve mode at the sweep's other ks) has no mode wildcard.
    mode = dict(job.wildcards).get("mode", "retrieve")
    if mode == "dump_all":
        read = {
            "memories": records.load(job.input.memory, records.Memories).memories,
            "context_tokens": job.cfg.slotfill.context_tokens,
            "overflow": job.cfg.slotfill.overflow,
        }
    else:  # the store's budget and overflow strategy apply to dump_all only
        read = {"retrieved": records.load(job.input.memory, records.Retrieved)}
    result = slotfill.slotfill_user(
        user_id=job.wildcards.user,
        system=job.wildcards.system,
        mode=mode,
        bank=records.load(job.input.bank, records.Bank),
        guides=taxonomy.load_guides(job.input.guides),
        llm=job.llm("slotfill"),
        prompt=job.input.prompt,
        **read,
    )
    records.write_atomic(job.output[0], result)


step.run(main)
