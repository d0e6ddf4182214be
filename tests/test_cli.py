"""The `memprobe` command: `--help` in plain words, every option saying what it is (issue 17),
and `memprobe search` on a release-format dump."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from memprobe.cli import main

SUBCOMMANDS = [["search"], ["fake-endpoint"], ["estimate"], ["local-server"], ["audit", "sample"]]


def help_text(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    return capsys.readouterr().out


def test_top_level_help_is_prose(capsys):
    out = help_text([], capsys)
    assert "``" not in out and "snakemake" in out


@pytest.mark.parametrize("argv", SUBCOMMANDS, ids=" ".join)
def test_every_option_has_help_and_shows_its_default(argv, capsys):
    lines = help_text(argv, capsys).split("options:")[1].splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^  (-\S+.*?)(?:\s{2,}(\S.*))?$", line)
        if not m or line.startswith("  -h"):
            continue
        follows = i + 1 < len(lines) and re.match(r"^\s{10,}\S", lines[i + 1])
        assert m.group(2) or follows, f"{' '.join(argv)}: {line.strip()} has no help"
    out = help_text(argv, capsys)
    if argv == ["search"]:
        assert "longctx_full" in out and "(default: 5)" in out


@pytest.mark.torch
def test_search_accepts_a_release_format_dump(tmp_path):
    dump = tmp_path / "memories.json"
    notes = ["[Task 1] plan a kayak trip", "User: I get seasick", "Agent: try the bay"]
    dump.write_text(json.dumps({"num_memories": 3, "memories": [{"content": n} for n in notes]}))
    cmd = [sys.executable, "-m", "memprobe.cli", "search", "--system", "longctx_full"]
    out = subprocess.run(
        [*cmd, "--memories", str(dump), "--k", "2", "--query", "seasickness"],
        capture_output=True,
        text=True,
        check=True,
    )
    top = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(top) == 2 and top[0]["content"] == "User: I get seasick"
