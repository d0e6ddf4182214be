"""A config field's meaning, read from the docstring under it (memprobe/config/field_docs.py)."""

from __future__ import annotations

from pydantic import Field, create_model

from memprobe.config.base import Strict
from memprobe.config.field_docs import description


class Block(Strict):
    limit: float = 1.0
    """a limit,
    over two lines"""
    named: int = Field(default=0, description="given in Field")
    """not this one"""
    bare: int = 0


class Narrower(Block):
    limit: float = 0.5
    """the narrower limit"""


def test_the_docstring_under_a_field_is_its_meaning():
    assert description(Block, "limit") == "a limit,\nover two lines"
    assert description(Block, "bare") is None


def test_a_field_s_own_description_wins():
    assert description(Block, "named") == "given in Field"


def test_a_subclass_reads_its_own_docstring_and_inherits_the_rest():
    assert description(Narrower, "limit") == "the narrower limit"
    assert description(Narrower, "named") == "given in Field"


def test_a_model_made_at_run_time_has_no_source_and_no_docstrings():
    made = create_model("Made", x=(int, 0))
    assert description(made, "x") is None


def test_importing_the_config_reads_no_docstrings():
    """The models are made without reading their sources (each job imports them)."""
    assert Block.model_fields["limit"].description is None
