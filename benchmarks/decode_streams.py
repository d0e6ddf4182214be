"""Generated tokens per second of the local model, by requests decoded at once and thread waiting.

llama.cpp batches the requests of its parallel slots into one forward pass, so on a CPU the
tokens per second of all of them together grow with how many decode at once; and its OpenMP
threads either sleep at once when they wait for each other (OMP_WAIT_POLICY=PASSIVE, the
default) or spin a while first (``llm.local.spin_count``), which is faster on a quiet machine
and much slower beside a busy process. Each setting runs in its own process (OpenMP reads its
environment once) against xllamacpp's server, 160 generated tokens per request.

    python benchmarks/decode_streams.py                # needs the `model` extra
    python benchmarks/decode_streams.py --busy         # with one busy-looping process beside it
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SETTINGS = [  # (streams, spin_count)
    (1, 0), (2, 0), (4, 0), (8, 0), (1, 10000), (4, 10000),
]  # fmt: skip


def one(model: str, streams: int, threads: int, tokens: int) -> dict:
    """Serve ``model`` with ``streams`` slots and decode ``streams`` requests at once."""
    import xllamacpp as xlc  # after the environment is set: OpenMP reads it at load

    p = xlc.CommonParams()
    p.model.path = model
    p.n_ctx = 4096 * streams
    p.n_parallel = streams
    p.cpuparams.n_threads = p.cpuparams_batch.n_threads = threads
    key = secrets.token_urlsafe(24)  # loopback, and a key of this run's own
    p.hostnames, p.port, p.api_keys = ["127.0.0.1"], 0, [key]
    server = xlc.Server(p)
    timings: list[dict] = []

    def ask(i: int) -> None:
        body = {
            "messages": [{"role": "user", "content": f"Write a long essay ({i}) on gardens."}],
            "max_tokens": tokens,
            "ignore_eos": True,
            "seed": i,
        }
        req = urllib.request.Request(
            server.listening_address + "/v1/chat/completions",
            json.dumps(body).encode(),
            {"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
        )
        with urllib.request.urlopen(req, timeout=600) as r:
            timings.append(json.load(r)["timings"])

    t0 = time.monotonic()
    workers = [threading.Thread(target=ask, args=(i,)) for i in range(streams)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall = time.monotonic() - t0
    return {
        "all": sum(t["predicted_n"] for t in timings) / wall,
        "each": sum(t["predicted_per_second"] for t in timings) / len(timings),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=160)
    ap.add_argument("--busy", action="store_true", help="a busy-looping process beside it")
    ap.add_argument("--one", nargs=2, type=int, help=argparse.SUPPRESS)  # streams, spin
    args = ap.parse_args()
    from memprobe.serving import local_model, local_server
    from memprobe.serving.local_model import LocalModel

    model = str(local_model.resolve_model(LocalModel()).path)
    if args.one:
        print(json.dumps(one(model, args.one[0], args.threads, args.tokens)), flush=True)
        os._exit(0)  # xllamacpp's server thread would keep the process alive
    busy = subprocess.Popen(["sh", "-c", "while :; do :; done"]) if args.busy else None
    try:
        print("| requests at once | spin_count | tokens/s, all | tokens/s, each |")
        print("|---|---|---|---|")
        for streams, spin in SETTINGS:
            env = {**os.environ, **local_server.wait_env(LocalModel(spin_count=spin))}
            if not spin:
                env.pop("GOMP_SPINCOUNT", None)
            out = subprocess.run(
                [sys.executable, __file__, "--one", str(streams), str(spin),
                 "--threads", str(args.threads), "--tokens", str(args.tokens)],
                env=env, capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
            r = json.loads(out.strip().splitlines()[-1])
            print(f"| {streams} | {spin} | {r['all']:.1f} | {r['each']:.1f} |", flush=True)
    finally:
        if busy:
            busy.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
