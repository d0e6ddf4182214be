"""docs/configuration.md is generated from the config models and kept current."""

from __future__ import annotations

import pytest
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


def test_the_command_writes_the_file(tmp_path, capsys):
    out = tmp_path / "configuration.md"
    assert cli.main(["config-reference", "--output", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == config_reference.render()
    assert cli.main(["config-reference"]) == 0
    assert capsys.readouterr().out == config_reference.render()
