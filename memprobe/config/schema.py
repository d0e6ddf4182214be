"""The run configuration: one validated pydantic model, checked when the DAG loads.

Snakemake merges every ``--configfile`` and ``--config`` into one dict; ``loading`` turns that
dict into a :class:`Config` or raises ``ConfigError`` with a one-line message that names the
offending key and what was expected.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    SerializeAsAny,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from memprobe.config.base import KeyedError, Strict
from memprobe.config.llm import (
    DEFAULT_TEMPERATURE,
    LLMSettings,
    RoleOverride,
    llm_settings_model,
    with_backend_settings,
)
from memprobe.config.protocols import PROTOCOLS, ROLE_FIXED
from memprobe.config.stages import (
    DEFAULT_CONTEXT_TOKENS,
    BankGen,
    Compat,
    JudgeSettings,
    PromptFiles,
    SimulatorSettings,
    SlotFill,
    TaskGen,
)
from memprobe.registry import backends
from memprobe.registry import systems as registry
from memprobe.vocabulary import CATEGORIES, MODES, Category, Mode


class Price(Strict):
    """USD per million tokens of one model."""

    input: float = Field(ge=0)
    """USD per million prompt tokens"""
    output: float = Field(ge=0)
    """USD per million completion tokens"""


class Progress(Strict):
    """The run's progress line (memprobe/report/progress.py)."""

    interval_s: float = Field(default=60.0, ge=0)
    """seconds between progress lines (0: only the summary at the end)"""
    prices: dict[str, Price] = Field(default_factory=dict)
    """keyed by a model's name as the usage ledger records it (`llm.model`, or a role's own
    `model`): its prices, for the money so far"""


class ClusterEmbedding(Strict):
    """How jobs on a cluster's nodes encode with a local embedding model (docs/cluster.md)."""

    server: Literal["node", "job"] = "node"
    """`node`: one embedding server per node, started by the run's first job there that
    encodes and shared by its later ones; `job`: each job loads the model itself"""
    idle_exit_s: float = Field(default=120.0, gt=0)
    """a node's server exits after this many seconds without a request"""


class WriterSettings(Strict):
    """One system's ``writer`` role settings, over ``llm.roles.writer`` and the ``llm`` defaults.

    The write path's model is part of the system (the release ran mem0 on gpt-4o-mini and
    A-Mem at temperature 1.0), so it is set with the system, not in the global role table.
    """

    model: str | None = None
    """the write path's model"""
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    """the write path's temperature"""
    max_tokens: int | None = Field(default=None, ge=1)
    """the write path's reply bound"""


class SystemSettings(Strict):
    """``system_settings``: one block per system that declares a settings model
    (memprobe/registry/systems.py), validated by that model."""

    if TYPE_CHECKING:  # the fields are the registered systems' (system_settings_model)

        def __getattr__(self, name: str) -> Any: ...


@cache
def system_settings_model() -> type[SystemSettings]:
    """The ``system_settings`` model of the systems registered in this environment."""
    fields: dict[str, Any] = {
        name: (s.settings, Field(default_factory=s.settings))
        for name, s in registry.specs().items()
        if s.settings is not None
    }
    return create_model("SystemSettings", __base__=SystemSettings, **fields)


_SYSTEM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


# Under results_dir, next to the runs: the users that runs with the same settings share
# (memprobe/workflow/paths.py). No run may take its name.
SHARED_USERS_DIR = "users"
# The default run has no name: its files go to results_dir and logs/ themselves (PyPSA-Eur's
# empty run name), so `snakemake results/table2.csv` builds it. A named run's folder must be
# none of its entries (memprobe/workflow/run_names.py checks at DAG load).
DEFAULT_RUN = ""


class RunSettings(Strict):
    """``run``: the run's name (PyPSA-Eur's ``run: name``), which namespaces its files.

    A named run's results, usage ledgers and report go to ``<results_dir>/<name>/``, its logs
    to ``logs/<name>/``; the default run, unnamed, writes into ``<results_dir>/`` and ``logs/``
    (docs/runs.md). Two configs under different names never share a file but the response
    cache and the users generated with the same settings.
    """

    name: str = Field(
        default=DEFAULT_RUN,
        description="the run's folder under results_dir and under logs/; empty: the default "
        "run, in results_dir and logs/ themselves (docs/runs.md)",
    )

    @field_validator("name")
    @classmethod
    def _one_folder(cls, v: str) -> str:
        if v and not _SYSTEM_NAME.fullmatch(v):
            raise ValueError(f"{v!r}: expected one folder name (letters, digits, _ . -)")
        if v == SHARED_USERS_DIR:
            raise ValueError(
                f"{v!r} is the folder of the shared users ({SHARED_USERS_DIR}/); choose another"
            )
        return v


class Users(Strict):
    source: Literal["generate", "release"] = "generate"
    """`generate` the users, or take the release's banks and tasks (`release`)"""
    release_dir: str | None = None
    """a checkout of the authors' release (`users.source: release`)"""


class Release(Strict):
    """Reading the authors' release (memprobe/release/, rules/release.smk,
    config/release.yaml).

    ``users.source: release`` imports banks and tasks only (any system can then be run on the
    release's users); ``import_runs: true`` also imports every run artifact (episodes, memories,
    preference, slot-fill/judge, attribution, the Stage 0 oracle) so the tables rebuild the
    paper's numbers.
    """

    import_runs: bool = False
    """also import the release's run records, so the tables rebuild the paper's"""
    runs: dict[str, str] = Field(
        default_factory=dict, description="system -> release run id (default <system>_pooled_50)"
    )
    bank_file: str = "Deeppersona/data/user_memory_banks_pooled_final.json"
    """the bank file inside the release"""
    tasks_dir: str = "benchmark_data/CustomTasksPooledFinal"
    """the task folder inside the release"""
    pool_file: str = "Deeppersona/data/dimension_pool.json"
    """the dimension pool inside the release (`bank.pool: release`)"""


class RolloutSettings(Strict):
    """``rollout``: where a rollout's conversations come from.

    ``replay: <release run>`` (with ``users.source: release``) drives each memory system
    through that run's recorded episodes (``history/<run>/``) instead of the simulator and
    the assistant: the same write hooks, no simulator, assistant or preference call
    (memprobe/protocol/simulation.py ``replay``; docs/fidelity.md, "Replay").
    """

    replay: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    """a release run (`history/<run>`) whose recorded conversations every system is replayed
    through instead of the simulator and assistant (`users.source: release`; docs/fidelity.md,
    "Replay")"""


class CompareSettings(Strict):
    """``compare``: other runs whose B this run's is set beside, user by user.

    The tables job writes ``compare.csv`` (paired differences over the users both runs
    scored, with bootstrap CIs) and ``figures/compare.png``; the inspector shows the other
    runs' labels and scores on each case page. Each run is found by its name under
    ``results_dir`` (its ``scored.json``), never by its config (docs/results.md).
    """

    runs: list[str] = Field(default_factory=list)
    """other runs (their `run.name`) to compare with, e.g. `[release]`; each must have built its
    tables (`results/<name>/scored.json`) and share a user with this run"""

    @field_validator("runs")
    @classmethod
    def _run_names(cls, v: list[str]) -> list[str]:
        for name in v:
            RunSettings._one_folder(name)
        if len(set(v)) != len(v):
            raise ValueError(f"a run is listed twice ({v})")
        return v


def _default_dims() -> dict[Any, int]:  # keys: the categories (the field's Literal)
    return dict(zip(CATEGORIES, (7, 7, 7, 5, 5), strict=True))


class Config(Strict):
    seed: int = 0
    """the run's seed (personas, sampling seeds, bootstrap CIs)"""
    n_users: int = Field(ge=1)
    """simulated users, `user_001` on"""
    run: RunSettings = Field(default_factory=RunSettings)
    """the run's name, which namespaces its files (docs/runs.md)"""
    results_dir: str = "results"
    """where every artifact goes"""
    users: Users = Field(default_factory=Users)
    # Top-level alias of users.release_dir, so `--config release_dir=PATH` works.
    release_dir: str | None = None
    """`users.release_dir` as a top-level key, so `--config release_dir=PATH` works"""
    release: Release = Field(default_factory=Release)
    dims_per_category: dict[Category, int] = Field(default_factory=_default_dims)
    """targets per category"""
    systems: list[str] = Field(min_length=1)
    """the memory systems run: `nomem`, `longctx_full`, `amem`, `mem0`, `memt`, plugins"""
    modes: list[Mode] = Field(default_factory=lambda: list(MODES))
    """the access modes scored"""

    @field_validator("modes")
    @classmethod
    def _distinct_modes(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"a mode is listed twice ({v})")
        return v

    top_k: int | list[int] = 5
    """items per search in retrieve mode (a list runs a sweep; the first is the tables')"""
    max_turns: int = Field(default=25, ge=1)
    """turn cap per episode"""
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    """where the conversations come from: `replay: <release run>` replays its recorded episodes"""
    compare: CompareSettings = Field(default_factory=CompareSettings)
    """other runs whose B is set beside this run's on the same users (`compare.csv`)"""
    compat: Compat = Field(default_factory=Compat)
    tasks: TaskGen = Field(default_factory=TaskGen)
    bank: BankGen = Field(default_factory=BankGen)
    simulator: SimulatorSettings = Field(default_factory=SimulatorSettings)
    prompts: PromptFiles = Field(default_factory=PromptFiles)
    slotfill: SlotFill = Field(default_factory=SlotFill)
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    system_settings: SerializeAsAny[SystemSettings] = Field(
        default_factory=dict, validate_default=True
    )
    protocol: Literal["paper", "release_compat"] | None = None
    """`paper` or `release_compat`: every key of that protocol must hold its value after the
    merge, `--config` included (config/paper.yaml, config/release-compat.yaml)"""
    llm: Annotated[SerializeAsAny[LLMSettings], BeforeValidator(with_backend_settings)]
    progress: Progress = Field(default_factory=Progress)
    """the run's progress line: how often, and the prices for its money figure"""
    cluster_embedding: ClusterEmbedding = Field(default_factory=ClusterEmbedding)
    """on a cluster, where jobs' encodes run: a server per node, or each job"""

    @field_validator("dims_per_category")
    @classmethod
    def _counts(cls, v: dict[str, int]) -> dict[str, int]:
        for cat, n in v.items():
            if n < 0:
                raise ValueError(f"{cat}: count must be >= 0 (got {n})")
        full = _default_dims() | v
        if sum(full.values()) == 0:
            raise ValueError("at least one dimension is needed")
        return {c: full[c] for c in CATEGORIES}

    @field_validator("systems")
    @classmethod
    def _known_systems(cls, v: list[str], info: ValidationInfo) -> list[str]:
        known = registry.system_names()
        # An import of the release's run records needs the names only, not the systems.
        release = info.data.get("release")
        importing = release is not None and release.import_runs
        for name in v:
            if not _SYSTEM_NAME.fullmatch(name):  # it becomes a path component and a wildcard
                raise ValueError(f"system name {name!r}: expected letters, digits, _ . -")
            if name not in known and not importing:
                raise ValueError(registry.unknown(name))
        if len(set(v)) != len(v):
            raise ValueError("a system is listed twice")
        return v

    @field_validator("system_settings", mode="before")
    @classmethod
    def _own_settings(cls, v: Any) -> SystemSettings:
        # Each system's block is checked by its own model (a plugin's too), under its own key.
        return system_settings_model().model_validate(v)

    @model_validator(mode="before")
    @classmethod
    def _release_dir_alias(cls, raw: Any) -> Any:
        if isinstance(raw, dict) and raw.get("release_dir"):
            users = dict(raw.get("users") or {})
            users["release_dir"] = raw["release_dir"]
            raw = {**raw, "users": users}
        return raw

    @model_validator(mode="after")
    def _release_needs_dir(self) -> Config:
        if self.release.import_runs and self.users.source != "release":
            raise ValueError("release.import_runs: needs users.source: release")
        if self.release.import_runs and len(self.ks) > 1:
            # The sweep's rules probe and score our own stores; imported runs bring only the
            # release's scored retrievals (DAG build would stop on their missing judge files).
            raise ValueError(
                f"top_k: a sweep (top_k: {self.top_k}) needs runs of our own; "
                "release.import_runs imports scored runs only: set one top_k"
            )
        if self.users.source == "release" and not self.users.release_dir:
            raise ValueError(
                "users.release_dir: required when users.source is 'release' "
                "(or pass --config release_dir=PATH)"
            )
        if self.rollout.replay and (self.users.source != "release" or self.release.import_runs):
            raise KeyedError(
                "rollout.replay",
                "rollout.replay: replays the release's recorded conversations: needs "
                "users.source: release (their users, banks and tasks) and runs of our own "
                "(not release.import_runs)",
            )
        if self.bank.pool == "release" and not self.users.release_dir:
            raise KeyedError(
                "bank.pool",
                "bank.pool: 'release' reads the release's dimension pool: set "
                "users.release_dir (or pass --config release_dir=PATH)",
            )
        return self

    @model_validator(mode="after")
    def _compare_others(self) -> Config:
        if self.run.name in self.compare.runs:
            raise KeyedError(
                "compare.runs", f"compare.runs: {self.run.name!r} is this run; name other runs"
            )
        return self

    def pool_path(self) -> str | None:
        """The release's pool file (``bank.pool: release``); None for our own pool."""
        if self.bank.pool != "release" or not self.users.release_dir:
            return None
        return str(Path(self.users.release_dir) / self.release.pool_file)

    @model_validator(mode="after")
    def _calibration_release(self) -> Config:
        cal = self.judge.calibration
        if cal.source == "release":
            cal.release_dir = cal.release_dir or self.users.release_dir
            if not cal.release_dir:
                raise ValueError(
                    "judge.calibration.release_dir: required when judge.calibration.source "
                    "is 'release' (or pass --config release_dir=PATH)"
                )
        return self

    @model_validator(mode="after")
    def _systems_checks(self) -> Config:
        # Each system run (not one whose records are imported) checks the config it needs.
        for name in [] if self.release.import_runs else self.systems:
            check = registry.spec(name).check
            if check is not None:
                check(self)
        return self

    def served(self, role: str) -> Any:
        """The backend's ``Served`` of ``role``: the model the run serves it itself (its
        context, its own reply bound), or None for an endpoint the run does not start."""
        return backends.load(self.llm.backend).served(self, role)

    def served_context(self, role: str) -> int | None:
        """The context the run's own server gives ``role`` (None: an endpoint elsewhere)."""
        served = self.served(role)
        return served.context_tokens if served else None

    @model_validator(mode="after")
    def _slotfill_budget(self) -> Config:
        served = self.served("slotfill")
        budget = self.slotfill.context_tokens
        if budget is None:
            self.slotfill.context_tokens = (
                served.context_tokens if served else DEFAULT_CONTEXT_TOKENS
            )
        elif served is not None and budget > served.context_tokens:
            raise ValueError(
                f"slotfill.context_tokens: {budget} is more than the {served.context_tokens} "
                f"tokens the slotfill model is served with ({served.context_key}); lower it "
                "or unset it"
            )
        return self

    @model_validator(mode="after")
    def _holds_protocol(self) -> Config:
        if self.protocol is None:
            return self
        values = self.model_dump()
        for key, want in PROTOCOLS[self.protocol].items():
            got: Any = values
            for part in key.split("."):
                got = got[part]
            if got != want:
                raise KeyedError(
                    key,
                    f"{key}: is {got!r} but protocol: {self.protocol} needs {want!r} "
                    "(the protocol's config file sets it; another layer or --config changed it)",
                )
        # Role overrides merge in from any layer below and cannot be removed by the paper
        # config: a role's model and sampling settings are protocol, so none may be changed.
        for role, over in self.llm.roles.items():
            for name in ROLE_FIXED:
                got = getattr(over, name)
                if got is None or (name == "model" and got == self.llm.model):
                    continue
                key = f"llm.roles.{role}.{name}"
                raise KeyedError(
                    key,
                    f"{key}: is {got!r} but protocol: {self.protocol} fixes each role's model "
                    "(the run's llm.model), temperature and max_tokens: unset it (a "
                    "per-system writer setting goes under system_settings)",
                )
        return self

    @field_validator("top_k")
    @classmethod
    def _positive_k(cls, v: int | list[int]) -> int | list[int]:
        ks = v if isinstance(v, list) else [v]
        if not ks or any(k < 1 for k in ks):
            raise ValueError(f"every k must be >= 1 (got {v})")
        if len(set(ks)) != len(ks):
            raise ValueError(f"a k is listed twice ({v})")
        return v

    # -- derived values used by the rules -------------------------------------------------
    @property
    def run_dir(self) -> str:
        """Where this run's results, ledgers and report go (docs/runs.md)."""
        return self.run_folder(self.run.name)

    def run_folder(self, name: str) -> str:
        """The results folder of the run named ``name`` under this ``results_dir``: this run's
        own (``run_dir``) and the runs ``compare.runs`` names, found without their configs.
        The one place a run's name becomes its folder; the default run's, empty, is
        results_dir itself."""
        return f"{self.results_dir}/{name}" if name else self.results_dir

    @property
    def logs_dir(self) -> str:
        """Where this run's job and server logs go."""
        return f"logs/{self.run.name}" if self.run.name else "logs"

    @property
    def ks(self) -> list[int]:
        return self.top_k if isinstance(self.top_k, list) else [self.top_k]

    @property
    def primary_k(self) -> int:
        """The k that retrieve mode (and every B_retrieve cell) uses."""
        return self.ks[0]

    @property
    def user_ids(self) -> list[str]:
        return [f"user_{i:03d}" for i in range(1, self.n_users + 1)]

    @property
    def n_dims(self) -> int:
        return sum(self.dims_per_category.values())


def role_settings(cfg: Config, role: str) -> dict[str, Any]:
    """The effective endpoint settings of one role (defaults + per-role override).

    A role sent to its own ``base_url`` sends only its own ``api_key_env``: the default key
    belongs to the default endpoint, and never goes anywhere else.
    """
    over = cfg.llm.roles.get(role) or RoleOverride()  # type: ignore[call-overload]
    own_endpoint = over.base_url is not None and over.base_url != cfg.llm.base_url
    default_key = None if own_endpoint else cfg.llm.api_key_env
    return {
        "base_url": over.base_url or cfg.llm.base_url,
        "model": over.model or cfg.llm.model,
        "api_key_env": over.api_key_env if over.api_key_env is not None else default_key,
        "temperature": (
            over.temperature if over.temperature is not None else DEFAULT_TEMPERATURE[role]
        ),
        "max_tokens": over.max_tokens or served_bound(cfg, role) or cfg.llm.max_tokens,
    }


def served_bound(cfg: Config, role: str) -> int | None:
    """The reply bound of the run's own server for ``role``, where that server answers it."""
    served = cfg.served(role)
    return served.max_tokens if served else None


def block_model(name: str) -> type[BaseModel] | None:
    """The model a top-level block of ``Config`` is validated by, with the blocks of the
    backends and systems registered here (``llm.local``, ``system_settings.amem``); None for
    a key that holds a value."""
    if name == "llm":
        return llm_settings_model()
    if name == "system_settings":
        return system_settings_model()
    annotation = Config.model_fields[name].annotation
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None
