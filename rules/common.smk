# The run's config, names and input functions shared by every rule file. What the Snakefile
# settles at DAG load is memprobe/workflow/dag_load.py, a cluster's changes cluster.py, the
# jobs' resources and priorities job_resources.py, the run's start and end lifecycle.py, and
# Snakemake's private API compat.py.
import os
import re
import shlex
import sys

from snakemake.settings.types import DeploymentMethod

from memprobe.registry import systems as registry
from memprobe.vocabulary import MODES
from memprobe.workflow import cluster, code_inputs, compat, config_slices, dag_load
from memprobe.workflow import job_resources, lifecycle, paths, shell_job

compat.install_one_pending_round()  # one pending scheduler round, not one per finished job
compat.install_cached_function_params()  # a function's parameters read once, not per call

# The config Snakemake merged, validated: a bad key stops the run in one line naming the layer.
CFG = dag_load.run_config(workflow, config)
# The local backend's server is this host's: no executor that runs jobs elsewhere.
dag_load.check_executor(workflow, CFG)
cluster.anchor_cache_dir(
    workflow, CFG, config
)  # Kubernetes: one cache on the shared volume
KEY_ENVVARS = cluster.declare_key_variables(workflow, CFG)  # a storage provider's pods

# Per-user jobs run their script through `shell:` (memprobe/workflow/shell_job.py says why); they
# read the run's config from the file named by MEMPROBE_CONFIG_FILE. What each rule reads of
# it is also its params (memprobe/workflow/config_slices.py), so a changed setting reruns its jobs.
shell_job.export_config(CFG)
SLICER = config_slices.Slicer(CFG)


def settings(rule):
    """The config slice a rule's jobs read, as params (one entry each)."""
    return SLICER.params(rule)


# Each Snakemake (on a cluster, two per job) reads the scripts' imports from the run's folder
# instead of parsing some 45 files again (memprobe/workflow/code_inputs.py).
code_inputs.keep_imports_in(shell_job.CONFIG_DIR)


def library(script):
    """The memprobe modules scripts/<script>.py runs, from its imports: rule inputs, so editing
    one reruns the rule's jobs (memprobe/workflow/code_inputs.py)."""
    return code_inputs.module_files(f"scripts/{script}.py")


def script_job(**params):
    """The `job` param of a shell script job: its named files, wildcards and params as JSON."""
    return lambda wildcards, input, output: shell_job.render(
        wildcards, input, output, params
    )


# Jobs run on the interpreter that runs Snakemake (a venv need not be activated), or under
# --software-deployment-method conda on the `python` of the rule's declared environment.
PYTHON = (
    "python"
    if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
    else shlex.quote(sys.executable).replace("{", "{{").replace("}", "}}")
)
# The jobs run this checkout's memprobe, or one line says whose they would run. Checked by
# the Snakemake you start: a Kubernetes pod's runs the image's package beside the sources.
if workflow.is_main_process and (
    DeploymentMethod.CONDA not in workflow.deployment_settings.deployment_method
):
    dag_load.check_code(workflow.basedir, sys.executable)


def run_script(rule, script=None):
    """The shell command: scripts/<script, else the rule name>.py with the job's JSON."""
    logs = "{log[0]:q} {log.usage:q}"
    return f"{PYTHON} scripts/{script or rule}.py {rule} {logs} {{params.job:q}}"


def shared_user(part):
    """A user's persona, bank or tasks file in the shared folder of its settings."""
    return f"{PATHS.users[part]}/{{user}}/{part}.json"


def run_user(part):
    """The run's copy of a user's persona, bank or tasks file (rule users makes it)."""
    return f"{R}/users/{{user}}/{part}.json"


def job_log(rule, name):
    """A job's log: logs/<run>/<rule>/<name>.log (a shared users rule's: beside its users)."""
    return f"{PATHS.logs_of(rule)}/{rule}/{name}.log"


# The LLM-calling rules (each found by the usage log it declares): their wildcards, and the
# values a wildcard takes in their jobs where those are fewer than the run's (rules/tables.smk
# lists the ledgers of their jobs for Table 5).
LLM_RULES = {}


def usage_log(rule, *wildcards, **only):
    """A job's usage ledger, declared as its `usage` log: named by its wildcards in order ("run"
    without any). Declaring one marks the rule as calling an LLM; `only` narrows a wildcard to
    the values its jobs take (the sweep rules: the sweep's other ks)."""
    LLM_RULES[rule] = (wildcards, only)
    return ledger_pattern(rule, wildcards)


def ledger_pattern(rule, wildcards):
    names = "_".join(f"{{{w}}}" for w in wildcards) or "run"
    return f"{PATHS.results_of(rule)}/usage/{rule}/{names}.csv"


USERS = CFG.user_ids
SYSTEMS = CFG.systems
K = CFG.primary_k
GUIDES = "prompts/category_guides.yaml"
# bank.pool: release reads the release's pool from the release checkout (never copied here).
POOL = dag_load.pool(CFG)
dag_load.check_pool(
    POOL
)  # an input of every bank job: a broken pool stops the run here
PAIRS = dag_load.scored_pairs(
    CFG
)  # (system, mode): retrieve needs a system with search()


wildcard_constraints:
    user=r"user_\d\d\d+",
    system="|".join(map(re.escape, SYSTEMS)),
    mode="|".join(MODES),
    k=r"\d+",


def prompt(name):
    """A prompt file; a protocol stage's is the one the config picks (``prompts.<stage>``)."""
    return dag_load.prompt_file(CFG, name)


dag_load.check_prompts(CFG, os.path.exists)  # a stage's missing prompt file: one line

# Every path of the run (memprobe/workflow/paths.py, docs/runs.md): R = results/<run.name>, the
# run's own artifacts; the users are made in results/users/<part>-<key>/, shared by the runs
# whose settings make the same file, and copied into R/users/.
# The files the users rules read where a config picks them (prompt(), POOL) are part of what
# makes a user: another prompt or pool, another folder (paths.users_files).
PATHS = paths.of(CFG, SLICER)
R = PATHS.results


def agent_module(wildcards):
    """The system's module file and its parts': editing one reruns exactly its jobs."""
    return registry.spec(wildcards.system).source_files()


def agent_prompts(wildcards):
    """The system's own prompt files as ``<name>_prompt`` inputs (editing one reruns its jobs)."""
    files = registry.spec(wildcards.system).prompt_files()
    return {f"{p}_prompt": path for p, path in files.items()}


# The jobs' resources (GPUs, memory, runtime, LLM slots) and priorities: RES.<name> and
# PRIORITY.<name> are the rules' callables (memprobe/workflow/job_resources.py).
RES = job_resources.JobResources(CFG, cluster.global_resource(workflow, "llm_slots"))
LLM_JOB = RES.llm_job
PRIORITY = job_resources.Priorities(CFG)


def probe_group(wildcards):
    """On a cluster, a probe rides with its slot-fill (memprobe/workflow/cluster.py)."""
    return cluster.probe_group(
        workflow, dict(wildcards.items()), RES.gpu_count(wildcards), K
    )


def oracle_group(wildcards):
    """On a cluster, a user's oracle rides in the scoring of the first system to finish."""
    return cluster.oracle_group(workflow, wildcards.user, PRIORITY.shortest_rollouts)


def slotfill_memory(wildcards):
    """dump_all reads the whole store; retrieve reads the recorded top-k items."""
    if wildcards.mode == "dump_all":
        return f"{R}/{wildcards.system}/{wildcards.user}/memories.json"
    return f"{R}/{wildcards.system}/{wildcards.user}/retrieved_k{K}.json"


# The run's start and end (memprobe/workflow/lifecycle.py): its servers, preflight, progress
# line and last lines. The judge's files come from rules/calibration.smk, the ledgers from
# rules/tables.smk.
RUN = lifecycle.Run(CFG, PATHS, KEY_ENVVARS)


def judge_files():
    return lifecycle.JudgeFiles(
        ANCHORS, prompt("recovery_judge"), POOL, CALIBRATION, DEGENERATE, CROSS_CHECK
    )


onstart:
    RUN.start(workflow, config, judge_files())


onsuccess:
    RUN.succeeded(workflow, LEDGERS, judge_files())


onerror:
    RUN.end(workflow, LEDGERS)
