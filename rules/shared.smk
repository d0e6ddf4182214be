# What runs share (memprobe/workflow/paths.py, docs/runs.md): each user file is made once per
# settings under results/users/<part>-<key>/ (rules/users.smk, or imported: rules/release.smk),
# and each run copies it into its own folder, so results/<run>/ holds everything its tables
# and its inspector read. The copy's params are the settings the file is made with: a changed
# one shows in the copy's reason line.


rule users:
    input:
        lambda w: f"{PATHS.users[w.part]}/{w.user}/{w.part}.json",
    output:
        f"{R}/users/{{user}}/{{part}}.json",
    log:
        job_log("users", "{user}_{part}"),
    wildcard_constraints:
        part="|".join(paths.PARTS),
    priority: PRIORITY.user
    localrule: True
    conda:
        "../envs/memprobe.yaml"
    params:
        **paths.copy_params(CFG, SLICER),
    shell:
        "cp {input:q} {output:q} 2> {log:q}"
