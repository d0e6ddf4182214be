# MemProbe: every number is a rebuildable file.
#   snakemake results/table2.csv --cores 8   (the default run; a named run's: results/<run.name>/,
#   and `snakemake tables` builds any run's tables, docs/runs.md)
# Config is validated here, at DAG load; a bad key stops the run with one line.


configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/calibration.smk"
include: "rules/shared.smk"


# config/release.yaml (release.import_runs): every run artifact is imported from the authors'
# release instead of generated; users.source: release alone imports banks and tasks only.
if CFG.release.import_runs:

    include: "rules/release.smk"

else:

    include: "rules/users.smk"
    include: "rules/rollout.smk"
    include: "rules/scoring.smk"
    include: "rules/attribution.smk"

    if CFG.users.source == "release":

        include: "rules/release.smk"


include: "rules/tables.smk"
include: "rules/inspect.smk"


# A named run's folders are none of the default run's.
dag_load.check_run_name(workflow, CFG)


# `snakemake --report` opens with the run's judge verdict (rules/calibration.smk).
if os.path.exists(REPORT_HEADER):

    report: os.path.abspath(REPORT_HEADER)


rule all:
    default_target: True
    input:
        rules.tables.output,
        rules.inspector.output,
