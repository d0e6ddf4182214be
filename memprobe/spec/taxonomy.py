"""The dimension pool (config/dimension_pool.yaml, or the release's) and the category guides."""

from __future__ import annotations

import json
import os
import re
from functools import cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import ErrorDetails

from memprobe.config.schema import Config
from memprobe.spec.prompts import PROMPT_DIR
from memprobe.spec.records import RecordError, inside
from memprobe.vocabulary import CATEGORIES

ROOT = Path(__file__).resolve().parents[2]
POOL_FILE = ROOT / "config" / "dimension_pool.yaml"
GUIDES_FILE = PROMPT_DIR / "category_guides.yaml"


# The issue asks for at least 25 axes per category so that 7 picks still leave a real choice.
MIN_DIMS_PER_CATEGORY = 25


class TaxonomyError(ValueError):
    pass


class Dimension(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    axis: str = Field(min_length=10)
    answer_space: list[str] = Field(min_length=3, max_length=6)
    source: str = Field(min_length=3)

    @field_validator("name")
    @classmethod
    def _snake(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", v):
            raise ValueError(f"{v!r} is not snake_case")
        return v

    @field_validator("axis")
    @classmethod
    def _question(cls, v: str) -> str:
        # An axis is the neutral question the dimension answers, never a stance.
        if not v.strip().endswith("?"):
            raise ValueError("must be a question (ending with '?') naming the axis, not a value")
        return v.strip()

    @field_validator("answer_space")
    @classmethod
    def _distinct_examples(cls, v: list[str]) -> list[str]:
        cleaned = [a.strip() for a in v]
        if any(not a for a in cleaned):
            raise ValueError("example values must be non-empty")
        if len({a.lower() for a in cleaned}) != len(cleaned):
            raise ValueError("example values must be distinct")
        return cleaned


class Category(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str = Field(min_length=10)
    dimensions: list[Dimension] = Field(min_length=MIN_DIMS_PER_CATEGORY)


class Pool(BaseModel):
    model_config = ConfigDict(extra="forbid")
    meta: dict[str, str] = Field(default_factory=dict)
    categories: dict[str, Category]

    def names(self, category: str) -> list[str]:
        return [d.name for d in self.categories[category].dimensions]

    def dimension(self, category: str, name: str) -> Dimension:
        for d in self.categories[category].dimensions:
            if d.name == name:
                return d
        raise KeyError(name)

    def axes(self) -> dict[str, str]:
        """Dimension name -> axis question, for every dimension (what a degenerate label
        restates, memprobe/protocol/judge.py)."""
        return {d.name: d.axis for c in self.categories.values() for d in c.dimensions}


def _read_yaml(path: Path):
    try:
        with open(path, encoding="utf-8") as fh:
            # The C loader (libyaml) when present: the pool is read at every DAG load.
            return yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506
    except FileNotFoundError:
        raise TaxonomyError(f"{path}: file not found") from None
    except yaml.YAMLError as err:
        raise TaxonomyError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None


class ReleaseDimension(BaseModel):
    """One entry of the release's dimension_pool.json (docs/release-format.md §2.1): its axes
    need not be questions (the episodic ones name an event) and an answer space may be short."""

    name: str = Field(pattern=r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
    axis: str = Field(min_length=1)
    answer_space: list[str] = Field(min_length=1)
    source: str = ""


def load_release_pool(path: Path) -> Pool:
    """The release's pool as a :class:`Pool` (its categories carry no description)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TaxonomyError(f"{path}: file not found (bank.pool: release)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise TaxonomyError(f"{path}: not a JSON dimension pool ({err})") from None
    if not isinstance(raw, dict) or sorted(k for k in raw if k != "meta") != sorted(CATEGORIES):
        raise TaxonomyError(
            f"{path}: expected a mapping of exactly {', '.join(CATEGORIES)} (and meta) "
            "to lists of dimensions"
        )
    categories = {}
    for cat in CATEGORIES:
        if not isinstance(raw[cat], list) or not raw[cat]:
            raise TaxonomyError(f"{path}: {cat}: expected a non-empty list of dimensions")
        dims = []
        for i, entry in enumerate(raw[cat]):
            try:
                d = ReleaseDimension.model_validate(entry)
            except ValidationError as err:
                first = err.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "entry"
                raise TaxonomyError(f"{path}: {cat}[{i}].{where}: {first['msg']}") from None
            # The release's entries are valid as they are: no re-validation against our rules.
            dims.append(Dimension.model_construct(**d.model_dump()))
        categories[cat] = Category.model_construct(description="", dimensions=dims)
    meta = raw.get("meta")
    meta = {k: str(v) for k, v in meta.items()} if isinstance(meta, dict) else {}
    pool = Pool.model_construct(meta=meta, categories=categories)
    _check_unique(pool, path)
    return pool


def run_pool(cfg: Config, path: str | os.PathLike[str]) -> Pool:
    """The run's pool at ``path`` (a rule's input): the release's (``bank.pool: release``) is
    read only inside ``users.release_dir``, checked when it is read, as the importer's reads."""
    return load_pool(str(path), cfg.users.release_dir)


@cache
def load_pool(path: str | os.PathLike[str] = POOL_FILE, release_dir: str | None = None) -> Pool:
    """Our YAML pool, or the release's JSON one (a ``.json`` path; with ``release_dir``, only
    where it lies inside it)."""
    if Path(path).suffix == ".json":
        if release_dir:
            try:
                inside(release_dir, path, "users.release_dir")
            except RecordError as err:
                raise TaxonomyError(f"bank.pool: {err}") from None
        return load_release_pool(Path(path))
    raw = _read_yaml(Path(path))
    try:
        pool = Pool.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        raise TaxonomyError(f"{path}: {_loc(raw, first['loc'])}: {_msg(first)}") from None
    missing = [c for c in CATEGORIES if c not in pool.categories]
    extra = [c for c in pool.categories if c not in CATEGORIES]
    if missing or extra:
        raise TaxonomyError(
            f"{path}: categories must be exactly {', '.join(CATEGORIES)}"
            f" (missing: {missing or '-'}, unknown: {extra or '-'})"
        )
    _check_unique(pool, path)
    return pool


def _check_unique(pool: Pool, path: str | os.PathLike[str]) -> None:
    seen: set[str] = set()
    for cat in CATEGORIES:
        for name in pool.names(cat):
            if name in seen:
                raise TaxonomyError(f"{path}: categories.{cat}: duplicate dimension {name!r}")
            seen.add(name)


def _loc(raw, loc: tuple) -> str:
    """Dotted key path, with the dimension's name where the index points at one."""
    parts = [str(p) for p in loc]
    try:
        if parts[0] == "categories" and parts[2] == "dimensions":
            name = raw["categories"][parts[1]]["dimensions"][int(parts[3])].get("name")
            if name:
                parts[3] = f"{parts[3]}({name})"
    except (IndexError, KeyError, TypeError, ValueError, AttributeError):
        pass
    return ".".join(parts)


def _msg(error: ErrorDetails) -> str:
    msg = error["msg"].removeprefix("Value error, ")
    if error["type"] == "too_short" and error["loc"][-1] == "dimensions":
        msg = f"at least {MIN_DIMS_PER_CATEGORY} dimensions are required ({msg})"
    return msg


def check_counts(pool: Pool, counts: dict[str, int], source: str = "dims_per_category") -> None:
    """Every category must hold at least as many dimensions as a bank picks from it."""
    for cat, n in counts.items():
        have = len(pool.names(cat))
        if n > have:
            raise TaxonomyError(f"{source}.{cat}: {n} requested, the pool has only {have}")


@cache
def load_guides(path: str | os.PathLike[str] = GUIDES_FILE) -> dict[str, str]:
    raw = _read_yaml(Path(path))
    if not isinstance(raw, dict) or sorted(raw) != sorted(CATEGORIES):
        raise TaxonomyError(f"{path}: expected exactly the keys {', '.join(CATEGORIES)}")
    return {k: " ".join(str(v).split()) for k, v in raw.items()}


def retrieve_query(dimension: str, category: str, guides: dict[str, str]) -> str:
    """The user-agnostic per-dimension query of retrieve mode (paper §3.4)."""
    return f"What best describes the user's {dimension.replace('_', ' ')}? {guides[category]}"
