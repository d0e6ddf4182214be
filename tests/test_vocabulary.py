"""The closed vocabularies are written once (memprobe/vocabulary.py) and everything derives
from them: the config, records, the simulator's reply schema, the calibration anchors and
Snakemake's wildcard constraints."""

from __future__ import annotations

import re

from memprobe.config.schema import Config
from memprobe.protocol.calibration import Anchor
from memprobe.protocol.simulation import SimulatorReply
from memprobe.spec.records import Turn
from memprobe.vocabulary import CATEGORIES, FEEDBACK_TYPES, MODES, ROLES
from tests.helpers.workflow import ROOT

# Two neighbours of each vocabulary, as a written-out list would hold them.
WRITTEN_OUT = {
    "categories": r'"skill_memory",\s*"knowledge_memory"',
    "modes": r'"dump_all",\s*"retrieve"|dump_all\|retrieve',
    "roles": r'"editor",\s*"simulator"',  # subsets of roles for one purpose are fine
    "feedback types": r'"too_deep",\s*"too_shallow"',
}


def enum(schema: dict, field: str) -> list:
    prop = schema["properties"][field]
    prop = prop.get("items", prop)
    ref = prop.get("$ref")
    return schema["$defs"][ref.rsplit("/", 1)[-1]]["enum"] if ref else prop["enum"]


def test_schemas_and_config_take_the_vocabulary():
    assert enum(SimulatorReply.model_json_schema(), "feedback_type") == list(FEEDBACK_TYPES)
    assert enum(Turn.model_json_schema(), "feedback_type") == list(FEEDBACK_TYPES)
    assert enum(Anchor.model_json_schema(), "category") == list(CATEGORIES)
    schema = Config.model_json_schema()
    assert list(schema["properties"]["dims_per_category"]["propertyNames"]["enum"]) == list(
        CATEGORIES
    )
    assert enum(schema, "modes") == list(MODES)
    roles = schema["$defs"]["LLMSettings"]["properties"]["roles"]["propertyNames"]["enum"]
    assert roles == list(ROLES)


def test_no_vocabulary_is_written_out_twice():
    sources = [
        p
        for folder in ("memprobe", "agents", "rules", "scripts")
        for p in (ROOT / folder).rglob("*")
        if p.suffix in (".py", ".smk") and p.name != "vocabulary.py"
    ]
    found = [
        f"{p.relative_to(ROOT)}: {name}"
        for p in sources
        for name, pattern in WRITTEN_OUT.items()
        if re.search(pattern, p.read_text(encoding="utf-8"))
    ]
    assert not found, found


# A reply whose re-asks ran out gets a stand-in; "recovery" is metric B (docs/architecture.md,
# "The vocabulary"). The phrases that once gave the word its second meaning:
SECOND_MEANING = re.compile(
    r"recovered repl|replies were recovered|recovers? deterministically"
    r"|recovering deterministically|a stage's recovery|\brecover=|\bRecovery\("
    r"|records\.Recovered\b|recovery_log",
    re.I,
)


def test_a_stand_in_is_never_called_a_recovery():
    places = [
        *(ROOT / "docs").glob("*.md"),
        ROOT / "README.md",
        *(ROOT / "rules").rglob("*.rst"),
        *(ROOT / "rules").glob("*.smk"),
        *(p for d in ("memprobe", "agents", "scripts") for p in (ROOT / d).rglob("*.py")),
    ]
    found = [
        f"{p.relative_to(ROOT)}: {m.group(0)}"
        for p in places
        for m in SECOND_MEANING.finditer(p.read_text(encoding="utf-8"))
    ]
    assert not found, "say stand-in:\n" + "\n".join(found)
