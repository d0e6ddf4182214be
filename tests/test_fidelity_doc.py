"""docs/fidelity.md against the code: every config key a table names is a key of the config
model, every repository file it cites exists, every release § it cites is a section of
docs/release-format.md; and no tracked file cites a file outside the repository."""

from __future__ import annotations

import re
import subprocess

import pytest
from pydantic import BaseModel

from memprobe.config.schema import Config, block_model
from tests.helpers.workflow import ROOT

FIDELITY = ROOT / "docs" / "fidelity.md"
RELEASE_FORMAT = ROOT / "docs" / "release-format.md"
REPO_DIRS = ("config", "prompts", "docs", "memprobe", "agents", "scripts", "rules", "tests")
FILE_EXT = re.compile(r"\.(md|yaml|yml|py|smk|json|csv|txt|html)$")
KEY = re.compile(r"^[a-z][a-z0-9_]*(\.(?:[a-z0-9_]+|<[a-z]+>|\*))+$")


def config_tree(model: type[BaseModel] = Config, prefix: str = "") -> set[str]:
    """Every dotted key of the config model, sections included (``llm``, ``llm.roles``)."""
    keys: set[str] = set()
    for name, field in model.model_fields.items():
        key = prefix + name
        keys.add(key)
        ann = block_model(key) if not prefix else field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            keys |= config_tree(ann, key + ".")
    return keys


def is_key(token: str, keys: set[str]) -> bool:
    """A key of the model; ``<stage>``/``<role>`` stand for any child, ``*`` for the section."""
    parts = token.split(".")
    for key in keys:
        kparts = key.split(".")
        if len(kparts) != len(parts):
            continue
        if all(
            p == k or p == "*" or (p.startswith("<") and p.endswith(">"))
            for p, k in zip(parts, kparts, strict=True)
        ):
            return True
    return False


def table_cells(text: str) -> list[tuple[int, str]]:
    """(line number, cell) of every table body cell."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("|") and not set(line) <= set("|- "):
            out += [(n, c.strip()) for c in line.strip().strip("|").split("|")]
    return out


def ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_every_key_a_table_names_is_a_config_key():
    keys = config_tree()
    named, bad = set(), []
    for n, cell in table_cells(FIDELITY.read_text(encoding="utf-8")):
        for token in ticked(cell):
            name = token.split(":", 1)[0].strip()
            if KEY.match(name) and not FILE_EXT.search(name):
                named.add(name)
                if not is_key(name, keys):
                    bad.append((n, name))
    assert len(named) > 30, sorted(named)  # the check is not vacuous
    assert not bad, f"docs/fidelity.md names keys the config model does not have: {bad}"


def test_the_tables_name_the_issue_switches():
    text = FIDELITY.read_text(encoding="utf-8")
    for key in ("bank.pool", "prompts.user_simulator", "simulator.max_reply_chars",
                "system_settings.memt.profile_sources", "system_settings.memt.embed_source",
                "system_settings.memt.embedder_max_seq_length",
                "system_settings.memt.stop_at_tool_call",
                "system_settings.memt.observation_sources",
                "system_settings.amem.item_shape",
                "system_settings.longctx_full.tailor", "prompts.task_edit", "prompts.slotfill",
                "prompts.preference_judge", "prompts.bank_select"):  # fmt: skip
        assert f"`{key}" in text, key


def test_every_repository_file_it_cites_exists():
    text = FIDELITY.read_text(encoding="utf-8")
    cited = {
        t
        for t in re.findall(r"`([^`\s]+)`", text)
        if t.split("/", 1)[0] in REPO_DIRS and "/" in t and not set("<*") & set(t)
    }
    assert cited, "no repository file cited: the check would be vacuous"
    missing = sorted(t for t in cited if not (ROOT / t).exists())
    assert not missing, f"docs/fidelity.md cites files that are not in the repository: {missing}"


def release_sections() -> tuple[set[str], int]:
    text = RELEASE_FORMAT.read_text(encoding="utf-8")
    heads = set(re.findall(r"^#{2,3} (§\d+(?:\.\d+)?) ", text, re.M))
    quirks = text.split("## §8 ", 1)[1]
    return heads, len(re.findall(r"^\d+\. ", quirks, re.M))


def test_every_release_section_it_cites_exists():
    heads, quirks = release_sections()
    bad = []
    for line in FIDELITY.read_text(encoding="utf-8").splitlines():
        cells = line.strip().strip("|").split("|")
        if not line.startswith("|") or len(cells) < 3:
            continue
        # The release column (the third) cites docs/release-format.md; "same" rows cite none.
        for ref in re.findall(r"§(\d+(?:\.\d+)?)", cells[2]):
            top, _, sub = ref.partition(".")
            ok = f"§{ref}" in heads or (top == "8" and sub and 1 <= int(sub) <= quirks)
            if not ok:
                bad.append(ref)
    assert not bad, f"release sections cited but not in docs/release-format.md: {bad}"


# -- no tracked file cites a file outside the repository -----------------------------------
OUTSIDE = [
    re.compile(r"reference-\s*(?:#\s*)?release\.md"),  # the session's notes, split or not
    re.compile(r"memprobe-paper\.txt"),
    re.compile(r"HELPER-BRIEF"),
    re.compile(r"(?<![\w.])\.\./(?:\.\./)*shared/"),
    re.compile(r"/work/(?:release|shared|scratch|main|wt)\b"),
]
SKIP = ("tests/fixtures/release/",)  # a copy of the release's own layout


def tracked_text_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return [f for f in out if not f.startswith(SKIP) and (ROOT / f).is_file()]


def test_no_tracked_file_cites_a_file_outside_the_repository():
    files = tracked_text_files()
    assert "docs/fidelity.md" in files and len(files) > 100
    this = "tests/test_fidelity_doc.py"  # it names the patterns it looks for
    hits = []
    for f in files:
        if f == this:
            continue
        try:
            text = (ROOT / f).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        hits += [(f, p.pattern) for p in OUTSIDE if p.search(text)]
    assert not hits, f"cite a file outside the repository: {hits}"


@pytest.mark.parametrize(
    "text",
    [
        "as described in `../shared/reference-release.md` §3",
        '"""Run values (reference-\nrelease.md §3.7)."""',
        "# release (reference-\n# release.md §8)",
        "see /work/release/scorer.py",
    ],
)
def test_the_citation_check_sees_each_form(text):
    assert any(p.search(text) for p in OUTSIDE)
