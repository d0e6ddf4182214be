"""The dimension pool: its shipped content and the validation that guards it on load."""

from __future__ import annotations

import copy
import json
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


# -- bank.pool: release: the release's dimension_pool.json, read where it lies ---------------
RELEASE_POOL = (
    Path(__file__).resolve().parents[1] / "fixtures/release/Deeppersona/data/dimension_pool.json"
)


def test_release_pool_loads_as_the_release_wrote_it():
    pool = load_pool(RELEASE_POOL)
    raw = json.loads(RELEASE_POOL.read_text())
    for cat in CATEGORIES:
        assert pool.names(cat) == [d["name"] for d in raw[cat]]
    # Kept as written, although our own pool's rules would refuse it: an episodic axis that
    # is not a question, a two-value answer space, categories of fewer than 25 dimensions.
    event = pool.dimension("episodic_memory", "legal_or_administrative_event")
    assert not event.axis.endswith("?") and len(event.answer_space) == 2
    assert len(pool.names("self_model")) < MIN_DIMS_PER_CATEGORY


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "file not found"),
        ("{not json", "not a JSON dimension pool"),
        ('{"meta": {}, "skill_memory": []}', "expected a mapping of exactly skill_memory"),
        ("SWAP_NAME", "skill_memory[0].name: String should match pattern"),
        ("EMPTY_CATEGORY", "self_model: expected a non-empty list of dimensions"),
    ],
    ids=["missing", "not-json", "categories", "bad-name", "empty-category"],
)
def test_a_missing_or_malformed_release_pool_is_one_line_naming_it(tmp_path, content, expected):
    path = tmp_path / "Deeppersona" / "dimension_pool.json"
    path.parent.mkdir()
    raw = json.loads(RELEASE_POOL.read_text())
    if content == "SWAP_NAME":
        raw["skill_memory"][0]["name"] = "Critical Thinking"
        content = json.dumps(raw)
    elif content == "EMPTY_CATEGORY":
        raw["self_model"] = []
        content = json.dumps(raw)
    if content is not None:
        path.write_text(content)
    with pytest.raises(TaxonomyError) as err:
        load_pool(path)
    msg = str(err.value)
    assert msg.startswith(str(path)) and "\n" not in msg
    assert expected in msg, msg
