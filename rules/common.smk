# Config validation, run-wide names and path helpers shared by every rule file.
import sys

from memprobe import preflight
from memprobe.agents import registry
from memprobe.config import ConfigError, load_config

try:
    CFG = load_config(config)
except ConfigError as err:
    sys.exit(f"memprobe: {err}")

R = CFG.results_dir
USERS = CFG.user_ids
SYSTEMS = CFG.systems
K = CFG.primary_k
GUIDES = "prompts/category_guides.yaml"
POOL = "config/dimension_pool.yaml"
# (system, mode) pairs that apply: retrieve needs a system with search().
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


def slotfill_memory(wildcards):
    """dump_all reads the whole store; retrieve reads the recorded top-k items."""
    if wildcards.mode == "dump_all":
        return f"{R}/{wildcards.system}/{wildcards.user}/memories.json"
    return f"{R}/{wildcards.system}/{wildcards.user}/retrieved_k{K}.json"


onstart:
    try:
        preflight.check(CFG)
    except preflight.PreflightError as err:
        sys.exit(f"memprobe: {err}")
