from memprobe.protocol import recovery
from memprobe.spec import records, taxonomy
from memprobe.workflow import step


def main(job: step.Job) -> None:
    # judge.degenerate_as_unknown: the rule then names the pool (its axis questions) as input.
    pool = dict(job.input.items()).get("pool")
    result = recovery.judge_user(
        records.load(job.input.slotfill, records.SlotFill),
        records.load(job.input.bank, records.Bank),
        job.llm("judge"),
        job.input.prompt,
        judge_unknown=job.cfg.compat.judge_unknown_labels,
        degenerate_axes=recovery.pool_axes(taxonomy.load_pool(pool)) if pool else None,
    )
    records.write_atomic(job.output[0], result)


step.run(main)
