from memprobe import glue, records, taxonomy, users


def main(job: glue.Job) -> None:
    bank = users.make_bank(
        records.load(job.input.persona, records.Persona),
        job.cfg.dims_per_category,
        taxonomy.load_pool(job.input.pool),
        taxonomy.load_guides(job.input.guides),
        job.llm("generator"),
        job.input.prompt,
    )
    records.write_atomic(job.output[0], bank)


glue.run(main, snakemake)  # noqa: F821 (injected by Snakemake)
