"""Every run table except table2: one rule each, dispatched on the rule name."""

import csv
from pathlib import Path

from memprobe import glue, records, tables


def judges(paths):
    return [records.load(p, records.Judge) for p in paths]


def attributions(paths):
    return [records.load(p, records.Attribution) for p in paths]


def main(job: glue.Job) -> None:
    cfg, i, rule = job.cfg, job.input, job.rule
    pairs = [tuple(p) for p in job.smk.params.pairs]
    flags = None
    if rule == "table3":
        js = judges(i.judge)
        df = tables.table3(cfg.systems, cfg.modes, pairs, js)
        flags = tables.row_flags(df, ["system", "mode"], js)
    elif rule == "table4":
        js = judges(i.judge)
        df = tables.table4(cfg.systems, cfg.modes, pairs, attributions(i.attribution))
        flags = tables.row_flags(df, ["system", "mode"], js)
    elif rule == "table13":
        js = judges(i.judge)
        df = tables.table13(cfg.systems, pairs, attributions(i.attribution))
        flags = tables.row_flags(df, ["system", "category"], js)
    elif rule == "table14":
        df = tables.table14(cfg.systems, [records.load(p, records.Memories) for p in i.memories])
    elif rule == "gap":
        js = judges(i.judge)
        df = tables.gap(cfg.systems, js)
        flags = tables.gap_flags(df, js)
    elif rule == "table2_ci":
        js = judges(i.judge)
        df = tables.table2_ci(cfg.systems, cfg.modes, pairs, js, seed=cfg.seed)
        flags = tables.row_flags(df, ["system", "mode"], js)
        paired = tables.paired(cfg.systems, cfg.modes, js, seed=cfg.seed)
        records.write_atomic(job.output.paired, paired.to_csv(index=False))
    elif rule == "topk_sweep":
        by_k = {int(k): judges(getattr(i, f"k{k}")) for k in job.smk.params.ks}
        df = tables.topk_sweep(
            [s for s, m in pairs if m == "retrieve"], list(job.smk.params.ks), by_k
        )
    elif rule == "table5":
        rows = []
        for f in sorted(Path(job.smk.params.usage).rglob("*.csv")):
            with open(f, newline="", encoding="utf-8") as fh:
                rows += list(csv.DictReader(fh))
        df = tables.table5(rows, cfg.systems)
    else:
        raise ValueError(f"scripts/tables.py: no table for rule {rule!r}")
    records.write_atomic(job.output.table, df.to_csv(index=False))
    if flags is not None:
        records.write_atomic(job.output.flags, flags.to_csv(index=False))


glue.run(main, snakemake)  # noqa: F821 (injected by Snakemake)
