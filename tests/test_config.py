"""Config validation: every bad key is one line naming it, and the run stops before any job."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys

import pytest
import yaml
from snakemake.utils import update_config

from memprobe.config import (
    PAPER_PROTOCOL,
    RELEASE_COMPAT_PROTOCOL,
    WORKFLOW_CONFIG,
    ConfigError,
    load_config,
    load_layers,
    read_config_file,
    role_settings,
    snakemake_merge,
)
from tests.helpers.paper import merged
from tests.helpers.workflow import ROOT, SNAKEMAKE, local_raw, tiny_config


def base() -> dict:
    return tiny_config("http://127.0.0.1:9/v1")


def test_tiny_config_is_valid_and_derives_users():
    cfg = load_config(base())
    assert cfg.user_ids == ["user_001", "user_002"]
    assert cfg.n_dims == 5
    assert cfg.primary_k == 5
    assert role_settings(cfg, "simulator")["temperature"] == 0.85
    assert role_settings(cfg, "judge")["temperature"] == 0.0


def test_the_local_servers_assistant_bound_reaches_only_the_assistant_it_serves():
    cfg = load_config(merged("config/config.yaml"))
    assert role_settings(cfg, "assistant")["max_tokens"] == 400
    assert role_settings(cfg, "simulator")["max_tokens"] == cfg.llm.max_tokens == 1000
    # An assistant on an endpoint of its own is not the local server's to bound.
    raw = merged("config/config.yaml")
    raw["llm"]["roles"] = {"assistant": {"base_url": "http://127.0.0.1:9/v1"}}
    assert role_settings(load_config(raw), "assistant")["max_tokens"] == 1000
    # The paper's protocol unsets it, so its assistant has the protocol's bound.
    paper = load_config(merged("config/config.yaml", "config/paper.yaml"))
    assert role_settings(paper, "assistant")["max_tokens"] == 8192


def test_an_unknown_system_says_where_plugins_were_looked_for():
    raw = base() | {"systems": ["gpt_memory"]}
    with pytest.raises(ConfigError) as err:
        load_config(raw)
    line = str(err.value)
    assert "'memprobe.systems' entry points" in line and sys.executable in line, line
    assert "\n" not in line


def test_default_dims_are_the_papers():
    raw = base()
    del raw["dims_per_category"]
    assert list(load_config(raw).dims_per_category.values()) == [7, 7, 7, 5, 5]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda c: c.update(systems=["nomem", "gpt_memory"]),
            "systems: unknown system 'gpt_memory'",
        ),
        (lambda c: c.update(n_users=-1), "n_users: Input should be greater than or equal to 1"),
        (
            lambda c: c["dims_per_category"].update(hobby_memory=2),
            "dims_per_category.hobby_memory: unknown key",
        ),
        (lambda c: c["llm"].pop("base_url"), "llm: llm.base_url: required for backend 'openai'"),
        (
            lambda c: c["llm"].update(backend="anthropic"),
            "llm.backend: unknown backend 'anthropic'; expected one of openai, local, fake",
        ),
        (
            lambda c: c.update(modes=["dump_all", "grep"]),
            "modes.1: Input should be 'dump_all' or 'retrieve'",
        ),
        (lambda c: c.update(top_k=0), "top_k: every k must be >= 1"),
        (lambda c: c.update(max_turn=3), "max_turn: unknown key"),
        (lambda c: c.pop("n_users"), "n_users: required key is missing"),
        (
            lambda c: c.update(prompts={"slotfill": "../outside"}),
            "prompts.slotfill: String should match pattern",
        ),
        (
            lambda c: c.update(bank={"pool": "release"}),
            "bank.pool: 'release' reads the release's dimension pool: set users.release_dir",
        ),
        (
            lambda c: c.update(rollout={"replay": "longctx_full_pooled_50"}),
            "rollout.replay: replays the release's recorded conversations: needs "
            "users.source: release",
        ),
        (
            lambda c: c.update(rollout={"replay": "../elsewhere"}),
            "rollout.replay: String should match pattern",
        ),
    ],
)
def test_bad_config_is_one_line_naming_the_key(change, expected):
    raw = base()
    change(raw)
    with pytest.raises(ConfigError) as err:
        load_config(raw, source="test.yaml")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("test.yaml: ")
    assert expected in message, message


@pytest.mark.workflow
@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda c: c.update(systems=["nomem", "gpt_memory"]), "unknown system 'gpt_memory'"),
        (lambda c: c.update(n_users=-1), "n_users:"),
        (lambda c: c["dims_per_category"].update(hobby_memory=2), "dims_per_category.hobby_memory"),
        (lambda c: c["llm"].pop("base_url"), "llm.base_url: required"),
        (lambda c: None, "llm.base_url: endpoint http://127.0.0.1:9/v1 is unreachable"),
        (
            lambda c: c.update(prompts={"user_simulator": "no_such_prompt"}),
            "prompts.user_simulator: prompts/no_such_prompt.md: file not found",
        ),
    ],
    ids=[
        "unknown-system",
        "negative-users",
        "unknown-category",
        "missing-base-url",
        "unreachable",
        "missing-prompt-file",
    ],
)
def test_bad_input_stops_the_run_with_one_line_and_no_artifact(change, expected, workflow_factory):
    raw = base()  # port 9 (discard) has no listener: the endpoint is unreachable
    change(raw)
    wf = workflow_factory(raw)
    # The default config must not fill in what this test removed: make it the test's own.
    (wf.root / "config" / "config.yaml").write_text(wf.config_path.read_text())
    proc = wf.run("tables", check=False)
    assert proc.returncode != 0
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("memprobe: ")]
    assert len(lines) == 1 and expected in lines[0], proc.stderr[-2000:]
    assert not (wf.root / "results").exists()


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://x/v1", "http:///v1", "nohost"])
def test_endpoint_urls_must_be_http_with_a_host(url):
    raw = tiny_config(url)
    with pytest.raises(ConfigError, match="llm.base_url"):
        load_config(raw)
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["memt"], memt={"endpoint": url})
    with pytest.raises(ConfigError, match="memt.endpoint"):
        load_config(raw)


@pytest.mark.parametrize("arg", ["--host", "--host=0.0.0.0", "--api-key"])
def test_vllm_args_cannot_override_host_or_key(arg):
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["memt"])
    raw["memt"] = {"serve": True, "model_path": "/m", "vllm_args": [arg, "0.0.0.0"]}
    with pytest.raises(ConfigError, match="memt.vllm_args"):
        load_config(raw)


def test_release_system_names_must_be_safe_path_parts():
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["../../x"])
    raw["users"] = {"source": "release", "release_dir": "/tmp"}
    raw["release"] = {"import_runs": True}
    with pytest.raises(ConfigError, match="system name"):
        load_config(raw)


def test_duplicate_yaml_keys_are_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("n_users: 1\nllm:\n  backend: fake\n  backend: openai\n")
    with pytest.raises(ConfigError, match="line 4: key 'backend' appears twice"):
        read_config_file(path)


@pytest.mark.parametrize("text", ["? [a, b]\n: 1\n", "n_users: 1\n? {x: 1}\n: 2\n"])
def test_an_unhashable_yaml_key_is_one_line(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"c\.yaml: line \d+: a key must be a plain value") as err:
        read_config_file(path)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("key,value", [("top_k", [5, 5]), ("modes", ["retrieve", "retrieve"])])
def test_repeated_k_or_modes_are_refused(key, value):
    with pytest.raises(ConfigError, match="twice"):
        load_config(tiny_config("http://127.0.0.1:9/v1", **{key: value}))


BASE = {"n_users": 1, "systems": ["nomem"], "llm": {"backend": "fake"}}


def dry_run(*args: str) -> subprocess.CompletedProcess:
    """`snakemake -n` in the repository with the default config plus ``args``."""
    return subprocess.run(
        [SNAKEMAKE, "-n", "-q", "--cores", "1", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.workflow
def test_nested_config_on_the_command_line_reaches_the_model():
    """The form docs/configuration.md shows: a YAML mapping for a nested key, merged key by key."""
    proc = dry_run("--config", "llm={concurrency: 0}")
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1] == (
        "memprobe: --config: llm.concurrency: Input should be greater than or equal to 1"
    )
    # the other llm keys of config/config.yaml survive the nested override
    assert dry_run("--config", "llm={concurrency: 2}").returncode == 0


@pytest.mark.workflow
def test_a_command_line_typo_is_blamed_on_the_command_line():
    proc = dry_run("--config", "n_user=3")
    assert proc.stderr.strip().splitlines()[-1] == "memprobe: --config: n_user: unknown key"


@pytest.mark.workflow
def test_top_k_can_be_set_on_the_command_line():
    """Snakemake's --config takes keys of two or more letters: the key is top_k."""
    proc = subprocess.run(
        [SNAKEMAKE, "-n", "--cores", "1", "--config", "top_k=10"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "retrieved_k10.json" in proc.stdout and "retrieved_k5.json" not in proc.stdout


@pytest.mark.workflow
@pytest.mark.parametrize("slots,each", [(8, 4), (4, 2)])
def test_the_local_backend_runs_no_more_llm_jobs_than_its_server_serves(slots, each):
    """--cores 32 (an API run's advice) on the offline default: its server's 4 slots serve 2
    conversations well, so each LLM job takes half the llm_slots and 2 run at once."""
    proc = subprocess.run(
        [SNAKEMAKE, "-n", "--cores", "32", "--resources", f"llm_slots={slots}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    taken = {int(n) for n in re.findall(r"resources: .*llm_slots=(\d+)", proc.stdout)}
    assert taken == {0, each}  # 0: the offline judge's and the probes' jobs
    assert slots // each == 2


def test_the_old_key_k_names_its_new_name():
    with pytest.raises(ConfigError) as err:
        load_layers([("config/config.yaml", BASE), ("old.yaml", {"k": 10})])
    assert str(err.value) == "old.yaml: k: renamed top_k (write top_k: 10, or --config top_k=...)"


def test_errors_name_the_layer_that_set_the_key():
    layers = [("config/config.yaml", BASE), ("site.yaml", {"llm": {"timeout_s": -1}})]
    with pytest.raises(ConfigError, match=r"^site\.yaml: llm\.timeout_s: "):
        load_layers(layers)
    # a key nobody set (or a rule across keys) names every layer
    with pytest.raises(ConfigError, match=r"^a\.yaml \+ b\.yaml: n_users: required key"):
        load_layers([("a.yaml", {"systems": ["nomem"]}), ("b.yaml", {"llm": {"backend": "fake"}})])


def test_a_roles_typo_lists_the_roles():
    with pytest.raises(ConfigError) as err:
        load_config({**BASE, "llm": {"backend": "fake", "roles": {"judgee": {"model": "m"}}}})
    msg = str(err.value)
    assert "llm.roles.judgee: unknown key" in msg and "judge" in msg and "oracle" in msg
    assert "skill_memory" not in msg


@pytest.mark.workflow
def test_a_config_that_scores_nothing_stops_before_any_job():
    proc = dry_run("--config", "systems=[nomem]", "modes=[retrieve]")
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("memprobe: systems ['nomem'] x modes ['retrieve']: nothing would be")


def lookup(values: dict, key: str):
    for part in key.split("."):
        values = values[part]
    return values


def other_than(value):
    if isinstance(value, bool):
        return not value
    if value is None:
        return 3
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, dict):
        return {k: 1 for k in value}
    if isinstance(value, list):
        return value[:1]
    return f"not {value}"


def test_merged_paper_config_holds_every_protocol_key():
    cfg = load_config(merged("config/config.yaml", "config/paper.yaml"))
    values = cfg.model_dump()
    for key, want in PAPER_PROTOCOL.items():
        assert lookup(values, key) == want, key
    assert cfg.bank.pool_sample is None and cfg.bank.show_examples
    assert cfg.n_users == 50 and list(cfg.dims_per_category.values()) == [7, 7, 7, 5, 5]
    assert cfg.max_turns == 25 and cfg.top_k == 5 and cfg.slotfill.context_tokens == 245_000
    assert cfg.llm.timeout_s == 120 and cfg.llm.roles == {}  # nothing of the small-model run


def test_paper_config_wins_over_any_base():
    """Whatever it is layered on, paper.yaml sets every protocol key itself."""
    hostile: dict = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    for key, want in PAPER_PROTOCOL.items():
        *parents, leaf = key.split(".")
        node = hostile
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = other_than(want)
    cfg = load_config(merged("config/paper.yaml", base=hostile))
    values = cfg.model_dump()
    assert {k: lookup(values, k) for k in PAPER_PROTOCOL} == PAPER_PROTOCOL


def test_release_compat_layers_on_paper_and_turns_every_switch_on():
    cfg = load_config(
        merged("config/config.yaml", "config/paper.yaml", "config/release-compat.yaml")
    )
    assert all(cfg.compat.model_dump().values())
    assert cfg.protocol == "release_compat"  # the paper's keys still hold, compat's flipped
    values = cfg.model_dump()
    for key, want in RELEASE_COMPAT_PROTOCOL.items():
        assert lookup(values, key) == want, key


def test_a_protocol_key_changed_after_paper_is_one_line():
    raw = merged("config/config.yaml", "config/paper.yaml")
    raw["bank"]["pool_sample"] = 6
    with pytest.raises(ConfigError, match=r"bank\.pool_sample: is 6 but protocol: paper") as err:
        load_config(raw)
    assert "\n" not in str(err.value)
    raw["bank"]["pool_sample"] = None
    raw["llm"]["roles"] = {"generator": {"max_tokens": 400}}  # merged in from a layer below
    with pytest.raises(ConfigError, match=r"llm\.roles\.generator: protocol: paper fixes"):
        load_config(raw)


def test_budget_defaults_to_the_served_context_and_cannot_exceed_it():
    assert load_config(local_raw()).slotfill.context_tokens == 4096
    with pytest.raises(ConfigError, match=r"slotfill\.context_tokens: 8000 is more than") as err:
        load_config(local_raw(context_tokens=8000))
    assert "\n" not in str(err.value)


# -- one merge, Snakemake's (issue 32) --------------------------------------------------------
SCALAR_UNDER_EMPTY = {"top_k": {}, "llm": {"max_tokens": {}}}  # `{}` over config.yaml's scalars


def test_an_empty_mapping_over_a_scalar_keeps_the_scalar_as_snakemake_does():
    """Snakemake's update_config keeps a scalar under `{}`; the config that is validated is
    merged by that same function, so it is the config the jobs read."""
    base = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    snakemake = copy.deepcopy(base)
    update_config(snakemake, copy.deepcopy(SCALAR_UNDER_EMPTY))
    assert snakemake["top_k"] == 5 and snakemake["llm"]["max_tokens"] == 1000
    assert snakemake_merge([base, SCALAR_UNDER_EMPTY]) == snakemake
    cfg = load_layers([("config/config.yaml", base), ("over.yaml", SCALAR_UNDER_EMPTY)])
    assert cfg == load_config(snakemake)
    assert cfg.top_k == 5 and cfg.llm.max_tokens == 1000


@pytest.mark.workflow
def test_the_config_validated_at_dag_load_is_the_config_the_jobs_read(workflow_factory):
    wf = workflow_factory(base())
    over = wf.root / "over.yaml"
    over.write_text(yaml.safe_dump(SCALAR_UNDER_EMPTY))
    proc = subprocess.run(
        [SNAKEMAKE, "-n", "tables", "--cores", "1", "--configfile", str(wf.config_path),
         str(over)],
        cwd=wf.root, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    # The DAG was built from the validated config: top_k is 5 (the probe's file names it).
    assert "retrieved_k5.json" in proc.stdout
    # What every job reads (memprobe/workflow/shell_job.py) holds the same values.
    (exported,) = (wf.root / ".snakemake" / "memprobe").glob("config-*.json")
    jobs = json.loads(exported.read_text())
    assert jobs["top_k"] == 5 and jobs["llm"]["max_tokens"] == 1000
    layers = [
        (str(f), yaml.safe_load(f.read_text()))
        for f in (wf.root / WORKFLOW_CONFIG, wf.config_path, over)
    ]
    assert load_config(jobs) == load_layers(layers)


# -- issue 26 item 8: the guard covers every protocol key, --config included -----------------
GUARDED = {  # key: a --config that changes it (Snakemake merges --config over the files)
    "llm.model": {"llm": {"model": "gpt-4o"}},
    "systems": {"systems": ["nomem", "amem"]},
    "seed": {"seed": 1},
    "memt.max_tool_steps": {"memt": {"max_tool_steps": 3}},
    "memt.embedder": {"memt": {"embedder": "sentence-transformers/all-MiniLM-L6-v2"}},
    "tasks.max_edits": {"tasks": {"max_edits": 1}},
    "compat.longctx_drop_final_reply": {"compat": {"longctx_drop_final_reply": True}},
    "compat.retrieve_attribution_empty_transcript": {
        "compat": {"retrieve_attribution_empty_transcript": True}
    },
    "compat.judge_unknown_labels": {"compat": {"judge_unknown_labels": True}},
    "compat.memt_discovery_order": {"compat": {"memt_discovery_order": True}},
    "compat.amem_stale_index": {"compat": {"amem_stale_index": True}},
    "judge.degenerate_as_unknown": {"judge": {"degenerate_as_unknown": True}},
}


def paper_layers(*files: str) -> list[tuple[str, dict]]:
    return [(f, yaml.safe_load((ROOT / f).read_text())) for f in files]


@pytest.mark.parametrize("key", list(GUARDED))
def test_each_protocol_key_changed_by_config_is_one_line(key):
    layers = paper_layers("config/config.yaml", "config/paper.yaml")
    with pytest.raises(ConfigError) as err:
        load_layers([*layers, ("--config", GUARDED[key])])
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"--config: {key}: is "), msg
    assert "but protocol: paper needs" in msg and key in PAPER_PROTOCOL


def test_release_compat_guards_its_own_values():
    layers = paper_layers("config/config.yaml", "config/paper.yaml", "config/release-compat.yaml")
    load_layers(layers)  # the compat layer itself is the protocol's
    with pytest.raises(ConfigError, match=r"^--config: tasks\.max_edits: is 3 but protocol: "):
        load_layers([*layers, ("--config", {"tasks": {"max_edits": 3}})])


def cli_value(value) -> str:
    """A --config value as Snakemake parses it (YAML flow style)."""
    return yaml.safe_dump(value, default_flow_style=True, width=1000).strip()


@pytest.mark.workflow
def test_each_protocol_key_changed_by_config_stops_the_dag_load(workflow_factory):
    wf = workflow_factory(yaml.safe_load((ROOT / "config/paper.yaml").read_text()))
    for key, change in GUARDED.items():
        (top, value), *_ = change.items()
        proc = wf.run("-n", "--config", f"{top}={cli_value(value)}", check=False)
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "memprobe: " in ln]
        assert proc.returncode != 0 and len(lines) == 1, (key, proc.stderr[-1500:])
        assert lines[0].startswith(f"memprobe: --config: {key}: is "), lines[0]
    assert not (wf.root / "results").exists()
