"""A paper-like config and a finished one-user run (artifacts and ledger), for the estimate."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from memprobe.config.loading import load_config
from memprobe.config.schema import Config
from memprobe.llm.ledger import COLUMNS


def paper_like(**over) -> dict:
    raw = {
        "n_users": 50,
        "systems": ["nomem", "longctx_full", "amem", "mem0"],
        "max_turns": 25,
        "llm": {"backend": "openai", "base_url": "http://127.0.0.1:1/v1"},
    }
    raw.update(over)
    return raw


def write_run(root: Path, turns_per_episode: list[int], extra_rows: list[dict]) -> None:
    """A finished longctx_full run of one user: artifacts + a ledger that matches them."""
    base = root / "longctx_full" / "user_001"
    (base / "dump_all").mkdir(parents=True)
    eps = [{"index": i + 1, "turns": [{}] * n} for i, n in enumerate(turns_per_episode)]
    (base / "episodes.json").write_text(json.dumps({"episodes": eps}))
    (base / "memories.json").write_text(json.dumps({"memories": [{"content": "x"}]}))
    entries = [
        {"category": "skill_memory", "dimension": "a", "label": "likes lists", "called": True},
        {"category": "skill_memory", "dimension": "b", "label": "unknown", "called": True},
    ]
    (base / "dump_all" / "slotfill.json").write_text(json.dumps({"entries": entries}))
    (base / "dump_all" / "judge.json").write_text("{}")
    stages = [{"stage": "oracle"}, {"stage": "disclosure"}, {"stage": "disclosure_subclass"}]
    (base / "dump_all" / "attribution.json").write_text(
        json.dumps({"details": [{"stages": []}, {"stages": stages}]})
    )
    users = root / "users" / "user_001"
    users.mkdir(parents=True)
    tasks = [{"verdicts": [{}, {}]}, {"verdicts": [{}]}]
    (users / "tasks.json").write_text(json.dumps({"tasks": tasks}))

    def rows(rule, tag, role, n, tokens=(100, 10)):
        return [
            {"job": f"{rule}/{tag}", "role": role, "prompt_tokens": tokens[0],
             "completion_tokens": tokens[1], "latency_s": 1.0, "cached": "false",
             "reask": 0, "status": "ok", "ts": 0, "model": "m", "key": "k"}
            for _ in range(n)
        ]  # fmt: skip

    turns = sum(turns_per_episode)
    ledger = {
        "rollout": rows("rollout", "longctx_full_user_001", "assistant", turns, (400, 20))
        + rows("rollout", "longctx_full_user_001", "simulator", turns),
        "preference": rows("preference", "longctx_full_user_001", "preference", turns),
        "slotfill": rows("slotfill", "longctx_full_user_001_dump_all", "slotfill", 2),
        "judge": rows("judge", "longctx_full_user_001_dump_all", "judge", 1),
        "attribution": rows("attribution", "longctx_full_user_001_dump_all", "disclosure", 2),
    }
    for row in extra_rows:
        ledger.setdefault(row["job"].split("/")[0], []).append(row)
    for rule, rs in ledger.items():
        f = root / "usage" / rule / "x.csv"
        f.parent.mkdir(parents=True, exist_ok=True)
        with open(f, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=COLUMNS)
            w.writeheader()
            w.writerows(rs)


def tiny_cfg() -> Config:
    return load_config(
        {
            "n_users": 1,
            "systems": ["longctx_full"],
            "modes": ["dump_all"],
            "llm": {"backend": "openai", "base_url": "http://127.0.0.1:1/v1"},
        }
    )
