# Run tables and figures, from the per-user files only (memprobe/report/tables.py, figures.py).
# Each table CSV keeps the paper's exact columns; overflow-flagged cells (the paper's dagger)
# are marked in a same-shaped companion `<table>_flags.csv` ("†" or empty).
# `snakemake --report results/report.html` (a named run's: results/<run.name>/report.html) collects every table and figure below.
#
# ONE job writes them all: they read the same per-user files, take a second each, and none
# reads another. One job instead of ten means each per-user file is one DAG edge, not ten (the
# paper DAG builds faster) and the run's tail after the last LLM job is one start-up, not ten.
from memprobe.report import compare
from memprobe.spec import stand_in_log
from memprobe.workflow import compared_runs

# compare.runs: the other runs set beside this one, found by name (their scored.json, which
# their tables job writes); their judge records of the users both score are inputs of the
# tables and the inspector, so a rerun of another run reruns the comparison. A run that is
# not there or shares no user stops the DAG load in one line.
COMPARED = compared_runs.at_dag_load(CFG, USERS, PAIRS)
COMPARED_FILES = [f for c in COMPARED for f in (c.scored_file, *c.judge_files)]
# Who judges this run, written to its scored.json for the runs that compare with it.
JUDGED_BY = compare.judge_identity(CFG, prompt("recovery_judge"))

JUDGES = [f"{R}/{s}/{u}/{m}/judge.json" for s, m in PAIRS for u in USERS]
ATTRIBUTIONS = [f"{R}/{s}/{u}/{m}/attribution.json" for s, m in PAIRS for u in USERS]
MEMORIES = expand(f"{R}/{{system}}/{{user}}/memories.json", system=SYSTEMS, user=USERS)
# A replay (rollout.replay) has no preference job: D needs this system's own replies.
PREFERENCES = (
    []
    if CFG.rollout.replay
    else expand(f"{R}/{{system}}/{{user}}/preference.json", system=SYSTEMS, user=USERS)
)
RETRIEVE_SYSTEMS = [s for s, m in PAIRS if m == "retrieve"]

# topk_sweep: the primary k is the retrieve mode itself; other ks have their own sweep files.
SWEEP_JUDGES = {
    f"k{k}": [
        f"{R}/{s}/{u}/{'retrieve' if k == K else f'retrieve_k{k}'}/judge.json"
        for s in RETRIEVE_SYSTEMS
        for u in USERS
    ]
    for k in CFG.ks
}


# Retrieve-mode scoring at the sweep's other ks (the primary k is the retrieve mode itself).
SWEEP_KS = [k for k in CFG.ks if k != K]
if not CFG.release.import_runs:

    rule slotfill_sweep:
        input:
            code="scripts/slotfill.py",
            lib=library("slotfill"),
            memory=f"{R}/{{system}}/{{user}}/retrieved_k{{k}}.json",
            bank=run_user("bank"),
            guides=GUIDES,
            prompt=prompt("slotfill"),
        output:
            f"{R}/{{system}}/{{user}}/retrieve_k{{k}}/slotfill.json",
        log:
            job_log("slotfill_sweep", "{system}/{user}_k{k}"),
            usage=usage_log("slotfill_sweep", "system", "user", "k", k=SWEEP_KS),
        conda:
            "../envs/memprobe.yaml"
        resources:
            llm_slots=LLM_JOB,
        params:
            **settings("slotfill_sweep"),
            job=script_job(),
        shell:
            run_script("slotfill_sweep", "slotfill")

    rule judge_sweep:
        input:
            **JUDGE_FILES,
            code="scripts/judge.py",
            lib=library("judge"),
            slotfill=f"{R}/{{system}}/{{user}}/retrieve_k{{k}}/slotfill.json",
            bank=run_user("bank"),
        output:
            f"{R}/{{system}}/{{user}}/retrieve_k{{k}}/judge.json",
        log:
            job_log("judge_sweep", "{system}/{user}_k{k}"),
            usage=usage_log("judge_sweep", "system", "user", "k", k=SWEEP_KS),
        conda:
            "../envs/memprobe.yaml"
        resources:
            llm_slots=JUDGE_LLM_SLOTS,
        params:
            **settings("judge_sweep"),
            job=script_job(),
        shell:
            run_script("judge_sweep", "judge")


# Table 5 is the bill of the jobs behind this run's artifacts: the usage ledger of each job of
# every rule that calls an LLM (LLM_RULES: the rules that declare a usage_log), and no other
# file under usage/ (earlier configs' jobs, users, ks or systems). A rule's jobs are its
# wildcards over the run's values. Imported runs: no job of ours calls an LLM.
JOBS = {
    (): [{}],
    ("user",): [{"user": u} for u in USERS],
    ("system", "user"): [{"system": s, "user": u} for s in SYSTEMS for u in USERS],
    ("mode", "system", "user"): [
        {"system": s, "mode": m, "user": u} for s, m in PAIRS for u in USERS
    ],
    ("k", "system", "user"): [
        {"system": s, "user": u, "k": k}
        for s in RETRIEVE_SYSTEMS
        for u in USERS
        for k in CFG.ks
    ],
}
LEDGERS = [
    ledger_pattern(rule, wildcards).format(**job)
    for rule, (wildcards, only) in LLM_RULES.items()
    for job in JOBS[tuple(sorted(wildcards))]
    if not CFG.release.import_runs
    and all(job[w] in values for w, values in only.items())
]


rule tables:
    input:
        episodes=expand(
            f"{R}/{{system}}/{{user}}/episodes.json", system=SYSTEMS, user=USERS
        ),
        preference=PREFERENCES,
        memories=MEMORIES,
        judge=JUDGES,
        attribution=ATTRIBUTIONS,
        # The sweep's other ks; the primary k's judges are in `judge`. Also orders table5
        # after every LLM job (the usage ledgers are logs of those jobs).
        sweep=sorted({p for ps in SWEEP_JUDGES.values() for p in ps} - set(JUDGES)),
        lib=library("tables"),
        # Imported runs were scored by the authors' judge: there is no judge of ours to check.
        calibration=[] if CFG.release.import_runs else CALIBRATION,
        pool=POOL,
        compared=COMPARED_FILES,
    output:
        **(
            {
                "compare": report(
                    f"{R}/compare.csv",
                    caption="captions/compare.rst",
                    category="Compared runs",
                ),
                "compare_fig": report(
                    f"{R}/figures/compare.png",
                    caption="captions/figure_compare.rst",
                    category="Compared runs",
                ),
            }
            if COMPARED
            else {}
        ),
        # judge.cross_check: the run's judge and the offline judge per B cell.
        **({"cross_check": CROSS_CHECK} if CFG.judge.cross_check else {}),
        # What this run scored and who judged it: the runs that compare with it read it.
        scored=f"{R}/{paths.SCORED}",
        table2=report(
            f"{R}/table2.csv",
            caption="captions/table2.rst",
            category="Tables",
        ),
        table3=report(
            f"{R}/table3.csv",
            caption="captions/table3.rst",
            category="Tables",
        ),
        table4=report(
            f"{R}/table4.csv",
            caption="captions/table4.rst",
            category="Tables",
        ),
        table13=report(
            f"{R}/table13.csv",
            caption="captions/table13.rst",
            category="Tables",
        ),
        table14=report(
            f"{R}/table14.csv",
            caption="captions/table14.rst",
            category="Tables",
        ),
        gap=report(
            f"{R}/gap.csv",
            caption="captions/gap.rst",
            category="Tables",
        ),
        table5=report(
            f"{R}/table5.csv",
            caption="captions/table5.rst",
            category="Tables",
        ),
        table2_flags=f"{R}/table2_flags.csv",
        table3_flags=f"{R}/table3_flags.csv",
        table4_flags=f"{R}/table4_flags.csv",
        table13_flags=f"{R}/table13_flags.csv",
        gap_flags=f"{R}/gap_flags.csv",
        table2_ci=report(
            f"{R}/table2_ci.csv",
            caption="captions/table2_ci.rst",
            category="Beyond the paper",
        ),
        table2_ci_flags=f"{R}/table2_ci_flags.csv",
        degenerate_labels=report(
            DEGENERATE,
            caption="captions/degenerate_labels.rst",
            category="Beyond the paper",
        ),
        report_header=REPORT_HEADER,
        recoveries=report(
            f"{R}/recoveries.csv",
            caption="captions/recoveries.rst",
            category="Beyond the paper",
        ),
        paired=report(
            f"{R}/paired.csv",
            caption="captions/paired.rst",
            category="Beyond the paper",
        ),
        topk_sweep=report(
            f"{R}/topk_sweep.csv",
            caption="captions/topk_sweep.rst",
            category="Beyond the paper",
        ),
        category_b=report(
            f"{R}/figures/category_b.png",
            caption="captions/figure_category.rst",
            category="Figures",
        ),
        dump_vs_retrieve=report(
            f"{R}/figures/dump_vs_retrieve.png",
            caption="captions/figure_gap.rst",
            category="Figures",
        ),
        attribution_fig=report(
            f"{R}/figures/attribution.png",
            caption="captions/figure_attribution.rst",
            category="Figures",
        ),
    log:
        job_log("tables", "tables"),
    localrule: True
    conda:
        "../envs/memprobe.yaml"
    params:
        **settings("tables"),
        min_kappa=CFG.judge.min_kappa,
        max_bias=CFG.judge.max_bias,
        pairs=PAIRS,
        ks=CFG.ks,
        sweep=SWEEP_JUDGES,
        ledgers=LEDGERS,
        recoveries=[str(stand_in_log.path_for(p)) for p in LEDGERS],
        users=USERS,
        judged_by=JUDGED_BY.model_dump(),
        calibration_source=CFG.judge.calibration.source,
        compared=[c.param() for c in COMPARED],
    script:
        "../scripts/tables.py"
