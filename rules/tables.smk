# Run tables, from the per-user files only.


rule table2:
    input:
        episodes=expand(
            f"{R}/{{system}}/{{user}}/episodes.json", system=SYSTEMS, user=USERS
        ),
        preference=expand(
            f"{R}/{{system}}/{{user}}/preference.json", system=SYSTEMS, user=USERS
        ),
        memories=expand(
            f"{R}/{{system}}/{{user}}/memories.json", system=SYSTEMS, user=USERS
        ),
        judge=[f"{R}/{s}/{u}/{m}/judge.json" for s, m in PAIRS for u in USERS],
        # table2 has no attribution column, but the run is not complete without it.
        attribution=[
            f"{R}/{s}/{u}/{m}/attribution.json" for s, m in PAIRS for u in USERS
        ],
    output:
        f"{R}/table2.csv",
    log:
        "logs/tables/table2.log",
    localrule: True
    conda:
        "../envs/memprobe.yaml"
    script:
        "../scripts/table2.py"
