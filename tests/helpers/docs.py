"""The docs' commands as the docs tests read them (tests/test_readme.py, test_running_doc.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from tests.helpers.workflow import ROOT

README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
COMMAND = re.compile(r"^(?:memprobe|snakemake|python3?|pip|vllm|conda) ")


def documented_commands() -> Iterator[tuple[str, str, str]]:
    """(file, command, its line) for code-block lines and inline `commands` of the docs."""
    for doc in DOCS:
        for line in doc.read_text(encoding="utf-8").splitlines():
            if line.startswith("    ") and COMMAND.match(line.strip()):
                yield doc.name, line.strip().split("  #")[0].strip(), line
            for inline in re.findall(r"`([^`]+)`", line):
                if COMMAND.match(inline) and " " in inline:
                    yield doc.name, inline, line


def configfiles_named(text: str) -> list[str]:
    """Every file a ``--configfile`` of ``text``'s commands names."""
    found = []
    for args in re.findall(r"--configfile((?:[ \t]+[^\s#-][^\s#]*)+)", text):
        found += args.split()
    return found
