from memprobe import figures, glue, records


def main(job: glue.Job) -> None:
    js = [records.load(p, records.Judge) for p in job.input.judge]
    atts = [records.load(p, records.Attribution) for p in job.input.attribution]
    figures.category_b(js, job.cfg.systems, job.output.category_b)
    figures.dump_vs_retrieve(js, job.cfg.systems, job.output.dump_vs_retrieve)
    figures.attribution_bars(atts, job.cfg.systems, job.output.attribution)


glue.run(main, snakemake)  # noqa: F821 (injected by Snakemake)
