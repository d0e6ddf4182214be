from memprobe.protocol import judge, judge_form
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
    stand_ins: list[records.StandIn] = []
    result = judge.judge_user(
        slotfill,
        bank,
        judge_form.grader(job.cfg, lambda: job.llm("judge"), files.get("prompt"), pool, stand_ins),
        judge_unknown=job.cfg.compat.judge_unknown_labels,
        degenerate_axes=taxonomy.run_pool(job.cfg, pool).axes()
        if pool and settings.degenerate_as_unknown
        else None,
        second_opinion=judge_form.second_opinion(job.cfg, pool),
        stand_ins=stand_ins,
    )
    records.write_atomic(job.output[0], result)


step.run(main)
