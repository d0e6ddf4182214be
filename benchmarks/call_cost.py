"""CPU per LLM call inside one process: where the LLM layer spends it.

    python benchmarks/call_cost.py [--calls 200] [--context-kb 8] [--profile]

Starts ``memprobe fake-endpoint --latency 0`` as its own process (its CPU is not counted),
then in this process: builds a client (start-up), makes N structured calls that each pay
(distinct requests, fresh cache), then the same N again (all replays), and N plain-text calls.
Prints CPU ms per call of each kind (``time.process_time``); ``--profile`` adds the top
functions by cumulative time of the paid calls. Much quicker than run_bench.py for a
before/after of one change to memprobe's LLM layer.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.run_bench import start_endpoint  # noqa: E402
from memprobe.config.loading import load_config  # noqa: E402
from memprobe.llm.client import client_for  # noqa: E402
from memprobe.protocol.simulation import SimulatorReply  # noqa: E402

MEMPROBE = str(Path(sys.executable).parent / "memprobe")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--context-kb", type=int, default=8, help="prompt size per call")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()

    ep, base_url = start_endpoint(0.0)
    tmp = Path(tempfile.mkdtemp(prefix="memprobe-callcost-"))
    try:
        cfg = load_config(
            {
                "n_users": 1,
                "systems": ["nomem"],
                "llm": {
                    "backend": "openai",
                    "base_url": base_url,
                    "model": "bench-model",
                    "api_key_env": "",
                    "cache_dir": str(tmp / "cache"),
                },
            }
        )
        t = time.process_time()
        llm = client_for("simulator", cfg, ledger_path=tmp / "usage.csv", job="bench/x")
        llm.client  # noqa: B018
        build = time.process_time() - t
        filler = "lorem ipsum dolor sit amet " * (args.context_kb * 1024 // 27)

        def msgs(i: int) -> list[dict[str, str]]:
            return [
                {"role": "system", "content": filler},
                {"role": "user", "content": f"turn {i}: what next?"},
            ]

        def paid() -> None:
            for i in range(args.calls):
                llm.json(msgs(i), SimulatorReply)

        results = {}
        prof = cProfile.Profile(time.process_time) if args.profile else None
        for name, fn in (
            ("paid (json)", paid),
            ("replayed (json)", paid),
            ("paid (text)", lambda: [llm.text(msgs(-i - 1)) for i in range(args.calls)]),
        ):
            t = time.process_time()
            if prof and name == "paid (json)":
                prof.runcall(fn)
            else:
                fn()
            results[name] = 1000 * (time.process_time() - t) / args.calls
    finally:
        ep.terminate()
        ep.wait(timeout=10)
    print(f"client build (openai import + client): {1000 * build:.0f} ms")
    for name, ms in results.items():
        print(f"{name}: {ms:.2f} CPU ms/call ({args.calls} calls, {args.context_kb} KB prompt)")
    if prof:
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
