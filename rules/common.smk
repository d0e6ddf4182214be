# Config validation, run-wide names and path helpers shared by every rule file.
import sys

from memprobe import embed_service
from memprobe import preflight
from memprobe import shell_job
from memprobe import taxonomy
from memprobe.agents import registry
from memprobe.config import ConfigError, load_config

try:
    CFG = load_config(
        config, source=" + ".join(map(str, workflow.configfiles)) or "config"
    )
except ConfigError as err:
    sys.exit(f"memprobe: {err}")

# backend local: a configured model_path must exist (cheap; the checksum is verified onstart).
if CFG.llm.backend == "local":
    from memprobe import local_server

    try:
        local_server.check_model_path(CFG.llm.local)
    except local_server.LocalModelError as err:
        sys.exit(f"memprobe: {err}")

# Per-user jobs run their script through `shell:` (memprobe/shell_job.py says why); they
# read the run's config from the file named by MEMPROBE_CONFIG_FILE.
shell_job.export_config(config)


def script_job(**params):
    """The `job` param of a shell script job: its named files, wildcards and params as JSON."""
    return lambda wildcards, input, output: shell_job.render(
        wildcards, input, output, params
    )


def run_script(rule, script=None):
    """The shell command: scripts/<script, else the rule name>.py with the job's JSON."""
    return f"python scripts/{script or rule}.py {rule} {{log:q}} {{params.job:q}}"


R = CFG.results_dir
USERS = CFG.user_ids
SYSTEMS = CFG.systems
K = CFG.primary_k
GUIDES = "prompts/category_guides.yaml"
POOL = "config/dimension_pool.yaml"
# The pool is an input of every bank job: a broken one stops the run here, in one line.
try:
    taxonomy.load_pool(POOL)
except taxonomy.TaxonomyError as err:
    sys.exit(f"memprobe: {err}")
# (system, mode) pairs that apply: retrieve needs a system with search().
if CFG.release.import_runs:
    # Imported runs (rules/release.smk): a mode applies where the release holds its records.
    from memprobe import release

    PAIRS = release.pairs(CFG)
else:
    PAIRS = [
        (s, m)
        for s in SYSTEMS
        for m in CFG.modes
        if m == "dump_all" or registry.spec(s).searchable
    ]


wildcard_constraints:
    user=r"user_\d\d\d+",
    system="|".join(SYSTEMS),
    mode="dump_all|retrieve",
    k=r"\d+",


def prompt(name):
    return f"prompts/{name}.md"


def agent_module(wildcards):
    """The system's module file: editing it reruns exactly that system's jobs."""
    return registry.spec(wildcards.system).source_file()


def agent_prompts(wildcards):
    """The system's own prompt files as ``<name>_prompt`` inputs (editing one reruns its jobs)."""
    return {f"{p}_prompt": prompt(p) for p in registry.spec(wildcards.system).prompts}


# GPU placement (memt): only the rollout/probe jobs of a system flagged `gpu` in the registry
# ask for a GPU. For every other job these callables return None, which drops the resource,
# so neither the SLURM nor the Kubernetes plugin sees a GPU request (both react to the mere
# presence of `gpu`/`gpu_model`). gpu_model/cpus_per_gpu: config memt.* (docs/cluster.md).
def _gpu_system(wildcards):
    return registry.spec(wildcards.system).gpu


def gpu_count(wildcards):
    return 1 if _gpu_system(wildcards) else None


def gpu_model(wildcards):
    return CFG.memt.gpu_model if _gpu_system(wildcards) else None


def cpus_per_gpu(wildcards):
    return CFG.memt.cpus_per_gpu if _gpu_system(wildcards) else None


def probe_llm_slots(wildcards):
    """A GPU system's search calls its served model, so its probe takes an LLM slot."""
    return 1 if _gpu_system(wildcards) else 0


def slotfill_memory(wildcards):
    """dump_all reads the whole store; retrieve reads the recorded top-k items."""
    if wildcards.mode == "dump_all":
        return f"{R}/{wildcards.system}/{wildcards.user}/memories.json"
    return f"{R}/{wildcards.system}/{wildcards.user}/retrieved_k{K}.json"


# Systems that embed in-process share ONE sentence-transformers server for a local run
# (memprobe/embed_service.py): each job would otherwise spend 10+ s importing it. Jobs on
# cluster nodes can't reach it and load the model themselves.
EMBED_SERVER = (
    not CFG.release.import_runs
    and any(registry.spec(s).embeds for s in SYSTEMS)
    and getattr(workflow, "local_exec", True)
)


onstart:
    try:
        preflight.check(CFG)
    except preflight.PreflightError as err:
        sys.exit(f"memprobe: {err}")
    if EMBED_SERVER:
        try:
            embed_service.start_for_run()  # returns once bound; loads while jobs run
        except embed_service.Unreachable as err:
            print(
                f"memprobe: {err}; jobs will load the embedding model",
                file=sys.stderr,
            )
    # backend local: verify the model (sha256), start ONE llama.cpp server for the whole run.
    if CFG.llm.backend == "local":
        try:
            local_server.start_for_run(CFG)
        except local_server.LocalModelError as err:
            sys.exit(f"memprobe: {err}")
    # judge.calibration: stop: a judge that fails the anchors ends the run before any job.
    if CFG.judge.calibration == "stop" and not CFG.release.import_runs:
        try:
            calibration.stop_if_failed(CFG, ANCHORS, prompt("recovery_judge"))
        except calibration.CalibrationError as err:
            sys.exit(f"memprobe: {err}")


onsuccess:
    if CFG.llm.backend == "local":
        local_server.stop_for_run(CFG)
    if EMBED_SERVER:
        embed_service.stop_for_run()
    if (
        not CFG.release.import_runs
    ):  # a failed judge: the run's last line (calibration.smk)
        calibration.warn_at_end(CALIBRATION, CFG.judge)


onerror:
    if CFG.llm.backend == "local":
        local_server.stop_for_run(CFG)
    if EMBED_SERVER:
        embed_service.stop_for_run()
