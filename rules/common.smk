# Config validation, run-wide names and path helpers shared by every rule file.
import json
import os
import re
import shlex
import sys

from snakemake.settings.types import DeploymentMethod

from memprobe.llm import rate_limit
from memprobe.workflow import code_inputs, config_slices
from memprobe.serving import embed_service
from memprobe.workflow import preflight, scheduler_rounds
from memprobe.workflow import shell_job, slurm_status
from memprobe.workflow import step
from memprobe.release import judge_verdicts
from memprobe.spec import taxonomy
from memprobe.registry import systems as registry
from memprobe.workflow import paths, run_names
from memprobe.workflow import servers
from memprobe.config import PROMPT_STAGES, ConfigError, read_config_file, validate
from memprobe.spec import recovery_log
from memprobe.spec.records import RecordError
from memprobe.vocabulary import MODES

scheduler_rounds.install()  # one pending scheduler round, not one per finished job


def config_layers():
    """The config as Snakemake layered it: the Snakefile's file, each --configfile, --config.

    Validating layer by layer lets an error name where the bad key came from.
    """
    given = [str(f) for f in workflow.overwrite_configfiles]
    files = [str(f) for f in workflow.configfiles if str(f) not in given] + given
    layers = [(f, read_config_file(f)) for f in files]
    return layers + [("--config", dict(workflow.config_settings.config))]


# The config Snakemake merged is the one validated (and the one the jobs read); the layers
# only say which file set a bad key.
try:
    CFG = validate(
        config, config_layers()
    )  # read_config_file refuses a key given twice
except ConfigError as err:
    sys.exit(f"memprobe: {err}")

# backend local: a configured model_path must exist (cheap; the checksum is verified onstart).
if CFG.llm.backend == "local":
    from memprobe.serving import local_server

    try:
        local_server.check_model_path(CFG.llm.local)
    except local_server.LocalModelError as err:
        sys.exit(f"memprobe: {err}")

# Kubernetes (profiles/kubernetes): pods start in an empty /workdir and see the shared volume
# only through the fs storage provider's prefix, so a relative llm.cache_dir is anchored there:
# one cache for every pod, and resume/dedupe hold as they do locally (docs/cluster.md).
_storage = workflow.storage_settings
if (
    _storage.default_storage_provider == "fs"
    and _storage.default_storage_prefix
    and not os.path.isabs(CFG.llm.cache_dir)
):
    CFG.llm.cache_dir = os.path.join(_storage.default_storage_prefix, CFG.llm.cache_dir)
    config["llm"]["cache_dir"] = CFG.llm.cache_dir


def global_resource(name):
    """A --resources (or profile) limit's number; None where unset (--cores on a cluster)."""
    value = workflow.global_resources.get(name)
    return getattr(value, "value", value)


def share_rate_limit_across_nodes():
    """llm.rate_limit under a cluster executor (known from onstart on): nodes share no lock
    (SQLite file locks do not hold over NFS), so each node keeps its buckets on local disk and
    takes 1/llm_slots of every limit: at most llm_slots LLM jobs run at once, however they
    land, so the shares never add up to more than the limit (docs/cluster.md). A share or
    state_dir set in a config wins. Jobs re-read the config on their node: it reaches them as
    a --config entry of their command line."""
    slots = global_resource("llm_slots")
    if workflow.local_exec or not slots or "llm" in workflow.config_settings.config:
        return  # a --config llm=... of yours is passed on as it is
    given = config.setdefault("llm", {}).setdefault("rate_limit", {})
    node = {
        "share": given.get("share", 1 / int(slots)),
        "state_dir": given.get("state_dir", rate_limit.NODE_STATE_DIR),
    }
    workflow.config_settings.config_args = [
        *(workflow.config_settings.config_args or []),
        f"llm={json.dumps({'rate_limit': node})}",
    ]


def settle_slurm_status():
    """Under the SLURM executor, a status command that sees jobs finish, also on a cluster
    without accounting, or one line saying why none can (memprobe/workflow/slurm_status.py).
    """
    if getattr(workflow.executor_plugin, "name", None) != "slurm":
        return
    try:
        line = slurm_status.settle(workflow.executor_settings)
    except slurm_status.SlurmStatusError as err:
        sys.exit(f"memprobe: {err}")
    if line:
        print(f"memprobe: {line}", file=sys.stderr)


# Jobs that see files only through a storage provider (Kubernetes pods) start in a fresh
# environment and get only the variables declared as envvars, which the plugin passes through
# a Kubernetes Secret (never in the job spec or argv). So the API key variables the config
# names are declared, where set (preflight stops a run whose key is unset). onstart undoes it
# for local execution, whose executor would put `export KEY=...` in each job's command line.
KEY_ENVVARS = []
if workflow.storage_settings.default_storage_provider:
    KEY_ENVVARS = [v for v in preflight.key_variables(CFG) if v in os.environ]
    workflow.register_envvars(*KEY_ENVVARS)

# Per-user jobs run their script through `shell:` (memprobe/workflow/shell_job.py says why); they
# read the run's config from the file named by MEMPROBE_CONFIG_FILE. What each rule reads of
# it is also its params (memprobe/workflow/config_slices.py), so a changed setting reruns its jobs.
shell_job.export_config(CFG)
SLICER = config_slices.Slicer(CFG)


def settings(rule):
    """The config slice a rule's jobs read, as params (one entry each)."""
    return SLICER.params(rule)


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
POOL = paths.pool(CFG)
# The pool is an input of every bank job: a broken one stops the run here, in one line.
try:
    taxonomy.load_pool(POOL)
except taxonomy.TaxonomyError as err:
    sys.exit(f"memprobe: {err}")
# (system, mode) pairs that apply: retrieve needs a system with search().
if CFG.release.import_runs:
    # Imported runs (rules/release.smk): a mode applies where the release holds its records.
    from memprobe.release import importer as release

    PAIRS = release.pairs(CFG)
else:
    PAIRS = [
        (s, m)
        for s in SYSTEMS
        for m in CFG.modes
        if m == "dump_all" or registry.spec(s).searchable
    ]
    if not PAIRS:
        searchable = [s for s in registry.system_names() if registry.spec(s).searchable]
        sys.exit(
            f"memprobe: systems {SYSTEMS} x modes {CFG.modes}: nothing would be scored "
            f"(retrieve needs a system with search: {', '.join(searchable)}); add "
            "dump_all to modes or a searchable system"
        )


wildcard_constraints:
    user=r"user_\d\d\d+",
    system="|".join(map(re.escape, SYSTEMS)),
    mode="|".join(MODES),
    k=r"\d+",


def prompt(name):
    """A prompt file; a protocol stage's is the one the config picks (``prompts.<stage>``)."""
    if name in PROMPT_STAGES:
        name = getattr(CFG.prompts, name)
    return f"prompts/{name}.md"


# A stage pointed at a prompt file that is not there stops the run here, in one line.
for _stage in PROMPT_STAGES:
    if not os.path.exists(prompt(_stage)):
        sys.exit(f"memprobe: prompts.{_stage}: {prompt(_stage)}: file not found")


# Every path of the run (memprobe/workflow/paths.py, docs/runs.md): R = results/<run.name>
# (the default run's: results/ itself), the run's own artifacts; the users are made in
# results/users/<part>-<key>/, shared by the runs whose settings make the same file, and
# copied into R/users/.
# The files the users rules read where a config picks them (prompt(), POOL) are part of what
# makes a user: another prompt or pool, another folder (paths.users_files).
PATHS = paths.of(CFG, SLICER)
R = PATHS.results
# The shared users' folders this run reads (their ledgers bill its users' generation).
USERS_FOLDERS = sorted(set(PATHS.users.values()))


def check_run_name():
    """A named run's folders hold none of the default run's files (results/ and logs/ are its
    folders; memprobe/workflow/run_names.py). The Snakefile calls it once every rule is known.
    """
    files = [(r.name, str(f)) for r in workflow.rules for f in (*r.output, *r.log)]
    clash = run_names.clash(CFG, files)
    if clash:
        named = [
            f for f, layer in config_layers() if "name" in (layer.get("run") or {})
        ]
        sys.exit(f"memprobe: {(named or ['config'])[-1]}: {clash}")


def agent_module(wildcards):
    """The system's module file: editing it reruns exactly that system's jobs."""
    return registry.spec(wildcards.system).source_file()


def agent_prompts(wildcards):
    """The system's own prompt files as ``<name>_prompt`` inputs (editing one reruns its jobs)."""
    files = registry.spec(wildcards.system).prompt_files()
    return {f"{p}_prompt": path for p, path in files.items()}


# GPU placement: only the rollout/probe jobs of a system whose declaration asks for GPUs
# (memprobe/registry/systems.py Resources; memt) ask for one. For every other job these callables
# return None, which drops the resource, so neither the SLURM nor the Kubernetes plugin sees a
# GPU request (both react to the mere presence of `gpu`/`gpu_model`). gpu_model/cpus_per_gpu:
# the system's settings block (memt.*, docs/cluster.md).
def _resources(wildcards):
    return registry.spec(wildcards.system).resources


def _gpu_system(wildcards):
    return _resources(wildcards).gpus > 0


def _placement(wildcards, key):
    block = _resources(wildcards).settings_block
    return getattr(getattr(CFG, block), key, None) if block else None


def gpu_count(wildcards):
    return _resources(wildcards).gpus or None


def gpu_model(wildcards):
    return _placement(wildcards, "gpu_model") if _gpu_system(wildcards) else None


def cpus_per_gpu(wildcards):
    return _placement(wildcards, "cpus_per_gpu") if _gpu_system(wildcards) else None


# The rollout and probe jobs of a system that serves its own model (Resources.served_model;
# memt: Mem-T-4B, vLLM's host memory, ~500 Mem-T calls per rollout) get the large memory and the long runtime. Snakemake needs a number for
# every job of a rule that sets mem_mb/runtime, so the other systems' rollout/probe jobs get
# the ordinary job's size here (the profiles' default-resources hold the same for other rules).
# served model? -> (mem_mb, runtime in minutes)
JOB_SIZE = {True: (16000, 720), False: (4000, 120)}


def job_mem_mb(wildcards):
    return JOB_SIZE[_resources(wildcards).served_model][0]


def job_runtime(wildcards):
    return JOB_SIZE[_resources(wildcards).served_model][1]


def _llm_job_slots():
    """The llm_slots one LLM job takes: 1 (llm_slots jobs at once), and on the local backend
    a share that lets no more jobs run than its one server serves well (jobs_at_once), however
    high --cores goes."""
    total = global_resource("llm_slots")
    if CFG.llm.backend != "local" or not total:
        return 1
    return -(-int(total) // CFG.llm.local.jobs_at_once)


LLM_JOB = _llm_job_slots()


def probe_llm_slots(wildcards):
    """A system whose search calls its served model takes an LLM slot in its probe."""
    return LLM_JOB if _resources(wildcards).served_model else 0


# Job priorities (docs/performance.md): the longest remaining chain first. A rollout is the
# long link of each chain (a turn's calls wait for the previous turn's), longer for a system
# with more calls per turn (memprobe estimate's priors). So a user's persona, bank and tasks
# come first (they unlock its rollouts), then rollouts by their system's expected calls, then
# scoring in chain order, then the leaves. Snakemake starts the ready job of highest priority.
def _rollout_calls():
    from memprobe.report import estimate

    calls = estimate.protocol_calls(CFG, estimate.priors(CFG))
    roles = ("assistant", "simulator", "writer")
    return {s: sum(calls.get((s, r), 0.0) for r in roles) for s in SYSTEMS}


ROLLOUT_CALLS = _rollout_calls()
PRIORITY_SCORING = {
    "oracle": 6,
    "probe": 5,
    "slotfill": 4,
    "judge": 3,
    "attribution": 2,
}
TOP_ROLLOUT = 10 + round(max(ROLLOUT_CALLS.values(), default=0.0))
PRIORITY_USER = TOP_ROLLOUT + 1  # above every rollout


def rollout_priority(wildcards):
    return 10 + round(ROLLOUT_CALLS[wildcards.system])


def slotfill_memory(wildcards):
    """dump_all reads the whole store; retrieve reads the recorded top-k items."""
    if wildcards.mode == "dump_all":
        return f"{R}/{wildcards.system}/{wildcards.user}/memories.json"
    return f"{R}/{wildcards.system}/{wildcards.user}/retrieved_k{K}.json"


# Systems that embed in-process share ONE sentence-transformers server for a local run
# (memprobe/serving/embed_service.py): each job would otherwise spend 10+ s importing it. Jobs on
# cluster nodes can't reach it and load the model themselves.
EMBED_SERVER = (
    not CFG.release.import_runs
    and any(registry.spec(s).embeds for s in SYSTEMS)
    and getattr(workflow, "local_exec", True)
)


# The progress line (memprobe/report/progress.py): started onstart, its summary at the end.
PROGRESS = []


def jobs_done():
    """(jobs finished, jobs in the run) as Snakemake's own progress counts them."""
    scheduler = getattr(workflow, "scheduler", None)
    dag = getattr(workflow, "dag", None)
    return (scheduler.finished_jobs if scheduler else 0), (len(dag) if dag else 0)


def start_progress():
    from memprobe.report import progress

    # LLM jobs at once: llm_slots, and no more than --cores (each job takes one).
    at_once = [int(n) for n in map(global_resource, ("llm_slots", "_cores")) if n]
    rules = {job.rule.name for job in workflow.dag.jobs}
    try:
        predicted = progress.predict(CFG, min(at_once, default=1), USERS_FOLDERS, rules)
    except (OSError, ValueError, KeyError) as err:
        print(f"memprobe: progress line without an estimate ({err})", file=sys.stderr)
        predicted = None
    reporter = progress.Reporter(CFG, jobs_done, predicted, shared=USERS_FOLDERS)
    PROGRESS.append(reporter.start())


def end_progress():
    while PROGRESS:
        PROGRESS.pop().stop()


onstart:
    # Only what the scheduled jobs use starts (memprobe/workflow/servers.py): building the
    # inspector or the tables of a finished run starts no server and checks no endpoint.
    NEEDS = servers.needs(
        CFG,
        (
            (j.rule.name, dict(j.wildcards.items()))
            for j in workflow.dag.needrun_jobs()
        ),
    )
    if workflow.local_exec:
        workflow.envvars.difference_update(KEY_ENVVARS)
    share_rate_limit_across_nodes()
    settle_slurm_status()
    if NEEDS.anything:
        try:
            preflight.check(CFG, local_files=getattr(workflow, "local_exec", True))
        except preflight.PreflightError as err:
            sys.exit(f"memprobe: {err}")
    if EMBED_SERVER and NEEDS.embeddings:
        try:
            embed_service.start_for_run(
                f"{PATHS.logs}/embed_server.log"
            )  # loads while jobs run
        except embed_service.Unreachable as err:
            print(
                f"memprobe: {err}; jobs will load the embedding model",
                file=sys.stderr,
            )
    # backend local: verify the model (sha256), start ONE llama.cpp server for the whole run.
    if NEEDS.local_llm:
        try:
            executor = workflow.executor_plugin
            local_server.check_executor(
                CFG, bool(executor and executor.common_settings.non_local_exec)
            )
            local_server.start_for_run(CFG, f"{PATHS.logs}/local_server.log")
        except local_server.LocalModelError as err:
            sys.exit(f"memprobe: {err}")
    # judge.calibration.on_fail: stop: a judge that fails calibration ends the run before any job.
    if (
        CFG.judge.calibration.on_fail == "stop"
        and not CFG.release.import_runs
        and NEEDS.judging
    ):
        try:
            with step.wire_to(f"{PATHS.logs}/judge_calibration_onstart.log"):
                pairs = judge_verdicts.calibration_pairs(CFG, ANCHORS)
                calibration.stop_if_failed(
                    CFG, pairs, prompt("recovery_judge"), POOL
                )
        except calibration.CalibrationError as err:
            sys.exit(f"memprobe: {err}")
    start_progress()


def recovery_lines():
    """The run's closing lines on recovered replies (memprobe/spec/recovery_log.py): those of
    the jobs behind this invocation's targets, run now or earlier."""
    try:
        usage = [j.log.usage for j in workflow.dag.jobs if "usage" in j.log.keys()]
    except AttributeError:  # no DAG (a dry or aborted run): the default target's jobs
        usage = LEDGERS
    files = [recovery_log.path_for(p) for p in usage]
    try:
        jobs = recovery_log.read(files)
    except RecordError as err:
        return [f"memprobe: recovered replies: {err}"]
    return recovery_log.summary_lines(jobs, recovery_log.listed_in(files))


def print_recovery_lines():
    if not CFG.release.import_runs:  # imported runs made no LLM call here
        for line in recovery_lines():
            print(line, file=sys.stderr)


onsuccess:
    end_progress()
    if CFG.llm.backend == "local":
        local_server.stop_for_run(CFG)
    if EMBED_SERVER:
        embed_service.stop_for_run()
    print_recovery_lines()
    # The run's last lines (calibration.smk): slot-only labels, the cross-check, a failed judge.
    for line in calibration.closing_lines(
        DEGENERATE, CROSS_CHECK if CFG.judge.cross_check else None
    ):
        print(line, file=sys.stderr)
    if not CFG.release.import_runs:
        calibration.warn_at_end(CALIBRATION, CFG.judge)


onerror:
    end_progress()
    if CFG.llm.backend == "local":
        local_server.stop_for_run(CFG)
    if EMBED_SERVER:
        embed_service.stop_for_run()
    print_recovery_lines()
