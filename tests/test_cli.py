"""The `memprobe` command: `--help` in plain words, every option saying what it is (issue 17),
and `memprobe search` on a release-format dump."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memprobe.cli import main
from tests.helpers.workflow import ROOT

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


# -- the workflow from any folder (issue 32) --------------------------------------------------
MEMPROBE = [sys.executable, "-m", "memprobe.cli"]


def test_estimate_from_another_folder_finds_the_workflow(tmp_path):
    """Outside any workflow: memprobe's own checkout, said on stderr."""
    from tests.helpers.workflow import ROOT

    proc = subprocess.run(
        [*MEMPROBE, "estimate", "--no-ledger"], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("memprobe estimate: 1 user x 5 dims")  # config/config.yaml
    assert proc.stderr == f"memprobe: the workflow in {ROOT}\n"
    # From a folder inside the checkout, a --configfile typed relative to that folder.
    inside = subprocess.run(
        [*MEMPROBE, "estimate", "--no-ledger", "--configfile", "../config/paper.yaml"],
        cwd=ROOT / "docs", capture_output=True, text=True,
    )  # fmt: skip
    assert inside.returncode == 0, inside.stderr
    assert inside.stdout.startswith("memprobe estimate: 50 users x 31 dims")


def test_a_folder_without_the_workflow_is_one_line(tmp_path):
    proc = subprocess.run(
        [*MEMPROBE, "estimate", "--directory", str(tmp_path)], capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert proc.stderr == (
        f"memprobe estimate: --directory {tmp_path}: no MemProbe workflow there "
        "(no Snakefile or config/config.yaml)\n"
    )


def test_no_workflow_anywhere_says_where_it_looked(tmp_path, monkeypatch, capsys):
    from memprobe import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "__file__", str(tmp_path / "site-packages/memprobe/cli.py"))
    assert main(["estimate"]) == 1
    err = capsys.readouterr().err
    assert err == (
        "memprobe estimate: no MemProbe workflow (Snakefile and config/config.yaml) in "
        f"{tmp_path} or any folder above it, nor in memprobe's checkout "
        f"{tmp_path / 'site-packages'}; pass --directory\n"
    )


@pytest.mark.parametrize(
    "flags",
    [
        ["--configfile", "a.yaml", "--configfile", "b.yaml"],  # repeated: every one counts
        ["--configfile", "a.yaml", "b.yaml"],  # several after one flag, as snakemake takes them
    ],
)
def test_memprobe_job_keeps_every_configfile_in_order(flags, monkeypatch):
    from memprobe.workflow import job

    seen: dict = {}

    def build(rule, wildcards, configfiles):
        seen.update(rule=rule, wildcards=wildcards, configfiles=configfiles)
        return "the job"

    monkeypatch.setattr(job, "build", build)
    monkeypatch.setattr(job, "run", lambda built: seen.update(ran=built))
    assert main(["job", "judge", "user=user_001", *flags, "-d", str(ROOT)]) == 0
    assert [Path(f).name for f in seen["configfiles"]] == ["a.yaml", "b.yaml"]
    assert seen["wildcards"] == {"user": "user_001"} and seen["ran"] == "the job"


def test_every_command_that_reads_config_files_keeps_them_all():
    from memprobe.cli import configfile_option

    parser = argparse.ArgumentParser()
    configfile_option(parser, "files")
    args = parser.parse_args(["--configfile", "a", "b", "--configfile", "c"])
    assert args.configfile == ["a", "b", "c"]
    assert parser.parse_args([]).configfile == []  # the default is not shared between parses
