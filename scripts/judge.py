from memprobe.protocol import judges, recovery
from memprobe.spec import records, taxonomy
from memprobe.workflow import step


def main(job: step.Job) -> None:
    # The rule names the pool (its axis questions) when the offline judge or
    # judge.degenerate_as_unknown reads it, the prompt when an LLM judges.
    files = dict(job.input.items())
    settings = job.cfg.judge
    pool = files.get("pool")
    slotfill = records.load(job.input.slotfill, records.SlotFill)
    bank = records.load(job.input.bank, records.Bank)
    recovered: list[records.Recovery] = []
    result = recovery.judge_user(
        slotfill,
        bank,
        judges.grader(job.cfg, lambda: job.llm("judge"), files.get("prompt"), pool, recovered),
        judge_unknown=job.cfg.compat.judge_unknown_labels,
        degenerate_axes=recovery.pool_axes(taxonomy.load_pool(pool))
        if pool and settings.degenerate_as_unknown
        else None,
        second_opinion=judges.second_opinion(job.cfg, pool),
        recoveries=recovered,
    )
    records.write_atomic(job.output[0], result)


step.run(main)
