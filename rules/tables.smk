# Run tables and figures, from the per-user files only (memprobe/tables.py, figures.py).
# Each table CSV keeps the paper's exact columns; overflow-flagged cells (the paper's dagger)
# are marked in a same-shaped companion `<table>_flags.csv` ("†" or empty).
# `snakemake --report results/report.html` collects every table and figure below.

JUDGES = [f"{R}/{s}/{u}/{m}/judge.json" for s, m in PAIRS for u in USERS]
ATTRIBUTIONS = [f"{R}/{s}/{u}/{m}/attribution.json" for s, m in PAIRS for u in USERS]
MEMORIES = expand(f"{R}/{{system}}/{{user}}/memories.json", system=SYSTEMS, user=USERS)
PREFERENCES = expand(
    f"{R}/{{system}}/{{user}}/preference.json", system=SYSTEMS, user=USERS
)
RETRIEVE_SYSTEMS = [s for s, m in PAIRS if m == "retrieve"]

OTHER_TABLES = [
    f"{R}/{name}"
    for name in (
        "table3.csv",
        "table4.csv",
        "table13.csv",
        "table14.csv",
        "gap.csv",
        "table5.csv",
        "table2_ci.csv",
        "topk_sweep.csv",
        "figures/category_b.png",
        "figures/dump_vs_retrieve.png",
        "figures/attribution.png",
    )
]

# topk_sweep: the primary k is the retrieve mode itself; other ks have their own sweep files.
SWEEP_JUDGES = {
    f"k{k}": [
        f"{R}/{s}/{u}/{'retrieve' if k == K else f'retrieve_k{k}'}/judge.json"
        for s in RETRIEVE_SYSTEMS
        for u in USERS
    ]
    for k in CFG.ks
}


rule table2:
    input:
        episodes=expand(
            f"{R}/{{system}}/{{user}}/episodes.json", system=SYSTEMS, user=USERS
        ),
        preference=PREFERENCES,
        memories=MEMORIES,
        judge=JUDGES,
        # `snakemake results/table2.csv` is the run's target: it also builds every other
        # table and figure (none of them reads table2), so one command leaves nothing out.
        others=OTHER_TABLES,
    output:
        table=report(
            f"{R}/table2.csv", caption="captions/table2.rst", category="Tables"
        ),
        flags=f"{R}/table2_flags.csv",
    log:
        "logs/tables/table2.log",
    localrule: True
    conda:
        "../envs/memprobe.yaml"
    script:
        "../scripts/table2.py"


rule table3:
    input:
        judge=JUDGES,
    output:
        table=report(
            f"{R}/table3.csv", caption="captions/table3.rst", category="Tables"
        ),
        flags=f"{R}/table3_flags.csv",
    log:
        "logs/tables/table3.log",
    localrule: True
    conda:
        "../envs/memprobe.yaml"
    params:
        pairs=PAIRS,
    script:
        "../scripts/tables.py"


rule table4:
    input:
        judge=JUDGES,
        attribution=ATTRIBUTIONS,
    output:
        table=report(
            f"{R}/table4.csv", caption="captions/table4.rst", category="Tables"
        ),
        flags=f"{R}/table4_flags.csv",
    log:
        "logs/tables/table4.log",
    localrule: True
    conda:
        "../envs/memprobe.yaml"
    params:
        pairs=PAIRS,
    script:
        "../scripts/tables.py"


rule table13:
    input:
        judge=JUDGES,
        attribution=ATTRIBUTIONS,
    output:
        table=report(
            f"{R}/table13.csv", caption="captions/table13.rst", category="Tables"
        ),
        flags=f"{R}/table13_flags.csv",
    log:
        "logs/tables/table13.log",
    localrule: True
    conda:
        "../envs/memprobe.yaml"
    params:
        pairs=PAIRS,
    script:
        "../scripts/tables.py"


rule table14:
    input:
        memories=MEMORIES,
    output:
        table=report(
            f"{R}/table14.csv", caption="captions/table14.rst", category="Tables"
        ),
    log:
        "logs/tables/table14.log",
    localrule: True
    conda:
        "../envs/memprobe.yaml"
    params:
        pairs=PAIRS,
    script:
        "../scripts/tables.py"


rule gap:
    input:
        judge=JUDGES,
    output:
        table=report(f"{R}/gap.csv", caption="captions/gap.rst", category="Tables"),
        flags=f"{R}/gap_flags.csv",
    log:
        "logs/tables/gap.log",
    localrule: True
    conda:
        "../envs/memprobe.yaml"
    params:
        pairs=PAIRS,
    script:
        "../scripts/tables.py"


rule table5:
    input:
        # Ordered after every LLM job (the ledger files are their side outputs).
        runs=JUDGES + ATTRIBUTIONS + PREFERENCES + sum(SWEEP_JUDGES.values(), []),
    output:
        table=report(
            f"{R}/table5.csv", caption="captions/table5.rst", category="Tables"
        ),
    log:
        "logs/tables/table5.log",
    localrule: True
    conda:
        "../envs/memprobe.yaml"
    params:
        pairs=PAIRS,
        usage=f"{R}/usage",
    script:
        "../scripts/tables.py"


rule table2_ci:
    input:
        judge=JUDGES,
    output:
        table=report(
            f"{R}/table2_ci.csv",
            caption="captions/table2_ci.rst",
            category="Beyond the paper",
        ),
        flags=f"{R}/table2_ci_flags.csv",
        paired=report(
            f"{R}/paired.csv",
            caption="captions/paired.rst",
            category="Beyond the paper",
        ),
    log:
        "logs/tables/table2_ci.log",
    localrule: True
    conda:
        "../envs/memprobe.yaml"
    params:
        pairs=PAIRS,
    script:
        "../scripts/tables.py"


rule topk_sweep:
    input:
        **SWEEP_JUDGES,
    output:
        table=report(
            f"{R}/topk_sweep.csv",
            caption="captions/topk_sweep.rst",
            category="Beyond the paper",
        ),
    log:
        "logs/tables/topk_sweep.log",
    localrule: True
    conda:
        "../envs/memprobe.yaml"
    params:
        pairs=PAIRS,
        ks=CFG.ks,
    script:
        "../scripts/tables.py"


# Retrieve-mode scoring at the sweep's other ks (the primary k is the retrieve mode itself).
if not CFG.release.import_runs:

    rule slotfill_sweep:
        input:
            memory=f"{R}/{{system}}/{{user}}/retrieved_k{{k}}.json",
            bank=f"{R}/users/{{user}}/bank.json",
            guides=GUIDES,
            prompt=prompt("slotfill"),
        output:
            f"{R}/{{system}}/{{user}}/retrieve_k{{k}}/slotfill.json",
        log:
            "logs/slotfill_sweep/{system}/{user}_k{k}.log",
        conda:
            "../envs/memprobe.yaml"
        resources:
            llm_slots=1,
        script:
            "../scripts/sweep_slotfill.py"

    rule judge_sweep:
        input:
            slotfill=f"{R}/{{system}}/{{user}}/retrieve_k{{k}}/slotfill.json",
            bank=f"{R}/users/{{user}}/bank.json",
            prompt=prompt("recovery_judge"),
        output:
            f"{R}/{{system}}/{{user}}/retrieve_k{{k}}/judge.json",
        log:
            "logs/judge_sweep/{system}/{user}_k{k}.log",
        conda:
            "../envs/memprobe.yaml"
        resources:
            llm_slots=1,
        script:
            "../scripts/judge.py"


rule figures:
    input:
        judge=JUDGES,
        attribution=ATTRIBUTIONS,
    output:
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
        attribution=report(
            f"{R}/figures/attribution.png",
            caption="captions/figure_attribution.rst",
            category="Figures",
        ),
    log:
        "logs/figures/figures.log",
    localrule: True
    conda:
        "../envs/memprobe.yaml"
    script:
        "../scripts/figures.py"


# Every table and figure (the report's content): `snakemake tables`.
rule tables:
    input:
        rules.table2.output,
        rules.table3.output,
        rules.table4.output,
        rules.table13.output,
        rules.table14.output,
        rules.gap.output,
        rules.table5.output,
        rules.table2_ci.output,
        rules.topk_sweep.output,
        rules.figures.output,
