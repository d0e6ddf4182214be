"""The dimension pool: its shipped content and the validation that guards it on load."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from memprobe import CATEGORIES
from memprobe.spec.taxonomy import (
    MIN_DIMS_PER_CATEGORY,
    POOL_FILE,
    TaxonomyError,
    check_counts,
    load_guides,
    load_pool,
)


@pytest.fixture
def raw_pool() -> dict:
    return yaml.safe_load(POOL_FILE.read_text())


def _write(tmp_path: Path, data) -> Path:
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_shipped_pool_is_valid_and_large_enough():
    pool = load_pool(POOL_FILE)
    assert list(pool.categories) == list(CATEGORIES)
    names = [n for c in CATEGORIES for n in pool.names(c)]
    assert len(names) == len(set(names))
    for cat in CATEGORIES:
        dims = pool.categories[cat].dimensions
        assert len(dims) >= MIN_DIMS_PER_CATEGORY
        for d in dims:
            assert d.axis.endswith("?") and 3 <= len(d.answer_space) <= 6 and d.source
    # Enough to draw the paper's 7/7/7/5/5 bank.
    check_counts(pool, dict(zip(CATEGORIES, (7, 7, 7, 5, 5), strict=True)))


def _break(raw, fn):
    data = copy.deepcopy(raw)
    fn(data)
    return data


def _dim(data, cat="skill_memory", i=0):
    return data["categories"][cat]["dimensions"][i]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: _dim(d).update(name="Reading Skill"),
            "dimensions.0(Reading Skill).name: 'Reading Skill' is not snake_case",
        ),
        (
            lambda d: _dim(d).update(axis="Reads carefully."),
            "axis: must be a question",
        ),
        (lambda d: _dim(d).update(answer_space=["a", "b"]), "answer_space: List should have"),
        (lambda d: _dim(d).update(answer_space=["a", "A", "b"]), "must be distinct"),
        (lambda d: _dim(d).pop("source"), "source: Field required"),
        (
            lambda d: d["categories"]["self_model"].update(
                dimensions=d["categories"]["self_model"]["dimensions"][:10]
            ),
            f"categories.self_model.dimensions: at least {MIN_DIMS_PER_CATEGORY}",
        ),
        (lambda d: d["categories"].pop("episodic_memory"), "missing: ['episodic_memory']"),
        (
            lambda d: _dim(d, "knowledge_memory").update(name=_dim(d)["name"]),
            "duplicate dimension",
        ),
    ],
    ids=["snake", "axis", "few_examples", "dup_examples", "source", "small", "category", "dup"],
)
def test_bad_pool_is_rejected_with_the_key(tmp_path, raw_pool, mutate, expected):
    path = _write(tmp_path, _break(raw_pool, mutate))
    with pytest.raises(TaxonomyError) as err:
        load_pool(path)
    msg = str(err.value)
    assert msg.startswith(str(path)) and "\n" not in msg
    assert expected in msg


def test_counts_beyond_the_pool_are_rejected():
    pool = load_pool(POOL_FILE)
    have = len(pool.names("self_model"))
    with pytest.raises(TaxonomyError, match=f"self_model: {have + 1} requested.*only {have}"):
        check_counts(pool, {"self_model": have + 1})


def test_guides_cover_every_category():
    assert sorted(load_guides()) == sorted(CATEGORIES)
