"""docs/configuration.md is generated from the config models and kept current."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from pydantic import Field, create_model

from memprobe import cli, config_reference
from memprobe.config.schema import Config
from tests.helpers.workflow import ROOT

REGENERATE = "memprobe config-reference --output docs/configuration.md"


def test_docs_configuration_is_generated_from_the_models():
    on_disk = (ROOT / config_reference.OUTPUT).read_text(encoding="utf-8")
    assert on_disk == config_reference.render(), f"docs/configuration.md is stale: {REGENERATE}"


def test_a_new_key_shows_up_in_the_reference(monkeypatch):
    """What makes the test above fail when a field is added without regenerating."""
    grown = create_model(
        "Config", __base__=Config, new_key=(int, Field(default=3, description="a new knob"))
    )
    monkeypatch.setattr(config_reference, "Config", grown)
    text = config_reference.render()
    assert "| `new_key` | a new knob | `3` |" in text
    assert text != (ROOT / config_reference.OUTPUT).read_text(encoding="utf-8")


def test_a_key_without_a_description_is_refused(monkeypatch):
    bare = create_model("Config", __base__=Config, bare_key=(int, 1))
    monkeypatch.setattr(config_reference, "Config", bare)
    with pytest.raises(ValueError, match=r"Config\.bare_key: no description"):
        config_reference.render()


def test_a_mapping_s_keys_are_named_also_when_any_name_goes():
    """A mapping keyed by an enumeration lists its values; one keyed by any name (a model's,
    ``progress.prices``) says what the names are, where it read "`<price>` is one of ."."""
    text = config_reference.render()
    assert "is one of ." not in text
    assert "`<role>` is one of `generator`, " in text
    assert "`progress.prices` is keyed by a model's name as the usage ledger" in text


def test_every_default_is_written_as_yaml():
    assert config_reference.default_cell(None) == "unset"
    assert config_reference.default_cell("required") == "required"
    assert config_reference.default_cell([1, 2]) == "`[1, 2]`"
    assert config_reference.default_cell(".cache/llm") == "`.cache/llm`"


def reference_rows(text: str) -> dict[str, tuple[str, str]]:
    """key -> (default, config/config.yaml's) of every row of the reference's tables."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("| `"):
            key, _meaning, default, given = (c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1])
            rows[key.strip("`")] = (default, given)
    return rows


def default_run() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text(encoding="utf-8"))


def test_the_reference_shows_what_config_yaml_gives_beside_the_default():
    """issue 46: the default column is the model's; a run starts from config/config.yaml, whose
    max_turns (1) and judge.form (scorer) the reference showed nowhere."""
    rows = reference_rows((ROOT / config_reference.OUTPUT).read_text(encoding="utf-8"))
    given = default_run()
    model = Config.model_fields
    assert rows["max_turns"] == (f"`{model['max_turns'].default}`", f"`{given['max_turns']}`")
    assert rows["judge.form"] == ("`llm`", f"`{given['judge']['form']}`")
    assert rows["max_turns"][0] != rows["max_turns"][1]  # the trap: they differ
    assert rows["n_users"] == ("required", f"`{given['n_users']}`")
    assert rows["seed"][1] == f"`{given['seed']}`" and rows["results_dir"][1] == ""


def test_every_key_config_yaml_sets_is_shown_with_its_value():
    rows = reference_rows(config_reference.render())

    def check(tree: dict[str, Any], prefix: str) -> None:
        for name, value in tree.items():
            key = prefix + name
            if key in rows:
                assert rows[key][1] == config_reference.default_cell(value), key
            else:
                assert isinstance(value, dict), f"{key}: set in config/config.yaml, not shown"
                check(value, key + ".")

    check(default_run(), "")


def test_the_default_run_s_file_must_be_readable(tmp_path):
    with pytest.raises(ValueError, match="cannot read the default run's config"):
        config_reference.render(tmp_path / "none.yaml")


def test_the_command_writes_the_file(tmp_path, capsys):
    out = tmp_path / "configuration.md"
    assert cli.main(["config-reference", "--output", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == config_reference.render()
    assert cli.main(["config-reference"]) == 0
    assert capsys.readouterr().out == config_reference.render()
