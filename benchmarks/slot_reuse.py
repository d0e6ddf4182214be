"""How much prompt the local llama.cpp server evaluates again, by its slot settings.

A rollout job alternates two conversations (the simulator's and the assistant's) whose prompts
grow every turn, and two jobs run at once on 2 cores. With one server slot every request
replaces the slot's cached prompt, so each turn evaluates its whole history again; with one
slot per conversation in flight (``llm.local.parallel``) a turn evaluates only what is new,
and ``llm.local.cache_reuse`` also keeps the chunks that moved when text is inserted before
them (longctx_full's memory grows above the conversation).

This replays that shape with synthetic text against the real server for each setting and
reports the prompt tokens the server evaluated (from its own timing lines: a load-independent
count) and the wall time (noisy on a shared machine).

    python benchmarks/slot_reuse.py --turns 3      # needs the `model` extra
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memprobe.config.loading import load_config  # noqa: E402
from memprobe.llm.client import client_for  # noqa: E402
from memprobe.serving import local_server  # noqa: E402

EVALUATED = re.compile(r"prompt eval time =\s+[\d.]+ ms /\s+(\d+) tokens")
WORDS = "the user asked about the garden project and the budget for next spring".split()


def text(seed: int, n_words: int) -> str:
    """Deterministic filler of about ``n_words`` words, distinct per seed."""
    return " ".join(
        f"{WORDS[(seed * 7 + i) % len(WORDS)]}{(seed + i) % 97}" for i in range(n_words)
    )


def conversation(job: int, role: int, turns: int, grow: int, llm) -> None:
    memory: list[str] = []
    history: list[dict[str, str]] = []
    system = text(1000 * job + role, 150)
    for turn in range(turns):
        memory.append(text(100 * job + 10 * role + turn, grow))  # inserted above the dialogue
        prompt = [
            {"role": "system", "content": system + "\nMemory:\n" + "\n".join(memory)},
            *history,
            {"role": "user", "content": text(7 * job + role + 31 * turn, grow)},
        ]
        reply = llm.text(prompt)
        history += [prompt[-1], {"role": "assistant", "content": reply}]


def measure(parallel: int, cache_reuse: int, turns: int, grow: int, jobs: int) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="slot-reuse-"))
    raw = {
        "n_users": 1,
        "systems": ["nomem"],
        "llm": {
            "backend": "local",
            "model": "qwen2.5-coder-0.5b",
            "max_tokens": 100,
            "cache_dir": str(tmp / "cache"),
            "local": {"context_tokens": 8192, "parallel": parallel, "cache_reuse": cache_reuse},
        },
    }
    cfg = load_config(raw)
    log = tmp / "server.log"
    local_server.start_for_run(cfg, log_path=log)
    try:
        t0 = time.monotonic()
        threads = [
            threading.Thread(
                target=conversation,
                args=(j, r, turns, grow, client_for("simulator", cfg, ledger_path=tmp / f"{j}{r}")),
            )
            for j in range(jobs)
            for r in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - t0
    finally:
        local_server.stop_for_run(cfg)
    evaluated = sum(int(n) for n in EVALUATED.findall(log.read_text(errors="replace")))
    return {"parallel": parallel, "cache_reuse": cache_reuse, "evaluated": evaluated, "wall": wall}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--grow", type=int, default=60, help="words added above and below per turn")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    os.environ.pop(local_server.BASE_URL_ENV, None)
    print("| slots | cache_reuse | prompt tokens evaluated | wall s |\n|---|---|---|---|")
    for parallel, reuse in ((1, 0), (2 * args.jobs, 0), (2 * args.jobs, 256)):
        r = measure(parallel, reuse, args.turns, args.grow, args.jobs)
        print(f"| {r['parallel']} | {r['cache_reuse']} | {r['evaluated']:,} | {r['wall']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
