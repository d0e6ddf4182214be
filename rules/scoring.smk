# Metric B: slot-fill from memory, then the recovery judge (paper §3.4).


rule slotfill:
    input:
        code="scripts/slotfill.py",
        lib=library("slotfill"),
        memory=slotfill_memory,
        bank=run_user("bank"),
        guides=GUIDES,
        prompt=prompt("slotfill"),
    output:
        f"{R}/{{system}}/{{user}}/{{mode}}/slotfill.json",
    log:
        job_log("slotfill", "{system}/{user}/{mode}"),
        usage=usage_log("slotfill", "system", "user", "mode"),
    priority: PRIORITY.scoring["slotfill"]
    conda:
        "../envs/memprobe.yaml"
    resources:
        llm_slots=LLM_JOB,
    params:
        **settings("slotfill"),
        job=script_job(),
    shell:
        run_script("slotfill")


rule judge:
    input:
        **JUDGE_FILES,
        code="scripts/judge.py",
        lib=library("judge"),
        slotfill=f"{R}/{{system}}/{{user}}/{{mode}}/slotfill.json",
        bank=run_user("bank"),
    output:
        f"{R}/{{system}}/{{user}}/{{mode}}/judge.json",
    log:
        job_log("judge", "{system}/{user}/{mode}"),
        usage=usage_log("judge", "system", "user", "mode"),
    priority: PRIORITY.scoring["judge"]
    conda:
        "../envs/memprobe.yaml"
    resources:
        llm_slots=JUDGE_LLM_SLOTS,
    params:
        **settings("judge"),
        job=script_job(),
    shell:
        run_script("judge")
