"""Config validation: every bad key is one line naming it, and the run stops before any job."""

from __future__ import annotations

import pytest

from memprobe.config import ConfigError, load_config, role_settings
from tests.conftest import tiny_config


def base() -> dict:
    return tiny_config("http://127.0.0.1:9/v1")


def test_tiny_config_is_valid_and_derives_users():
    cfg = load_config(base())
    assert cfg.user_ids == ["user_001", "user_002"]
    assert cfg.n_dims == 5
    assert cfg.primary_k == 5
    assert role_settings(cfg, "simulator")["temperature"] == 0.85
    assert role_settings(cfg, "judge")["temperature"] == 0.0


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
            "llm.backend: Input should be 'openai', 'local' or 'fake'",
        ),
        (
            lambda c: c.update(modes=["dump_all", "grep"]),
            "modes.1: Input should be 'dump_all' or 'retrieve'",
        ),
        (lambda c: c.update(k=0), "k: every k must be >= 1"),
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
    proc = wf.run("results/table2.csv", check=False)
    assert proc.returncode != 0
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("memprobe: ")]
    assert len(lines) == 1 and expected in lines[0], proc.stderr[-2000:]
    assert not (wf.root / "results").exists()
