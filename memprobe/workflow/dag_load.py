"""What the Snakefile settles when the DAG loads (rules/common.smk), each a stop in one line.

The config Snakemake merged is the one validated (and the one the jobs read); the layers only
say which file set a bad key. Then the backend's cheap checks (the local model's path), the
pool every bank job reads (the release's only inside the release), the prompt file each
protocol stage reads, and the (system, mode) pairs the run scores.
"""

from __future__ import annotations

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
