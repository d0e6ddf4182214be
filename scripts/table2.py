from memprobe import glue, records, tables


def main(job: glue.Job) -> None:
    judges = [records.load(p, records.Judge) for p in job.input.judge]
    df = tables.table2(
        job.cfg.systems,
        [records.load(p, records.Episodes) for p in job.input.episodes],
        [records.load(p, records.Preference) for p in job.input.preference],
        [records.load(p, records.Memories) for p in job.input.memories],
        judges,
    )
    records.write_atomic(job.output.table, df.to_csv(index=False))
    flags = tables.table2_flags(df, judges)
    records.write_atomic(job.output.flags, flags.to_csv(index=False))


glue.run(main, snakemake)  # noqa: F821 (injected by Snakemake)
