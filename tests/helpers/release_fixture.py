"""The synthetic release fixture (tests/fixtures/release) and a config that imports it."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from memprobe.config.loading import load_config
from memprobe.config.schema import Config
from memprobe.release import importer, layout
from tests.helpers.workflow import tiny_config

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "release"
USERS = ("user_001", "user_002", "user_003")
SYSTEMS = ["nomem", "longctx_full", "memt"]
MODES = ["dump_all", "retrieve"]


def release_config(**overrides) -> dict:
    """config/release.yaml, narrowed to the fixture: 3 users, 2/2/2/1/1 dims, 3 systems.

    context_tokens 2000 leaves 1200 tokens (~4800 chars) for the store: memt's stores of
    users 2 and 3 (20x400 and 30x300 chars) overflow, user 1's (3x100) fits.
    """
    cfg = yaml.safe_load((ROOT / "config" / "release.yaml").read_text())
    cfg.update(
        n_users=3,
        release_dir=str(FIXTURE),
        dims_per_category={
            "skill_memory": 2,
            "knowledge_memory": 2,
            "episodic_memory": 2,
            "self_model": 1,
            "assistance_preference": 1,
        },
        systems=list(SYSTEMS),
        slotfill={"context_tokens": 2000, "overflow": "flag"},
    )
    cfg.update(overrides)
    return cfg


def release_users_config(base_url: str, **overrides) -> dict:
    """The tiny workflow on the fixture's users: banks and tasks imported, the runs our own."""
    dims = release_config()["dims_per_category"]
    return tiny_config(
        base_url,
        users={"source": "release"},
        release_dir=str(FIXTURE),
        dims_per_category=dims,
        **overrides,
    )


def cfg_model(**overrides) -> Config:
    return load_config(release_config(**overrides))


def import_records(systems: list[str]) -> dict:
    """Every record the release import makes of the fixture's runs of these systems."""
    cfg = cfg_model(systems=list(systems))
    lay = layout.Layout(cfg)
    pairs = layout.pairs(cfg)
    out = {"pairs": pairs, "episodes": [], "prefs": [], "mems": [], "judges": [], "atts": []}
    for u in USERS:
        bank = importer.bank(lay, u, cfg.dims_per_category)
        tasks = importer.tasks(lay, u, bank)
        for s in systems:
            mem = importer.memories(lay, s, u)
            out["mems"].append(mem)
            out["episodes"].append(importer.episodes(lay, s, u, tasks))
            out["prefs"].append(importer.preference(lay, s, u, tasks))
            for m in MODES:
                if (s, m) in pairs:
                    out["judges"].append(importer.scores(lay, s, m, u, bank, mem)[1])
                    out["atts"].append(importer.attribution(lay, s, m, u))
    return out


EXPECTED_ORDER = [
    "critical_thinking_skill",
    "reading_comprehension_skill",
    "financial_literacy_knowledge",
    "procedural_knowledge",
    "legal_or_administrative_event",
    "relocation_event",
    "prudence_self_view",
    "verbosity_preference",
]


# rollout.replay: the recorded run a replay reads, and a replay's config over the fixture.
REPLAY_RUN = "longctx_full_pooled_50"


def replay_cfg(root: Path = FIXTURE, run: str = REPLAY_RUN) -> Config:
    raw = release_users_config("http://127.0.0.1:9/v1", n_users=3, rollout={"replay": run})
    raw["release_dir"] = str(root)
    return load_config(raw)


def recorded(run: str, user: str, root: Path = FIXTURE) -> list[dict]:
    """A run's recorded episodes of one user, the release's files as they are."""
    folder = root / "history" / run / user
    n = len(list(folder.glob("episode_*.json")))
    return [json.loads((folder / f"episode_{i}.json").read_text()) for i in range(1, n + 1)]


def longctx_items(run: str, user: str, drop_final_reply: bool, root: Path = FIXTURE) -> list[dict]:
    """What longctx_full stores of a recorded conversation (docs/release-format.md §2.7): the
    task, then each turn's agent reply and user message; the release dropped the last reply of
    each task (compat.longctx_drop_final_reply)."""
    items: list[dict] = []
    for i, ep in enumerate(recorded(run, user, root), 1):
        items.append({"content": f"[Task {i}] {ep['task']}", "category": "task", "task_index": i})
        for t in ep["turns"]:
            if not (drop_final_reply and t["turn"] == len(ep["turns"])):
                items.append(
                    {
                        "content": f"Agent: {t['agent_response']}",
                        "category": "agent_reply",
                        "task_index": i,
                        "turn": t["turn"],
                    }
                )
            items.append(
                {
                    "content": f"User: {t['user_simulator']['text']}",
                    "category": "user_reply",
                    "task_index": i,
                    "turn": t["turn"],
                }
            )
    return items
