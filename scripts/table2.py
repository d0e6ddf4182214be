from memprobe import glue, records, tables


def main(job: glue.Job) -> None:
    df = tables.table2(
        job.cfg.systems,
        [records.load(p, records.Episodes) for p in job.input.episodes],
        [records.load(p, records.Preference) for p in job.input.preference],
        [records.load(p, records.Memories) for p in job.input.memories],
        [records.load(p, records.Judge) for p in job.input.judge],
    )
    records.write_atomic(job.output[0], df.to_csv(index=False))


glue.run(main, snakemake)  # noqa: F821 (injected by Snakemake)
