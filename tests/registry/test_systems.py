"""The memory systems by name (memprobe/registry/systems.py): the built-ins carry their own
declaration, and a plugin that cannot register is one line naming its entry point."""

from __future__ import annotations

from pathlib import Path

import pytest

from memprobe.registry import RegistryError, systems


@pytest.fixture
def with_plugin(monkeypatch):
    """Register one entry point of the memprobe.systems group (name, target) for a test."""

    def install(name: str, target: str) -> None:
        where = f"entry point {name!r} ({systems.ENTRY_POINT_GROUP}, {target})"
        monkeypatch.setattr(systems, "plugins", lambda group: [(name, target, where)])
        systems.specs.cache_clear()

    yield install
    systems.specs.cache_clear()


def test_the_built_ins_come_first_in_table_5s_order_each_declared_on_its_class():
    specs = systems.specs()
    assert list(specs)[:5] == ["nomem", "amem", "longctx_full", "mem0", "memt"]
    for name in ("nomem", "amem", "longctx_full", "mem0", "memt"):
        s = specs[name]
        assert systems.builtin(name) and s.module.startswith("memprobe.agents.")
    assert not specs["nomem"].searchable and specs["amem"].searchable


def test_an_unknown_system_says_where_a_plugin_must_be_installed():
    """(tests/config/test_schema.py: the message names the entry point group, the interpreter.)"""
    hint = r"must be installed into the interpreter that runs snakemake, docs/plugins\.md\)$"
    with pytest.raises(ValueError, match=r"^unknown system 'gpt_memory'; .*" + hint):
        systems.spec("gpt_memory")


def test_a_plugin_registers_under_its_entry_points_name(with_plugin):
    with_plugin("tiny", "tests.registry.test_systems:Tiny")
    assert systems.specs()["tiny"].target == "tests.registry.test_systems:Tiny"
    assert not systems.builtin("tiny")


@pytest.mark.parametrize(
    ("name", "target", "expected"),
    [
        ("amem", "tests.registry.test_systems:Tiny", "'amem' is a built-in system's name"),
        ("other", "tests.registry.test_systems:Tiny", "its class declares the name 'tiny'"),
        ("bare", "memprobe.vocabulary:MODES", "carries no declaration"),
        ("gone", "memprobe_nosuch:X", "cannot import memprobe_nosuch"),
    ],
)
def test_a_plugin_that_cannot_register_is_one_line_naming_its_entry_point(
    with_plugin, name, target, expected
):
    with_plugin(name, target)
    with pytest.raises(RegistryError) as err:
        systems.specs()
    line = str(err.value)
    assert line.startswith(f"entry point {name!r} (memprobe.systems, ") and expected in line
    assert "\n" not in line


@systems.declare("tiny", searchable=False)
class Tiny:
    """A system declared for the tests above."""


def test_a_systems_parts_are_inputs_of_its_jobs_like_its_module():
    """memt keeps its tool calls and store in a module of their own (agents/memt_store.py):
    editing it must rerun memt's jobs, as editing agents/memt.py does."""
    files = systems.spec("memt").source_files()
    assert [Path(f).name for f in files] == ["memt.py", "memt_store.py"]
    assert all(not Path(f).is_absolute() and Path(f).is_file() for f in files)
    assert [Path(f).name for f in systems.spec("nomem").source_files()] == ["nomem.py"]
