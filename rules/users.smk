# Simulated users: persona -> hidden bank -> leak-controlled tasks (paper §3.2).

# The pool holds the bank's dimensions, checked when the DAG loads: one line before any job.
dag_load.check_pool(POOL, CFG.dims_per_category)


# The users' persona, bank and tasks, unless they come from the release (rules/release.smk).
if CFG.users.source == "generate":

    rule persona:
        input:
            code="scripts/persona.py",
            lib=library("persona"),
            prompt=prompt("persona_narrative"),
        output:
            shared_user("persona"),
        log:
            job_log("persona", "{user}"),
            usage=usage_log("persona", "user"),
        priority: PRIORITY.user + 2
        conda:
            "../envs/memprobe.yaml"
        resources:
            llm_slots=LLM_JOB,
        params:
            **settings("persona"),
            job=script_job(),
        shell:
            run_script("persona")

    rule bank:
        input:
            code="scripts/bank.py",
            lib=library("bank"),
            persona=shared_user("persona"),
            pool=POOL,
            guides=GUIDES,
            prompt=prompt("bank_select"),
            shorten=prompt("bank_shorten"),
        output:
            shared_user("bank"),
        log:
            job_log("bank", "{user}"),
            usage=usage_log("bank", "user"),
        priority: PRIORITY.user + 1
        conda:
            "../envs/memprobe.yaml"
        resources:
            llm_slots=LLM_JOB,
        params:
            **settings("bank"),
            job=script_job(),
        shell:
            run_script("bank")

    rule tasks:
        input:
            code="scripts/tasks.py",
            lib=library("tasks"),
            persona=shared_user("persona"),
            bank=shared_user("bank"),
            guides=GUIDES,
            hints="prompts/elicitation_hints.yaml",
            write=prompt("task_write"),
            critic=prompt("task_critic"),
            edit=prompt("task_edit"),
        output:
            shared_user("tasks"),
        log:
            job_log("tasks", "{user}"),
            usage=usage_log("tasks", "user"),
        priority: PRIORITY.user
        conda:
            "../envs/memprobe.yaml"
        resources:
            llm_slots=LLM_JOB,
        params:
            **settings("tasks"),
            job=script_job(),
        shell:
            run_script("tasks")


rule oracle:
    input:
        code="scripts/oracle.py",
        lib=library("oracle"),
        # The run's copies, not the shared files: ready with the rollouts, it waits behind them
        # (priority) instead of taking a job slot from the longest chain; on a cluster it rides
        # in the scoring group of the system whose rollouts end first (oracle_group).
        bank=run_user("bank"),
        tasks=run_user("tasks"),
        prompt=prompt("attribution_oracle"),
    output:
        f"{R}/oracle/{{user}}.json",
    log:
        job_log("oracle", "{user}"),
        usage=usage_log("oracle", "user"),
    priority: PRIORITY.scoring["oracle"]
    group:
        oracle_group
    conda:
        "../envs/memprobe.yaml"
    resources:
        llm_slots=LLM_JOB,
    params:
        **settings("oracle"),
        job=script_job(),
    shell:
        run_script("oracle")
