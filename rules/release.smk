# Import of the authors' release (docs/release-format.md §2) into OUR artifact files.
#
# Included by the Snakefile only when `users.source: release`:
# - always: persona/bank/tasks come from the release's bank and task files (import_users);
#   `ruleorder` makes them win over the generating rules of rules/users.smk, so the release's
#   users can be run with any memory system;
# - with `release.import_runs: true` (config/release.yaml) the Snakefile includes this file
#   INSTEAD of the users/rollout/scoring/attribution rules, and the import rules below produce
#   every run artifact; the table rules then rebuild the paper's tables unchanged.
# The release layout is checked when the DAG loads, so a missing file stops the run in one
# line (and can never make Snakemake fall back to a generating rule).
from memprobe.release import layout as release

try:
    release.check_layout(CFG)
except release.RecordError as err:
    sys.exit(f"memprobe: {err}")

REL = release.Layout(CFG)


rule import_users:
    input:
        lib=library("import_users"),
        bank_file=str(REL.bank_file),
        task_file=lambda w: str(REL.task_file(w.user)),
    output:
        persona=shared_user("persona"),
        bank=shared_user("bank"),
        tasks=shared_user("tasks"),
    log:
        job_log("import_users", "{user}"),
    localrule: True
    conda:
        "../envs/memprobe.yaml"
    params:
        **settings("import_users"),
    script:
        "../scripts/import_users.py"


if CFG.release.import_runs:

    # One job per user imports every system's and mode's records: the import is cheap and
    # per-file jobs would cost more in process start-up than in work.
    rule import_runs:
        input:
            lib=library("import_runs"),
            bank=run_user("bank"),
            tasks=run_user("tasks"),
            release=lambda w: [str(p) for p in REL.user_files(w.user)],
        output:
            oracle=f"{R}/oracle/{{user}}.json",
            episodes=[f"{R}/{s}/{{user}}/episodes.json" for s in SYSTEMS],
            memories=[f"{R}/{s}/{{user}}/memories.json" for s in SYSTEMS],
            preference=[f"{R}/{s}/{{user}}/preference.json" for s in SYSTEMS],
            slotfill=[f"{R}/{s}/{{user}}/{m}/slotfill.json" for s, m in PAIRS],
            judge=[f"{R}/{s}/{{user}}/{m}/judge.json" for s, m in PAIRS],
            attribution=[f"{R}/{s}/{{user}}/{m}/attribution.json" for s, m in PAIRS],
        log:
            job_log("import_runs", "{user}"),
        localrule: True
        conda:
            "../envs/memprobe.yaml"
        params:
            **settings("import_runs"),
            systems=SYSTEMS,
            pairs=PAIRS,
        script:
            "../scripts/import_runs.py"

    rule import_retrieved:
        input:
            lib=library("import_retrieved"),
            recon=lambda w: str(REL.recon_judge(w.system, "retrieve", w.user)),
            guides=GUIDES,
        output:
            f"{R}/{{system}}/{{user}}/retrieved_k{{k}}.json",
        log:
            job_log("import_retrieved", "{system}/{user}_k{k}"),
        localrule: True
        conda:
            "../envs/memprobe.yaml"
        params:
            **settings("import_retrieved"),
        script:
            "../scripts/import_retrieved.py"
