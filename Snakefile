# MemProbe: every number is a rebuildable file.
#   snakemake results/table2.csv --cores 8
# Config is validated here, at DAG load; a bad key stops the run with one line.


configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/users.smk"
include: "rules/rollout.smk"
include: "rules/scoring.smk"
include: "rules/attribution.smk"
include: "rules/tables.smk"


rule all:
    default_target: True
    input:
        f"{R}/table2.csv",
