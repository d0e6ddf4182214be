"""The run's embedding server under load: latency and CPU per encode at a given thread count.

Starts the server (memprobe/serving/embed_service.py) with torch's intra-op threads set to
``--threads``, optionally beside ``--hogs`` busy processes (the other jobs of a run), and has
``--clients`` threads each do what an A-Mem rollout does per turn: encode the notes that
changed (a batch of two), encode the query (one text), then wait for its LLM calls
(``--pause`` s). Prints the latency percentiles, the wall time and the server's CPU.

    python benchmarks/embed_contention.py --threads 2 --hogs 1
    python benchmarks/embed_contention.py --threads 1 --hogs 1
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.run_bench import proc_cpu  # noqa: E402
from memprobe.serving import embed_client, served_process  # noqa: E402

NOTE = (
    "the user prefers concise answers with code examples; context: debugging a flaky pytest"
    " fixture in a Snakemake workflow, keywords: testing, fixtures, ci, tags: preference, skill"
)
SERVER = (
    "import sys; from memprobe.serving import embeddings, embed_service;"
    " embeddings.ENCODE_THREADS = int(sys.argv[2]); embed_service.serve(sys.argv[1], 'TOK')"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads in the server")
    ap.add_argument("--hogs", type=int, default=0, help="busy processes beside it")
    ap.add_argument("--clients", type=int, default=12)
    ap.add_argument("--turns", type=int, default=25, help="per client")
    ap.add_argument("--pause", type=float, default=0.3, help="seconds between a client's turns")
    args = ap.parse_args()

    where, token = served_process.private_dir("embed-bench-"), secrets.token_hex(16)
    sock = str(where / "embed.sock")
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, sock, str(args.threads)],
        env=dict(os.environ, TOK=token),
        stderr=subprocess.DEVNULL,
    )
    os.environ[embed_client.SOCKET_ENV] = sock
    os.environ[embed_client.TOKEN_ENV] = token
    hogs: list[subprocess.Popen] = []
    try:
        while True:  # the model loads in the background
            try:
                embed_client.encode_remote(["warm up"], None)
                break
            except embed_client.Unreachable:
                time.sleep(0.5)
        hogs = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)
        ]
        latencies: list[float] = []

        def client(j: int) -> None:
            for i in range(args.turns):
                for texts in ([f"{NOTE} {j} {i}", f"{NOTE} {i} {j} more"], [f"query {j} {i}"]):
                    t0 = time.perf_counter()
                    embed_client.encode_remote(texts, None)
                    latencies.append(time.perf_counter() - t0)
                time.sleep(args.pause)

        cpu0, t0 = proc_cpu(server.pid), time.perf_counter()
        threads = [threading.Thread(target=client, args=(j,)) for j in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall, cpu = time.perf_counter() - t0, proc_cpu(server.pid) - cpu0
    finally:
        for p in [*hogs, server]:
            p.kill()
        served_process.remove_private_dir(where)
    latencies.sort()
    n = len(latencies)
    print(
        f"threads={args.threads} hogs={args.hogs} clients={args.clients}: {n} encodes,"
        f" p50 {1000 * latencies[n // 2]:.0f} ms, p90 {1000 * latencies[int(n * 0.9)]:.0f} ms,"
        f" mean {1000 * statistics.mean(latencies):.0f} ms; wall {wall:.1f} s;"
        f" server CPU {cpu:.1f} s ({1000 * cpu / n:.0f} ms per encode)"
    )


if __name__ == "__main__":
    main()
