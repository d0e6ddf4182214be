"""What the Snakefile settles when the DAG loads (rules/common.smk), each a stop in one line.

The config Snakemake merged is the one validated (and the one the jobs read); the layers only
say which file set a bad key. Then the backend's cheap checks (the local model's path), the
pool every bank job reads (the release's only inside the release), the prompt file each
protocol stage reads, and the (system, mode) pairs the run scores; once every rule is known,
that a named run's folders hold none of the default run's files (memprobe/workflow/run_names.py);
that the jobs run this checkout's code (memprobe/workflow/code_inputs.py); once Snakemake names
the executor (before it builds the DAG, a dry run's too), that the jobs can reach the backend's
server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

from memprobe.config.base import ConfigError
from memprobe.config.loading import read_config_file, validate
from memprobe.config.schema import Config
from memprobe.config.stages import PROMPT_STAGES
from memprobe.llm.providers import backend
from memprobe.registry import systems as registry
from memprobe.spec import taxonomy
from memprobe.spec.records import RecordError, inside
from memprobe.workflow import paths


def stop(problem: object) -> NoReturn:
    """End the DAG load with one line (Snakemake prints it and exits non-zero)."""
    raise SystemExit(f"memprobe: {problem}")


def config_layers(workflow: Any) -> list[tuple[str, dict[str, Any]]]:
    """The config as Snakemake layered it: the Snakefile's file, each --configfile, --config."""
    given = [str(f) for f in workflow.overwrite_configfiles]
    files = [str(f) for f in workflow.configfiles if str(f) not in given] + given
    layers = [(f, read_config_file(f)) for f in files]  # a key given twice is refused
    return layers + [("--config", dict(workflow.config_settings.config))]


def run_config(workflow: Any, config: dict[str, Any]) -> Config:
    """Snakemake's merged ``config``, validated (an error names the layer that set the key),
    and what its backend checks without a request."""
    try:
        cfg = validate(config, config_layers(workflow))
    except ConfigError as err:
        stop(err)
    for problem in backend(cfg.llm.backend).check(cfg):
        stop(problem)
    return cfg


def pool(cfg: Config) -> str:
    """The pool the bank rule reads (memprobe/workflow/paths.py): the release's only where it
    lies inside ``users.release_dir`` (else the run stops here, in one line)."""
    path = paths.pool(cfg)
    if cfg.pool_path() and cfg.users.release_dir:
        try:
            inside(cfg.users.release_dir, path, "users.release_dir")
        except RecordError as err:
            stop(f"bank.pool: {err}")
    return path


def check_pool(pool: str, counts: dict[str, int] | None = None) -> None:
    """The pool is an input of every bank job: a broken one (or, with ``counts``, one with
    too few dimensions for the bank) stops the run here."""
    try:
        loaded = taxonomy.load_pool(pool)
        if counts is not None:
            taxonomy.check_counts(loaded, counts)
    except taxonomy.TaxonomyError as err:
        stop(err)


def prompt_file(cfg: Config, name: str) -> str:
    """A prompt file; a protocol stage's is the one the config picks (``prompts.<stage>``)."""
    if name in PROMPT_STAGES:
        name = getattr(cfg.prompts, name)
    return f"prompts/{name}.md"


def check_prompts(cfg: Config, exists: Any) -> None:
    """A stage pointed at a prompt file that is not there stops the run here."""
    for stage in PROMPT_STAGES:
        if not exists(prompt_file(cfg, stage)):
            stop(f"prompts.{stage}: {prompt_file(cfg, stage)}: file not found")


def scored_pairs(cfg: Config) -> list[tuple[str, str]]:
    """The (system, mode) pairs that apply: retrieve needs a system with search(); imported
    runs (rules/release.smk) score a mode where the release holds its records."""
    if cfg.release.import_runs:
        from memprobe.release import layout

        return layout.pairs(cfg)
    pairs: list[tuple[str, str]] = [
        (s, m)
        for s in cfg.systems
        for m in cfg.modes
        if m == "dump_all" or registry.spec(s).searchable
    ]
    if not pairs:
        searchable = [s for s in registry.system_names() if registry.spec(s).searchable]
        stop(
            f"systems {cfg.systems} x modes {cfg.modes}: nothing would be scored (retrieve "
            f"needs a system with search: {', '.join(searchable)}); add dump_all to modes or "
            "a searchable system"
        )
    return pairs


def check_code(checkout: str, python: str) -> None:
    """The jobs run this checkout's memprobe, whose files are the rules' code inputs, or the run
    stops in one line (memprobe/workflow/code_inputs.py)."""
    from memprobe.workflow import code_inputs

    if problem := code_inputs.foreign_code(Path(checkout), python):
        stop(problem)


def set_by(workflow: Any, section: str, key: str) -> str:
    """The last config layer that sets ``section.key`` ("config" where none does)."""
    named = [f for f, layer in config_layers(workflow) if key in (layer.get(section) or {})]
    return (named or ["config"])[-1]


def check_executor(workflow: Any, cfg: Config) -> None:
    """A backend the run serves on this host's loopback (``local``) under an executor that
    runs the jobs on other hosts (SLURM, Kubernetes) stops the run, a dry run too, in one line
    before the DAG is built: its jobs could never reach the server."""
    from memprobe.workflow import cluster, compat

    if not backend(cfg.llm.backend).loopback_only:
        compat.before_execute(None)
        return
    layer = set_by(workflow, "llm", "backend")

    def check(executor: str) -> None:
        if cluster.runs_jobs_elsewhere(executor):
            stop(
                f"{layer}: llm.backend: '{cfg.llm.backend}' serves the model on this host's "
                f"loopback, which the jobs of --executor {executor} (on other hosts) cannot "
                "reach; give a config with backend 'openai' and an endpoint they can reach "
                "(config/examples/, docs/cluster.md)"
            )

    compat.before_execute(check)


def check_run_name(workflow: Any, cfg: Config) -> None:
    """A named run's folders hold none of the default run's files (results/ and logs/ are its
    folders); the line names the layer that set the name. Called once every rule is known."""
    from memprobe.workflow import run_names

    files = [(r.name, str(f)) for r in workflow.rules for f in (*r.output, *r.log)]
    clash = run_names.clash(cfg, files)
    if clash:
        stop(f"{set_by(workflow, 'run', 'name')}: {clash}")
