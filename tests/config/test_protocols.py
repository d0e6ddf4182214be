"""The protocol presets (memprobe/config/protocols.py): a config that declares one holds every
key of it after the merge, `--config` included, or stops in one line."""

from __future__ import annotations

import pytest
import yaml

from memprobe.config.base import ConfigError
from memprobe.config.loading import (
    load_config,
    load_layers,
)
from memprobe.config.protocols import (
    FREE,
    PAPER_PROTOCOL,
    RELEASE_COMPAT_PROTOCOL,
    ROLE_FIXED,
)
from memprobe.config_reference import sections
from tests.helpers.paper import merged
from tests.helpers.workflow import ROOT


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
    with pytest.raises(
        ConfigError, match=r"llm\.roles\.generator\.max_tokens: is 400 but protocol: paper fixes"
    ):
        load_config(raw)
    raw["llm"]["roles"] = {"judge": {"model": "gpt-5.4-mini"}}  # the run's model, by name
    load_config(raw)


ROLE_KEYS = {f"llm.roles.<role>.{name}" for name in ROLE_FIXED}


def config_keys() -> list[str]:
    """Every key of the config model, as docs/configuration.md lists them: each built-in
    system's settings and each built-in backend's block included (plugins aside)."""
    return [key for section in sections() for key, _, _ in section.rows]


def test_every_config_key_is_guarded_or_free():
    keys = config_keys()
    assert {"llm.local.threads", "system_settings.memt.search_topk", "seed"} <= set(keys)
    neither = [k for k in keys if k not in PAPER_PROTOCOL and k not in ROLE_KEYS | FREE.keys()]
    assert not neither, (
        f"{neither}: add each to PAPER_PROTOCOL (config/paper.yaml sets it) or to FREE with "
        "the reason the protocol leaves it to the run (memprobe/config/protocols.py)"
    )
    assert not FREE.keys() & PAPER_PROTOCOL.keys()
    assert not FREE.keys() - set(keys), "FREE names keys the config does not have"
    assert all(reason.strip() for reason in FREE.values())


# -- issue 26 item 8: the guard covers every protocol key, --config included -----------------
GUARDED = {  # key: a --config that changes it (Snakemake merges --config over the files)
    "llm.model": {"llm": {"model": "gpt-4o"}},
    "systems": {"systems": ["nomem", "amem"]},
    "seed": {"seed": 1},
    "system_settings.memt.max_tool_steps": {"system_settings": {"memt": {"max_tool_steps": 3}}},
    "system_settings.memt.embedder": {
        "system_settings": {"memt": {"embedder": "sentence-transformers/all-MiniLM-L6-v2"}}
    },
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
# issue 43 item 1: the keys the guard missed.
ITEM_1 = {
    **{
        f"prompts.{stage}": {"prompts": {stage: f"{stage}_v2"}}
        for stage in (
            "recovery_judge",
            "persona_narrative",
            "assistant_system",
            "attribution_oracle",
            "attribution_disclosure",
            "attribution_subclass",
        )
    },
    "llm.roles.judge.model": {"llm": {"roles": {"judge": {"model": "gpt-4o"}}}},
    "llm.roles.slotfill.model": {"llm": {"roles": {"slotfill": {"model": "gpt-4o"}}}},
    **{
        f"system_settings.memt.{key}": {"system_settings": {"memt": {key: value}}}
        for key, value in (
            ("max_tokens", 512),
            ("update_topk", 5),
            ("search_topk", 10),
            ("model", "Mem-T-8B"),
        )
    },
    "system_settings.amem.writer.model": {
        "system_settings": {"amem": {"writer": {"model": "gpt-4o"}}}
    },
    "system_settings.amem.writer.max_tokens": {
        "system_settings": {"amem": {"writer": {"max_tokens": 1000}}}
    },
    "system_settings.mem0.embedder_model": {
        "system_settings": {"mem0": {"embedder_model": "text-embedding-3-large"}}
    },
    "system_settings.mem0.embedder_dims": {"system_settings": {"mem0": {"embedder_dims": 3072}}},
}
GUARDED |= ITEM_1


def paper_layers(*files: str) -> list[tuple[str, dict]]:
    return [(f, yaml.safe_load((ROOT / f).read_text())) for f in files]


@pytest.mark.parametrize("key", list(GUARDED))
def test_each_protocol_key_changed_by_config_is_one_line(key):
    layers = paper_layers("config/config.yaml", "config/paper.yaml")
    with pytest.raises(ConfigError) as err:
        load_layers([*layers, ("--config", GUARDED[key])])
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"--config: {key}: is "), msg
    role_key = key.startswith("llm.roles.")
    assert f"but protocol: paper {'fixes' if role_key else 'needs'}" in msg
    assert role_key or key in PAPER_PROTOCOL


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


def test_the_replay_compares_with_the_release_import_under_the_paper_protocol():
    """config/replay.yaml sets the replay beside the release's five (issue 41): `compare` is
    free under `protocol: paper` (it reads another run, it changes no B), and one override
    leaves it out."""
    raw = merged("config/config.yaml", "config/paper.yaml", "config/replay.yaml")
    raw["release_dir"] = "/path/to/release"
    cfg = load_config(raw)
    assert cfg.compare.runs == ["release"] and cfg.run.name == "release-replay"
    assert load_config({**raw, "compare": {"runs": []}}).compare.runs == []
