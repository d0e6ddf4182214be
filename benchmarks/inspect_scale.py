"""The case inspector at paper scale: build time on the release import and index load time.

The authors' release is not in this repository, so this writes a synthetic one in its exact
layout at the release's size (tests/fixtures/make_release_fixture.py with its tables widened:
50 users x 31 dims x 5 systems, 9 system-modes; ~2.5 turns per episode with replies of ~1,500
chars; store sizes near the release's, memt ~1 MB per user), imports it with the real
workflow (config/release.yaml), then times `snakemake inspector` alone and the index page's load
in headless Chromium. Run from the repository root with the venv active:

    python benchmarks/inspect_scale.py --workdir /tmp/inspect-scale
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memprobe import CATEGORIES  # noqa: E402
from memprobe.spec.taxonomy import load_pool  # noqa: E402
from tests.helpers.release_fixture import release_config  # noqa: E402
from tests.helpers.workflow import Workflow  # noqa: E402

SYSTEMS = ["nomem", "amem", "longctx_full", "mem0", "memt"]
COUNTS = {c: n for c, n in zip(CATEGORIES, (7, 7, 7, 5, 5), strict=True)}
# Items per store and chars per item, near the release's (docs/release-format.md §2.7).
STORES = {"nomem": (0, 0), "amem": (120, 300), "longctx_full": (100, 900), "mem0": (80, 120)}
STORES["memt"] = (358, 2800)


def fixture_module():
    spec = importlib.util.spec_from_file_location(
        "make_release_fixture", ROOT / "tests" / "fixtures" / "make_release_fixture.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def words_for(bank: list[tuple[str, str]]) -> list[str]:
    vocab = {w for _, d in bank for w in d.split("_")}
    return sorted(vocab) + "the a plan week budget meeting notes draft call trip".split() * 8


def text(rng: random.Random, vocab: list[str], chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        w = rng.choice(vocab)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:chars]


def write_release(out: Path, users: int, seed: int) -> None:
    mk = fixture_module()
    rng = random.Random(seed)
    pool = load_pool(ROOT / "config" / "dimension_pool.yaml")
    bank = [(c, d.name) for c in CATEGORIES for d in pool.categories[c].dimensions[: COUNTS[c]]]
    ids = [f"user_{i:03d}" for i in range(1, users + 1)]
    mk.OUT, mk.USERS, mk.BANK = out, ids, bank
    mk.RUNS = {s: f"{'memt_memonly' if s == 'memt' else s}_pooled_50" for s in SYSTEMS}
    levels = [0, 0.25, 0.5, 0.75, 1]
    mk.SCORES = {
        (s, m): {u: [rng.choice(levels) for _ in bank] for u in ids}
        for s in SYSTEMS
        for m in ("dump_all", "retrieve")
        if not (s == "nomem" and m == "retrieve")
    }
    mk.TURN_SCORES = {
        s: {u: [[rng.choice([4, 5])] * rng.choice([1, 2, 3, 4]) for _ in bank] for u in ids}
        for s in SYSTEMS
    }
    mk.CONTENT_LENGTHS = {s: {u: [STORES[s][1]] * STORES[s][0] for u in ids} for s in SYSTEMS}
    mk.main()
    # The fixture's texts are one-liners: give replies, user turns and stores real lengths.
    vocab = words_for(bank)
    for path in out.glob("history/*/*/episode_*.json"):
        ep = json.loads(path.read_text())
        for t in ep["turns"]:
            t["agent_response"] = text(rng, vocab, 1500)
            t["user_simulator"]["text"] = text(rng, vocab, 250)
        path.write_text(json.dumps(ep))
    for path in out.glob("memory/*/*/memories.json"):
        mem = json.loads(path.read_text())
        for item in mem["memories"]:
            item["content"] = text(rng, vocab, len(item["content"]))
        path.write_text(json.dumps(mem))


def load_time(index: Path) -> float:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium")
        page = browser.new_page()
        start = time.perf_counter()
        page.goto(index.as_uri())
        page.wait_for_selector("body[data-ready='1']", state="attached", timeout=30000)
        elapsed = time.perf_counter() - start
        browser.close()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--users", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=False)
    t0 = time.perf_counter()
    write_release(work / "release", args.users, args.seed)
    print(f"synthetic release written in {time.perf_counter() - t0:.1f} s")
    cfg = release_config(
        n_users=args.users,
        release_dir=str(work / "release"),
        dims_per_category=COUNTS,
        systems=SYSTEMS,
        slotfill=yaml.safe_load((ROOT / "config" / "release.yaml").read_text())["slotfill"],
    )
    (work / "wf").mkdir()
    wf = Workflow(work / "wf", cfg)
    t0 = time.perf_counter()
    wf.run("inspector", "--omit-from", "inspector", timeout=3600)
    print(f"release import (every input of inspect) in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    wf.run("inspector", timeout=3600)
    build = time.perf_counter() - t0
    site = work / "wf" / "results" / "inspect"
    index = site / "index.html"
    pages = len(list((site / "cases").iterdir()))
    size = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
    print(f"snakemake inspector: {build:.1f} s wall (load average {os.getloadavg()[0]:.2f})")
    mb = index.stat().st_size / 1e6
    print(f"index.html {mb:.2f} MB; {pages} case pages, site {size / 1e6:.0f} MB")
    for i in range(3):
        print(f"index load in Chromium (to rendered table), try {i + 1}: {load_time(index):.2f} s")


if __name__ == "__main__":
    main()
