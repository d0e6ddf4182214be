# The interaction loop: one job per user x system (paper §3.3), then metric D over it.
# rollout.replay: the release's recorded conversations instead (rule replay): the
# system's write hooks only, no simulator, assistant or preference call, no D.


if CFG.rollout.replay:

    rule replay:
        input:
            unpack(agent_prompts),
            code="scripts/replay.py",
            lib=library("replay"),
            tasks=run_user("tasks"),
            recorded=lambda w: [
                str(REL.recorded(CFG.rollout.replay, w.user, i))
                for i in range(1, CFG.n_dims + 1)
            ],
            agent=agent_module,
        output:
            episodes=f"{R}/{{system}}/{{user}}/episodes.json",
            memories=f"{R}/{{system}}/{{user}}/memories.json",
            store=directory(f"{R}/{{system}}/{{user}}/store"),
        log:
            job_log("replay", "{system}/{user}"),
            usage=usage_log("replay", "system", "user"),
        priority: PRIORITY.rollout
        conda:
            "../envs/memprobe.yaml"
        resources:
            llm_slots=LLM_JOB,
            gpu=RES.gpu_count,
            gpu_model=RES.gpu_model,
            cpus_per_gpu=RES.cpus_per_gpu,
            mem_mb=RES.mem_mb,
            runtime=RES.runtime,
        params:
            **settings("replay"),
            job=script_job(),
        shell:
            run_script("replay")

else:

    rule rollout:
        input:
            unpack(agent_prompts),
            code="scripts/rollout.py",
            lib=library("rollout"),
            persona=run_user("persona"),
            bank=run_user("bank"),
            tasks=run_user("tasks"),
            simulator_prompt=prompt("user_simulator"),
            assistant_prompt=prompt("assistant_system"),
            agent=agent_module,
        output:
            episodes=f"{R}/{{system}}/{{user}}/episodes.json",
            memories=f"{R}/{{system}}/{{user}}/memories.json",
            store=directory(f"{R}/{{system}}/{{user}}/store"),
        log:
            job_log("rollout", "{system}/{user}"),
            usage=usage_log("rollout", "system", "user"),
        priority: PRIORITY.rollout
        conda:
            "../envs/memprobe.yaml"
        resources:
            llm_slots=LLM_JOB,
            gpu=RES.gpu_count,
            gpu_model=RES.gpu_model,
            cpus_per_gpu=RES.cpus_per_gpu,
            mem_mb=RES.mem_mb,
            runtime=RES.runtime,
        params:
            **settings("rollout"),
            job=script_job(),
        shell:
            run_script("rollout")

    rule preference:
        input:
            code="scripts/preference.py",
            lib=library("preference"),
            episodes=f"{R}/{{system}}/{{user}}/episodes.json",
            bank=run_user("bank"),
            prompt=prompt("preference_judge"),
        output:
            f"{R}/{{system}}/{{user}}/preference.json",
        log:
            job_log("preference", "{system}/{user}"),
            usage=usage_log("preference", "system", "user"),
        priority: 1
        conda:
            "../envs/memprobe.yaml"
        resources:
            llm_slots=LLM_JOB,
        params:
            **settings("preference"),
            job=script_job(),
        shell:
            run_script("preference")


rule probe:
    input:
        unpack(agent_prompts),
        code="scripts/probe.py",
        lib=library("probe"),
        store=f"{R}/{{system}}/{{user}}/store",
        bank=run_user("bank"),
        guides=GUIDES,
        agent=agent_module,
    output:
        f"{R}/{{system}}/{{user}}/retrieved_k{{k}}.json",
    log:
        job_log("probe", "{system}/{user}_k{k}"),
        usage=usage_log("probe", "system", "user", "k"),
    priority: PRIORITY.scoring["probe"]
    group:
        probe_group
    conda:
        "../envs/memprobe.yaml"
    resources:
        llm_slots=RES.probe_llm_slots,
        gpu=RES.gpu_count,
        gpu_model=RES.gpu_model,
        cpus_per_gpu=RES.cpus_per_gpu,
        mem_mb=RES.mem_mb,
        runtime=RES.runtime,
    params:
        **settings("probe"),
        job=script_job(),
    shell:
        run_script("probe")
