"""Every run table and figure, in one job (see rules/tables.smk for why one)."""

from memprobe.llm import ledger
from memprobe.protocol import calibration
from memprobe.report import compare, figures, table_notes, tables
from memprobe.spec import records, sheets, stand_in_log, taxonomy
from memprobe.spec.records import Judge, JudgeIdentity, Scored
from memprobe.workflow import step


def write(path: str, df) -> None:
    records.write_atomic(path, sheets.frame_csv(df))  # no cell is read as a formula


def judge_note(path, params) -> tuple[str | None, str]:
    """The flag a failed judge puts on every B cell, and the report's opening line."""
    if not path:
        return None, "B was scored by the imported runs' own judge (no calibration here)."
    s = calibration.read_summary(path)
    note = calibration.verdict(s, params.min_kappa, params.max_bias)
    figures_ = (
        f"κ {s.kappa:.2f}, bias {s.bias:+.2f}, exact {s.exact:.2f} on {s.n} anchors "
        # reStructuredText (the report's header): a bare |x| would be a substitution reference
        f"(thresholds: κ ≥ {params.min_kappa}, bias within ±{params.max_bias}; ``{path}``)"
    )
    if note:
        return note, (
            f"**Warning: the judge failed calibration** ({figures_}). Every B cell, and every "
            "count built on B, carries this flag in its ``_flags.csv``: do not read them as "
            "findings."
        )
    return None, f"The judge passed calibration: {figures_}."


def stand_in_header(jobs: list[stand_in_log.JobStandIns]) -> str:
    """The report's line on the stand-ins (the run's last lines say the same)."""
    counts = stand_in_log.per_stage(jobs)
    if not counts:
        return "Every LLM reply validated: no stand-in was needed (``recoveries.csv``)."
    stages = stand_in_log.stage_counts(counts)
    return (
        f"**{sum(counts.values())} replies were stand-ins** after their re-asks ran out "
        f"({stages}): each stand-in is listed in ``recoveries.csv`` and in its artifact, and "
        "every cell whose number rests on one names it in its ``_flags.csv``."
    )


def main(job: step.Job) -> None:
    cfg, i, o, params = job.cfg, job.input, job.output, job.smk.params
    systems, modes = cfg.systems, cfg.modes
    pairs = [tuple(p) for p in params.pairs]
    judges = {p: records.load(p, records.Judge) for p in i.judge}
    js = list(judges.values())
    atts = [records.load(p, records.Attribution) for p in i.attribution]
    memories = [records.load(p, records.Memories) for p in i.memories]
    # The judges of the sweep's k: the primary k's are the retrieve mode's own.
    judges |= {p: records.load(p, records.Judge) for p in i.sweep}
    note, header = judge_note(i.calibration, params)
    stand_ins = stand_in_log.read(params.recoveries)
    # An endpoint that answered garbage stops here, before any table (llm.max_stand_in_share).
    listed = stand_in_log.listed_in(params.recoveries)
    rows = ledger.read_rows(params.ledgers)
    stand_in_log.check_share(stand_ins, rows, cfg.llm.max_stand_in_share, listed)

    def flagged(flags, df, metrics, columns=None, mode=None):
        """A failed judge's note on the B cells, and on every cell the stand-ins that
        moved the numbers it rests on."""
        keys = [c for c in table_notes.KEYS if c in df.columns]
        cols = columns or [c for c in df.columns if c not in keys]
        flags = tables.note_cells(flags, df, cols, note) if note else flags
        return table_notes.stand_in_flags(flags, df, stand_ins, metrics, mode)

    # judge.cross_check: B cells where the offline judge disagrees with the run's judge.
    margin = cfg.judge.cross_check_margin
    checked = table_notes.cross_check(systems, modes, pairs, js, margin)
    disagree = table_notes.cross_check_notes(checked, margin)
    if cfg.judge.cross_check:
        write(o.cross_check, checked)

    by_k = {int(k[1:]): [judges[p] for p in paths] for k, paths in params.sweep.items()}

    episodes = [records.load(p, records.Episodes) for p in i.episodes]
    replayed = tables.replayed(episodes)  # rollout.replay: rows on recorded conversations
    df = tables.table2(
        systems,
        episodes,
        [records.load(p, records.Preference) for p in i.preference],
        memories,
        js,
    )
    write(o.table2, df)
    b_cols = [c for c in df.columns if c.startswith("B_")]
    table2_flags = flagged(tables.table2_flags(df, js), df, table_notes.table2_metrics, b_cols)
    table2_flags = tables.note_each(
        table2_flags,
        df,
        lambda r, c: next(
            (disagree.get((r["system"], m, "B")) for m in modes if c == f"B_{m}_mean"), None
        ),
    )
    write(o.table2_flags, tables.replay_notes(table2_flags, df, replayed, tables.REPLAY_TABLE2))

    df = tables.table3(systems, modes, pairs, js)
    write(o.table3, df)
    write(
        o.table3_flags,
        tables.note_each(
            flagged(tables.row_flags(df, ["system", "mode"], js), df, table_notes.b_metrics),
            df,
            lambda r, c: disagree.get((r["system"], r["mode"], c.removesuffix("_mean"))),
        ),
    )

    df = tables.table4(systems, modes, pairs, atts)
    write(o.table4, df)
    flags = flagged(
        tables.row_flags(df, ["system", "mode"], js), df, table_notes.attribution_metrics
    )
    write(o.table4_flags, tables.replay_notes(flags, df, replayed, tables.REPLAY_TABLE4))

    df = tables.table13(systems, pairs, atts)
    write(o.table13, df)
    flags = tables.row_flags(df, ["system", "category"], js)
    write(o.table13_flags, flagged(flags, df, table_notes.attribution_metrics, mode="dump_all"))

    write(o.table14, tables.table14(systems, memories))

    df = tables.gap(systems, js)
    write(o.gap, df)
    write(o.gap_flags, flagged(tables.gap_flags(df, js), df, table_notes.b_metrics))

    df = tables.table2_ci(systems, modes, pairs, js, seed=cfg.seed)
    write(o.table2_ci, df)
    flags = tables.row_flags(df, ["system", "mode"], js)
    write(o.table2_ci_flags, flagged(flags, df, table_notes.b_metrics))
    write(o.paired, tables.paired(systems, modes, js, seed=cfg.seed))

    retrieve_systems = [s for s, m in pairs if m == "retrieve"]
    write(o.topk_sweep, tables.topk_sweep(retrieve_systems, list(params.ks), by_k))

    axes = taxonomy.run_pool(cfg, i.pool).axes()
    df = table_notes.degenerate_labels(pairs, js, axes)
    write(o.degenerate_labels, df)
    n_bad = int(df["degenerate"].sum()) if len(df) else 0
    header += (
        f"\n\n{n_bad} of {int(df['n_labels'].sum()) if len(df) else 0} slot-fill labels name "
        "their slot instead of filling it (``degenerate_labels.csv``)."
    )
    df = table_notes.stand_ins_table(stand_ins)
    write(o.recoveries, df)
    header += "\n\n" + stand_in_header(stand_ins)
    if replayed:
        header += "\n\n" + tables.replay_header(replayed)

    # What this run scored and who judged it (the runs that compare with it read it), and
    # compare.runs: this run's B next to theirs on the users both scored.
    scored = compare.scored(
        cfg.run.name,
        list(params.users),
        pairs,
        JudgeIdentity.model_validate(params.judged_by),
        calibration.read_summary(i.calibration) if i.calibration else None,
        params.calibration_source,
        params.min_kappa,
        params.max_bias,
    )
    records.write_atomic(o.scored, scored)
    if params.compared:
        mine = compare.side(scored, js)
        others = [
            compare.side(
                records.load(c["scored"], Scored), [records.load(p, Judge) for p in c["judges"]]
            )
            for c in params.compared
        ]
        compare.check_shared(mine, others)
        write(o.compare, compare.compare(mine, others, seed=cfg.seed))
        modes_run = [m for m in modes if any(pm == m for _, pm in pairs)]
        panels = [(m, *compare.figure_bars(mine, others, m, cfg.seed)) for m in modes_run]
        figures.compare_b(panels, o.compare_fig, note)
        header += "\n\n" + compare.header(mine, others)
    records.write_atomic(o.report_header, f"MemProbe run\n============\n\n{header}\n")

    # Last: the bill of the LLM jobs behind this run's artifacts.
    write(o.table5, tables.table5(rows, systems))

    # Built on B as the tables are: a failed judge's flag goes on every figure too.
    figures.category_b(js, systems, o.category_b, note)
    figures.dump_vs_retrieve(js, systems, o.dump_vs_retrieve, note)
    figures.attribution_bars(atts, systems, o.attribution_fig, note)


step.run(main)
