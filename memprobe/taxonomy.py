"""The dimension pool (config/dimension_pool.yaml) and the category guides (prompts/)."""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memprobe import CATEGORIES
from memprobe.prompts import PROMPT_DIR

ROOT = Path(__file__).resolve().parent.parent
POOL_FILE = ROOT / "config" / "dimension_pool.yaml"
GUIDES_FILE = PROMPT_DIR / "category_guides.yaml"


class TaxonomyError(ValueError):
    pass


class Dimension(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    axis: str
    answer_space: list[str] = Field(min_length=3, max_length=6)
    source: str

    @field_validator("name")
    @classmethod
    def _snake(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", v):
            raise ValueError(f"{v!r} is not snake_case")
        return v


class Category(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str
    dimensions: list[Dimension] = Field(min_length=1)


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


def _read_yaml(path: Path):
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except FileNotFoundError:
        raise TaxonomyError(f"{path}: file not found") from None
    except yaml.YAMLError as err:
        raise TaxonomyError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None


@cache
def load_pool(path: str | os.PathLike[str] = POOL_FILE) -> Pool:
    raw = _read_yaml(Path(path))
    try:
        pool = Pool.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise TaxonomyError(f"{path}: {loc}: {first['msg']}") from None
    missing = [c for c in CATEGORIES if c not in pool.categories]
    extra = [c for c in pool.categories if c not in CATEGORIES]
    if missing or extra:
        raise TaxonomyError(
            f"{path}: categories must be exactly {', '.join(CATEGORIES)}"
            f" (missing: {missing or '-'}, unknown: {extra or '-'})"
        )
    seen: set[str] = set()
    for cat in CATEGORIES:
        for name in pool.names(cat):
            if name in seen:
                raise TaxonomyError(f"{path}: categories.{cat}: duplicate dimension {name!r}")
            seen.add(name)
    return pool


@cache
def load_guides(path: str | os.PathLike[str] = GUIDES_FILE) -> dict[str, str]:
    raw = _read_yaml(Path(path))
    if not isinstance(raw, dict) or sorted(raw) != sorted(CATEGORIES):
        raise TaxonomyError(f"{path}: expected exactly the keys {', '.join(CATEGORIES)}")
    return {k: " ".join(str(v).split()) for k, v in raw.items()}


def retrieve_query(dimension: str, category: str, guides: dict[str, str]) -> str:
    """The user-agnostic per-dimension query of retrieve mode (paper §3.4)."""
    return f"What best describes the user's {dimension.replace('_', ' ')}? {guides[category]}"
