from memprobe.protocol import bank
from memprobe.spec import records, taxonomy
from memprobe.workflow import step


def main(job: step.Job) -> None:
    made = bank.make_bank(
        records.load(job.input.persona, records.Persona),
        job.cfg.dims_per_category,
        taxonomy.run_pool(job.cfg, job.input.pool),
        taxonomy.load_guides(job.input.guides),
        job.llm("generator"),
        job.input.prompt,
        pool_sample=job.cfg.bank.pool_sample,
        show_examples=job.cfg.bank.show_examples,
        show_axes=job.cfg.bank.show_axes,
        shorten_prompt=job.input.shorten,
        persona_fields=job.cfg.bank.persona,
    )
    records.write_atomic(job.output[0], made)


step.run(main)
