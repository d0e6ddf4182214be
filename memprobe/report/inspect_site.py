"""The case inspector: a static site under the run's ``inspect/`` from the per-user files only.

``index.html`` holds one compact row per (user, dimension) with every system-mode's judge score
and attribution label; each case has its own page under ``cases/`` carrying only its own data, so
the index stays small at paper scale and a case opens without reading the others. The pages open
from disk (no server, no network): the data sits in the page as JSON, and the shared scripts in
``assets/`` render it with ``textContent`` only, because every string came from a model.
With ``compare.runs``, a case page also sets each compared run's label and score for the
target beside this run's (memprobe/report/compare.py).
"""

from __future__ import annotations

import html
import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from memprobe.protocol.leaks import content_words
from memprobe.spec import records
from memprobe.spec.records import (
    Attribution,
    Bank,
    Episodes,
    Judge,
    Memories,
    Retrieved,
    SlotFill,
    Tasks,
)

ASSETS = Path(__file__).with_name("inspect_assets")
# A dump_all case page shows the store's items that share words with the target, the best
# matches first; a cap keeps a 1 MB store from being copied into each of its 31 pages.
MAX_MATCHED_ITEMS = 15
MAX_ITEM_CHARS = 2000


def asset_files() -> list[str]:
    """The site's scripts and style sheet: inputs of the rule, so editing one rebuilds it.

    Relative to the working directory, as every input: a storage provider (the Kubernetes
    profile) maps an absolute path to prefix + absolute path, which does not exist.
    """
    return sorted(os.path.relpath(p) for p in ASSETS.iterdir() if p.is_file())


def page_json(data: Any) -> str:
    """JSON that is safe inside a <script> element: no '<', '>' or '&' survives literally."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def html_page(title: str, data: Any, script: str, asset_prefix: str) -> str:
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        f"<title>{html.escape(title)}</title>"
        f'<link rel=stylesheet href="{asset_prefix}assets/inspect.css"></head>\n'
        '<body><main id=app>Loading…</main>\n<script id=data type="application/json">'
        f"{page_json(data)}</script>\n"
        f'<script src="{asset_prefix}assets/common.js"></script>\n'
        f'<script src="{asset_prefix}assets/{script}"></script></body></html>\n'
    )


def case_file(user: str, index: int) -> str:
    """A case page's path under the site (bank order index: safe whatever the dimension says)."""
    return f"cases/{user}_{index:02d}.html"


def _clip(text: str) -> str:
    if len(text) <= MAX_ITEM_CHARS:
        return text
    return f"{text[:MAX_ITEM_CHARS]} … [{len(text) - MAX_ITEM_CHARS} more chars]"


def matched_items(memories: Memories, words: set[str], item_words: list[set[str]]) -> dict:
    """The dump's items that mention the target's words, most shared words first."""
    hits = [(len(words & w), i) for i, w in enumerate(item_words) if words & w]
    hits.sort(key=lambda h: (-h[0], h[1]))
    return {
        "total": memories.num_memories,
        "matching": len(hits),
        "items": [
            {"n": i, "content": _clip(memories.memories[i]["content"])}
            for _, i in hits[:MAX_MATCHED_ITEMS]
        ],
    }


def _by_dim(entries: Iterable[Any]) -> dict[str, Any]:
    return {e.dimension: e for e in entries}


class UserFiles:
    """One user's files across systems and modes, read once."""

    def __init__(self, root: Path, user: str, systems: list[str], pairs, k: int) -> None:
        self.bank = records.load(root / "users" / user / "bank.json", Bank)
        self.tasks = records.load(root / "users" / user / "tasks.json", Tasks)
        self.episodes = {
            s: records.load(root / s / user / "episodes.json", Episodes) for s in systems
        }
        self.memories = {
            s: records.load(root / s / user / "memories.json", Memories) for s in systems
        }
        self.item_words = {
            s: [content_words(str(m["content"])) for m in mem.memories]
            for s, mem in self.memories.items()
        }
        self.retrieved = {
            s: _by_query(records.load(root / s / user / f"retrieved_k{k}.json", Retrieved))
            for s, m in pairs
            if m == "retrieve"
        }
        self.slotfill, self.judge, self.attribution = {}, {}, {}
        for s, m in pairs:
            base = root / s / user / m
            self.slotfill[s, m] = _by_dim(records.load(base / "slotfill.json", SlotFill).entries)
            judge = records.load(base / "judge.json", Judge)
            self.judge[s, m] = judge
            self.attribution[s, m] = _by_dim(
                records.load(base / "attribution.json", Attribution).details
            )


def _by_query(retrieved: Retrieved) -> dict[str, Any]:
    return {q.dimension: q for q in retrieved.queries}


# Another run's judge records: (system, mode, user) -> its record (compare.runs).
OtherScores = tuple[str, dict[tuple[str, str, str], Judge]]


def load_compared(compared: list[dict]) -> list[OtherScores]:
    """The compared runs' judge records (the tables rule's ``compared`` params)."""
    out = []
    for c in compared:
        js = [records.load(p, Judge) for p in c["judges"]]
        out.append((c["name"], {(j.system, j.mode, j.user_id): j for j in js}))
    return out


def side_by_side(
    run: str, user: str, dimension: str, files: UserFiles, pairs, others: list[OtherScores]
) -> dict:
    """This run's and each compared run's label and score for one target, per mode; a
    compared run's only where its record holds the same target (dimension and truth)."""
    modes = list(dict.fromkeys(m for _, m in pairs))

    def detail(judge: Judge) -> Any:
        return next((d for d in judge.details if d.dimension == dimension), None)

    rows: dict[tuple[str, str], dict] = {}
    truths = set()
    for s, m in pairs:
        if d := detail(files.judge[s, m]):
            truths.add(d.ground_truth)
            row = rows.setdefault((run, s), {"run": run, "system": s, "this": True, "cells": {}})
            row["cells"][m] = {"label": d.predicted, "score": d.score}
    for name, judges in others:
        for (s, m, u), judge in judges.items():
            d = detail(judge) if u == user and m in modes else None
            if d and d.ground_truth in truths:
                row = rows.setdefault((name, s), {"run": name, "system": s, "this": False})
                row.setdefault("cells", {})[m] = {"label": d.predicted, "score": d.score}
    return {"modes": modes, "rows": list(rows.values())}


def case_data(user: str, index: int, files: UserFiles, systems: list[str], pairs) -> dict:
    entry = files.bank.entries[index]
    dim = entry.dimension
    task = next((t for t in files.tasks.tasks if t.target_dimension == dim), None)
    words = content_words(f"{entry.short} {entry.explanation}")
    columns = []
    for s in systems:
        episode = next((e for e in files.episodes[s].episodes if e.target_dimension == dim), None)
        modes = []
        for m in (m for ps, m in pairs if ps == s):
            if m == "dump_all":
                memory = {
                    "kind": "dump_all",
                    **matched_items(files.memories[s], words, files.item_words[s]),
                }
            else:
                q = files.retrieved[s].get(dim)
                memory = {
                    "kind": "retrieve",
                    "query": q.query if q else "",
                    "items": [
                        {"content": _clip(str(it.get("content", ""))), "score": it.get("score")}
                        for it in (q.items if q else [])
                    ],
                }
            sf = files.slotfill[s, m].get(dim)
            jd = next((d for d in files.judge[s, m].details if d.dimension == dim), None)
            at = files.attribution[s, m].get(dim)
            modes.append(
                {
                    "mode": m,
                    "memory": memory,
                    "slotfill": sf
                    and {"label": sf.label, "reason": sf.reason, "called": sf.called},
                    "judge": jd
                    and {"score": jd.score, "predicted": jd.predicted, "reason": jd.judge_reason},
                    "attribution": at and {"label": at.label, "stages": at.stages},
                    "overflow": files.judge[s, m].flagged,
                }
            )
        columns.append(
            {
                "system": s,
                "episode": episode and episode.model_dump(),
                "modes": modes,
            }
        )
    return {
        "user": user,
        "index": index,
        "target": entry.model_dump(),
        "words": sorted(words),
        "task": task and task.model_dump(),
        "systems": columns,
    }


def index_row(user: str, index: int, files: UserFiles, pairs, labels: list[str]) -> list:
    entry = files.bank.entries[index]
    cells = []
    for pair in pairs:
        jd = next((d for d in files.judge[pair].details if d.dimension == entry.dimension), None)
        at = files.attribution[pair].get(entry.dimension)
        label = at.label if at else ""
        if label not in labels:
            labels.append(label)
        cells.append([jd.score if jd else None, labels.index(label)])
    return [user, entry.category, entry.dimension, entry.short, case_file(user, index), cells]


def summary(judges: dict[tuple[str, str], list[Judge]]) -> list[dict]:
    """B per system and mode: the mean of the users' overall scores, as Table 2 reports it."""
    out = []
    for (s, m), js in judges.items():
        vals = [j.overall for j in js]
        out.append(
            {
                "system": s,
                "mode": m,
                "B": sum(vals) / len(vals) if vals else None,
                "users": len(vals),
                "flagged": sum(j.flagged for j in js),
            }
        )
    return out


def build(
    results_dir: str | Path,
    out_dir: str | Path,
    users: list[str],
    systems: list[str],
    pairs: list[tuple[str, str]],
    k: int,
    run: str = "",
    compared: list[dict] | None = None,
) -> list[dict]:
    """Write the whole site into ``out_dir`` (replaced); returns B per system and mode.
    ``compared``: the compared runs' judge records beside this run's (``compare.runs``)."""
    root, out = Path(results_dir), Path(out_dir)
    pairs = [(s, m) for s, m in pairs]  # lists, from a job's JSON params
    if out.exists():
        shutil.rmtree(out)
    (out / "cases").mkdir(parents=True)
    shutil.copytree(ASSETS, out / "assets", ignore=shutil.ignore_patterns("audit.*"))
    rows, labels = [], [""]
    others = load_compared(compared or [])
    judges: dict[tuple[str, str], list[Judge]] = {p: [] for p in pairs}
    for user in users:
        files = UserFiles(root, user, systems, pairs, k)
        for p in pairs:
            judges[p].append(files.judge[p])
        for i, entry in enumerate(files.bank.entries):
            data = case_data(user, i, files, systems, pairs)
            if others:
                data["compared"] = side_by_side(run, user, entry.dimension, files, pairs, others)
            title = f"{user} · {entry.dimension}"
            (out / case_file(user, i)).write_text(
                html_page(title, data, "case.js", "../"), encoding="utf-8"
            )
            rows.append(index_row(user, i, files, pairs, labels))
    b_scores = summary(judges)
    index = {"pairs": [list(p) for p in pairs], "labels": labels, "summary": b_scores, "rows": rows}
    (out / "index.html").write_text(
        html_page("MemProbe case inspector", index, "index.js", ""), encoding="utf-8"
    )
    return b_scores


def write_entry(path: str | Path, summary_rows: list[dict]) -> None:
    """A static entry page next to the site (the report's item): B per system-mode and a link."""
    cells = "".join(
        f"<tr><td>{html.escape(b['system'])}</td><td>{html.escape(b['mode'])}</td>"
        f"<td>{'–' if b['B'] is None else format(b['B'], '.3f')}</td><td>{b['users']}</td></tr>"
        for b in summary_rows
    )
    records.write_atomic(
        path,
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        "<title>MemProbe case inspector</title></head><body>"
        '<p><a href="inspect/index.html">Open the case inspector</a> '
        "(inspect/index.html in the run's folder: every user and dimension, every system and mode)."
        "</p>"
        "<table border=1><tr><th>system</th><th>mode</th><th>B</th><th>users</th></tr>"
        f"{cells}</table></body></html>\n",
    )
