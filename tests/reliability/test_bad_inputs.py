"""Must-show 3: each bad input -> a one-line error naming the file/key, exit != 0, no artifact.

Config and pool errors stop the run when the DAG loads; broken files (hand-made, imported or
edited) fail the job that reads them, and Snakemake removes that job's outputs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from memprobe.workflow.paths import PARTS
from tests.helpers.reliability import RUN, TARGET, stray_temp_files
from tests.helpers.workflow import Workflow


def _cfg(edit):
    def mutate(root: Path, folders: dict[str, str]) -> None:
        path = root / "test-config.yaml"
        cfg = yaml.safe_load(path.read_text())
        edit(cfg)
        path.write_text(yaml.safe_dump(cfg))

    return mutate


def _pool(edit):
    def mutate(root: Path, folders: dict[str, str]) -> None:
        path = root / "config" / "dimension_pool.yaml"
        pool = yaml.safe_load(path.read_text())
        edit(pool)
        path.write_text(yaml.safe_dump(pool))

    return mutate


def _json(rel: str, edit):
    def mutate(root: Path, folders: dict[str, str]) -> None:
        path = root / rel.format(**folders)
        data = json.loads(path.read_text())
        edit(data)
        path.write_text(json.dumps(data))

    return mutate


def _text(rel: str, text: str):
    def mutate(root: Path, folders: dict[str, str]) -> None:
        (root / rel.format(**folders)).write_text(text)

    return mutate


def _first_dim(pool):
    return next(iter(pool["categories"].values()))["dimensions"][0]


def _dup_dim(pool):
    cats = list(pool["categories"].values())
    cats[1]["dimensions"].append(dict(cats[0]["dimensions"][0]))


# The users are made in the shared folders results/users/<part>-<key> (docs/runs.md), named
# here by part ({bank}: the case config's bank folder); the run reads its own copies.
TASKS = "results/users/{tasks}/user_001/tasks.json"
BANK = "results/users/{bank}/user_001/bank.json"
PERSONA = "results/users/{persona}/user_001/persona.json"
RUN_TASKS = f"{RUN}/users/user_001/tasks.json"
EPISODES = f"{RUN}/nomem/user_001/episodes.json"
SLOTFILL = f"{RUN}/longctx_full/user_001/dump_all/slotfill.json"
MEM = f"{RUN}/longctx_full/user_001/memories.json"

CASES = {
    # name: (mutation, target, fragments the one error line must contain)
    "n_users zero": (_cfg(lambda c: c.update(n_users=0)), TARGET, ["n_users"]),
    "unknown config key": (_cfg(lambda c: c.update(n_user=2)), TARGET, ["n_user: unknown key"]),
    "unknown system": (_cfg(lambda c: c.update(systems=["nosuch"])), TARGET, ["systems", "nosuch"]),
    "unknown backend": (_cfg(lambda c: c["llm"].update(backend="gpt")), TARGET, ["llm.backend"]),
    "k zero": (_cfg(lambda c: c.update(top_k=0)), TARGET, ["top_k: every k must be >= 1 (got 0)"]),
    "max_attempts not a number": (
        _cfg(lambda c: c["llm"].update(max_attempts="many")),
        TARGET,
        ["llm.max_attempts"],
    ),
    "negative dimension count": (
        _cfg(lambda c: c["dims_per_category"].update(skill_memory=-1)),
        TARGET,
        ["dims_per_category", "skill_memory"],
    ),
    "unknown category in config": (
        _cfg(lambda c: c["dims_per_category"].update(hobbies=1)),
        TARGET,
        ["dims_per_category", "unknown key"],
    ),
    "openai backend without base_url": (
        _cfg(lambda c: c["llm"].pop("base_url")),
        TARGET,
        ["llm.base_url", "required"],
    ),
    "pool not YAML": (
        _text("config/dimension_pool.yaml", "categories: [\n"),
        TARGET,
        ["dimension_pool.yaml", "not valid YAML"],
    ),
    "pool missing a category": (
        _pool(lambda p: p["categories"].pop("self_model")),
        TARGET,
        ["dimension_pool.yaml", "self_model"],
    ),
    "pool answer space too small": (
        _pool(lambda p: _first_dim(p).update(answer_space=["a"])),
        TARGET,
        ["dimension_pool.yaml", "answer_space"],
    ),
    "pool duplicate dimension": (_pool(_dup_dim), TARGET, ["dimension_pool.yaml", "duplicate"]),
    "bank not JSON": (
        _text(BANK, '{"user_id": "user_001", "entr'),
        TASKS,
        ["bank.json", "not valid JSON"],
    ),
    "bank entry missing dimension": (
        _json(BANK, lambda b: b["entries"][0].pop("dimension")),
        TASKS,
        ["bank.json", "entries.0.dimension"],
    ),
    "bank entry unknown category": (
        _json(BANK, lambda b: b["entries"][0].update(category="hobbies")),
        TASKS,
        ["bank.json", "entries.0.category", "hobbies"],
    ),
    "persona age not a number": (
        _json(PERSONA, lambda p: p.update(age="old")),
        BANK,
        ["persona.json", "age"],
    ),
    "task index not a number": (
        _json(RUN_TASKS, lambda t: t["tasks"][0].update(index="first")),
        EPISODES,
        ["tasks.json", "tasks.0.index"],
    ),
    "memories count mismatch": (
        _json(MEM, lambda m: m.update(num_memories=m["num_memories"] + 1)),
        SLOTFILL,
        ["memories.json", "num_memories"],
    ),
    "memory item without content": (
        _json(MEM, lambda m: m["memories"].__setitem__(0, {"text": "x"})),
        SLOTFILL,
        ["memories.json", "memories.0.content"],
    ),
    "memories not a list": (
        _json(MEM, lambda m: m.update(memories={"a": 1})),
        SLOTFILL,
        ["memories.json", "memories"],
    ),
}


@pytest.mark.workflow
@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_gives_one_line_error_and_no_artifact(case, clean_run, tmp_path):
    mutate, target, fragments = CASES[case]
    root = tmp_path / "case"
    shutil.copytree(clean_run.wf.root, root, symlinks=True)
    wf = Workflow.__new__(Workflow)
    wf.root, wf.config_path = root, root / "test-config.yaml"
    # The users' files of each part in their shared folder (docs/runs.md), named by part here.
    folders = {p: next((root / "results" / "users").glob(f"{p}-*")).name for p in PARTS}
    target = target.format(**folders)
    (root / target).unlink()
    mutate(root, folders)
    # The clean run's endpoint is still up: the case runs on the clean run's settings.
    proc = wf.run(target, "--rerun-triggers", "mtime", check=False)
    out = proc.stdout + proc.stderr
    lines = [ln for ln in out.splitlines() if "memprobe:" in ln]
    assert proc.returncode != 0
    assert lines, out[-2000:]
    assert all(f in lines[0] for f in fragments), lines[0]
    assert "Traceback" not in out, out[-2000:]
    assert not (root / target).exists()
    assert not stray_temp_files(root)
