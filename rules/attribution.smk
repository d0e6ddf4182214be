# Failure attribution, Stage 1/2 on the target episode's transcript (paper §3.5).
# Stage 0 (rules/users.smk: oracle) is shared by every system and mode.


rule attribution:
    input:
        code="scripts/attribution.py",
        lib=library("attribution"),
        judge=f"{R}/{{system}}/{{user}}/{{mode}}/judge.json",
        bank=run_user("bank"),
        tasks=run_user("tasks"),
        episodes=f"{R}/{{system}}/{{user}}/episodes.json",
        oracle=f"{R}/oracle/{{user}}.json",
        disclosure=prompt("attribution_disclosure"),
        subclass=prompt("attribution_subclass"),
    output:
        f"{R}/{{system}}/{{user}}/{{mode}}/attribution.json",
    log:
        job_log("attribution", "{system}/{user}/{mode}"),
        usage=usage_log("attribution", "system", "user", "mode"),
    priority: PRIORITY.scoring["attribution"]
    conda:
        "../envs/memprobe.yaml"
    resources:
        llm_slots=LLM_JOB,
    params:
        **settings("attribution"),
        job=script_job(),
    shell:
        run_script("attribution")
