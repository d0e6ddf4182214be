"""The README and docs match the code: every config key in the table, every command run.

The config table is checked against the pydantic model (memprobe/config.py), so a key added
anywhere in the model fails here until the README has its row and default.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator
from typing import Any

import yaml
from pydantic import BaseModel

from memprobe.config import Config
from tests.conftest import ROOT

README = ROOT / "README.md"


def model_keys(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, default) for every leaf of the config; "required" where there is none."""
    for name, field in model.model_fields.items():
        key = prefix + name
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from model_keys(ann, key + ".")
            continue
        if typing.get_origin(ann) is dict:
            value = typing.get_args(ann)[1]
            if isinstance(value, type) and issubclass(value, BaseModel):
                yield from model_keys(value, key + ".<role>.")
                continue
        yield (
            key,
            "required" if field.is_required() else field.get_default(call_default_factory=True),
        )


def default_cell(default: Any) -> str:
    """How the README writes a default: YAML in backticks, "unset" for None."""
    if default == "required":
        return "required"
    if default is None:
        return "unset"
    text = yaml.safe_dump(default, default_flow_style=True, sort_keys=False, width=1000).strip()
    return f"`{text.removesuffix('...').strip()}`"


def readme_table() -> dict[str, str]:
    """key -> default cell of the README's configuration table."""
    section = README.read_text(encoding="utf-8").split("## Configuration")[1].split("\n## ")[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"^\| `([^`]+)` \| .* \| (.+) \|$", line)
        if m:
            rows[m.group(1)] = m.group(2).strip()
    return rows


def test_every_config_key_is_in_the_readme_with_its_default():
    table = readme_table()
    keys = dict(model_keys(Config))
    missing = sorted(set(keys) - set(table))
    assert not missing, f"README config table lacks: {missing}"
    stale = sorted(set(table) - set(keys))
    assert not stale, f"README config table names keys the model does not have: {stale}"
    wrong = {k: (table[k], default_cell(d)) for k, d in keys.items() if table[k] != default_cell(d)}
    assert not wrong, f"README default differs from the model (README, model): {wrong}"
